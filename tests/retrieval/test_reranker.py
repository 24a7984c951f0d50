"""The path re-ranker (talent_core.planning.reranker, training.reranker; issue 45): mined
negatives are the bi-encoder's confusions, a fit is read back by the numpy query path, and
the planner re-ranks the beam's best paths with it (logit + lambda x the matcher's score)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from retrieval_helpers import BowEmbedder, kb, memory_store

from talent_core.errors import PlannerError
from talent_core.models import Candidate, CandidateNode, Seed
from talent_core.operators.run import best_path
from talent_core.planning import plan_paths
from talent_core.planning.matcher import META_FILE, Pair, PathMatcher
from talent_core.planning.plan import MatcherPlanner, resolve
from talent_core.planning.reranker import RERANKER_DIR, load_reranker, pair_text
from talent_core.training.reranker import RerankSettings, fit_reranker, mine

KG = kb("""
Heat|directed_by|Michael Mann
Heat|written_by|Michael Mann
Heat|starred_actors|Al Pacino
Collateral|directed_by|Michael Mann
""")


def bow() -> PathMatcher:
    return PathMatcher({"name": "bow", "trained": True}, BowEmbedder())


def test_mined_negatives_are_the_bi_encoders_nearest_non_gold_paths():
    own = Pair("directed by whom", [("directed_by",)],
               [("written_by",), ("directed_by", "directed_by"), ("starred_actors",)], "self")
    wq = Pair("person place of birth", [("people.person.place_of_birth",)], [], "webqsp")
    other = Pair("x", [("people.person.place_of_death",)], [], "webqsp")
    far = Pair("y", [("film.film.genre",)], [], "webqsp")
    got = mine([own, wq, other, far], bow(), k=2)
    assert got[0] == [("directed_by", "directed_by"), ("written_by",)]  # shares "directed"
    # a WebQSP record: the same domain's gold paths of the other records, never its own
    assert got[1] == [("people.person.place_of_death",)]
    assert all(g not in m for p, m in zip([own, wq, other, far], got) for g in p.gold)


class Fixed:
    """A re-ranker of fixed logits per path text."""

    name = "fixed"

    def __init__(self, logits: dict[str, float]):
        self.logits = logits
        self.asked: list[tuple[str, list]] = []

    def score(self, question, paths):
        self.asked.append((question, [tuple(p) for p in paths]))
        return np.array([self.logits.get(" > ".join(p), 0.0) for p in paths])


def test_the_planner_re_ranks_the_beams_best_paths_only():
    rr = Fixed({"written_by": 5.0, "starred_actors": 9.0})
    planner = MatcherPlanner(bow(), reranker=rr, rerank=2, rerank_weight=0.5)
    scores = {("directed_by",): 10.0, ("written_by",): 8.0, ("starred_actors",): 1.0}
    got = planner.reranked("who directed", scores)
    # starred_actors is not among the matcher's best two: never re-scored, dropped; the
    # others (logit + 0.5 x the matcher's) / 1.5
    assert got == pytest.approx({("directed_by",): 5.0 / 1.5, ("written_by",): 9.0 / 1.5})
    assert rr.asked == [("who directed", [("directed_by",), ("written_by",)])]
    assert MatcherPlanner(bow()).reranked("q", scores) is scores  # none: as the beam scored
    assert planner.kind == "matcher (bow) + re-ranker"


def test_a_plan_follows_the_re_rankers_reading():
    s = memory_store(KG, BowEmbedder())
    cand = Candidate(question="who made Heat", seeds=[Seed(id="Heat", name="Heat")],
                     anchors=["Heat"], nodes=[CandidateNode(id="Heat", name="Heat", seed=True)])
    plain = plan_paths(MatcherPlanner(bow()), s, cand)
    rr = Fixed({"starred_actors": 50.0})
    planned = plan_paths(MatcherPlanner(bow(), reranker=rr, rerank=8), s, cand)
    assert plain.paths[0].rels != ["starred_actors"]
    assert planned.paths[0].rels == ["starred_actors"] and planned.confidence > 0.99
    assert planned.kind.endswith("+ re-ranker")
    assert rr.asked and rr.asked[0][0] == "who made"  # the planned text, names removed


def test_an_operators_path_follows_the_re_ranker_too():
    # compare / exists plan each entity's path themselves (`operators.run.best_path`)
    s = memory_store(KG, BowEmbedder())
    plain = best_path(s, MatcherPlanner(bow()), ["Heat"], "who made")
    got = best_path(s, MatcherPlanner(bow(), reranker=Fixed({"starred_actors": 50.0}),
                                       rerank=8), ["Heat"], "who made")
    assert plain is not None and plain[0] != ("starred_actors",)
    assert got is not None and got[0] == ("starred_actors",)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_reranker_fit_is_read_back_by_the_numpy_query_path_and_found_by_resolve(tmp_path):
    pairs = [Pair("who directed", [("directed_by",)], [("starred_actors",)], "metaqa"),
             Pair("who starred in", [("starred_actors",)], [("directed_by",)], "metaqa")]
    hard = [[("starred_actors",)], [("directed_by",)]]
    out = tmp_path / "m" / RERANKER_DIR
    meta = fit_reranker(pairs, hard, out, name="toy", base_model="minilm",
                        settings=RerankSettings(epochs=20, batch=2, rank=2, alpha=4.0,
                                                lr=1e-2, draws=0))
    assert meta["role"] == "reranker" and meta["training"]["steps"] == 20
    rr = load_reranker(out, "minilm")
    for p in pairs:  # fitted: each question's gold above its negative, read in numpy
        z = rr.score(p.text, [p.gold[0], *p.negatives])
        assert z[0] > z[1], (p.text, z)
    again = fit_reranker(pairs, hard, tmp_path / "again", name="toy2", base_model="minilm",
                         settings=RerankSettings(epochs=1, batch=2, lr=0.0), init=out)
    assert again["lora_rank"] == 2  # the rank it started from
    np.testing.assert_allclose(load_reranker(tmp_path / "again", "minilm").score(
        "who directed", [("directed_by",)]), rr.score("who directed", [("directed_by",)]),
        atol=1e-4)  # lr 0: the factors and head it started from
    assert pair_text("q", "w") == "q [SEP] w"
    # a matcher directory holding it: resolve plans with both
    from talent_core.planning.matcher import save_matcher

    save_matcher(tmp_path / "m", {"name": "bi", "base_model": "minilm", "lora_rank": 2,
                                  "lora_alpha": 4.0}, {})
    planner = resolve(str(tmp_path / "m"), "minilm", None)
    assert planner.reranker is rr and planner.kind == "matcher (bi) + re-ranker"
    assert load_reranker(tmp_path / "nothing", "minilm") is None
    body = json.loads((tmp_path / "m" / META_FILE).read_text())
    (out / META_FILE).write_text(json.dumps({**body, "lora": meta_lora(out)}))
    with pytest.raises(PlannerError, match="not a re-ranker"):
        load_reranker(out, "minilm")


def meta_lora(directory):
    return json.loads((directory / META_FILE).read_text())["lora"]
