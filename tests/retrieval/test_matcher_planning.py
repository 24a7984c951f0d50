"""The matcher planner (talent_core.planning, issue 45): the beam over the anchors' own
paths (up to three relations, one more through a CVT node, CVT ends never planned), the
plan's confidence and runner-up, the unsure notice, and S joined by planned ends."""

from __future__ import annotations

import json

import numpy as np
import pytest
from retrieval_helpers import BowEmbedder, kb, memory_store

from talent_core.errors import PlannerError
from talent_core.models import Answer, Candidate, CandidateNode, PlannedPath, Seed
from talent_core.planning import join_plan, plan_paths
from talent_core.planning.beam import BeamSettings, complete, grow
from talent_core.planning.matcher import (
    PathMatcher,
    lora_deltas,
    path_words,
    readable_relation,
    save_matcher,
)
from talent_core.planning.plan import MatcherPlanner, resolve

KG = kb("""
Film A|film.film.starring|m.01
m.01|film.performance.actor|Tom
m.01|film.performance.character|Woody
Film B|film.film.starring|m.02
m.02|film.performance.actor|Tom
m.02|film.performance.character|Forrest
Tom|people.person.place_of_birth|Concord
Tom|people.person.spouse_s|Rita
Film A|film.film.directed_by|Dee
Dee|people.person.place_of_birth|Dallas
Dallas|location.location.containedby|Texas
""")


def store():
    return memory_store(KG, BowEmbedder())


def candidate(question: str, anchor: str = "Tom") -> Candidate:
    return Candidate(question=question, seeds=[Seed(id=anchor, name=anchor)],
                     anchors=[anchor], nodes=[CandidateNode(id=anchor, name=anchor, seed=True)])


def grown_in_full(s, anchors, score, settings, quick=None):
    """The beam's paths, each walked in full."""
    grown = grow(s, anchors, score, settings, quick)
    complete(s, anchors, grown, list(grown.scores), 2000)
    assert set(grown.ends) == set(grown.scores)
    return grown


def zero_shot() -> MatcherPlanner:
    return MatcherPlanner(PathMatcher({"name": "zero-shot", "trained": False}, BowEmbedder()))


def test_readable_relation_names():
    assert readable_relation("people.person.place_of_birth") == "person place of birth"
    assert readable_relation("directed_by") == "directed by"
    assert path_words(("film.performance.actor", "film.performance.character")) == \
        "performance actor, performance character"


def test_the_beam_walks_through_cvt_nodes_and_never_ends_there():
    s = store()
    grown = grown_in_full(s, ["Tom"], lambda ts: [0.0] * len(ts), BeamSettings(width=50))
    assert ("film.performance.actor",) not in grown.ends  # only CVT nodes there
    assert grown.ends[("film.performance.actor", "film.performance.character")] == {
        "Woody", "Forrest"}
    assert grown.ends[("people.person.place_of_birth",)] == {"Concord"}
    # three relations from Tom, a fourth because the path passed a CVT node
    assert grown.ends[("film.performance.actor", "film.film.starring", "film.film.directed_by",
                       "people.person.place_of_birth")] == {"Dallas"}
    assert all("Tom" not in e for e in grown.ends.values())  # never back at the anchor
    # the beam samples a prefix's ends (the first `frontier` by id) to extend it
    sampled = grow(s, ["Tom"], lambda ts: [0.0] * len(ts), BeamSettings(width=50, frontier=1))
    assert sampled.sample[("film.performance.actor", "film.performance.character")] == ["Woody"]


def test_without_a_cvt_paths_stop_at_max_rels():
    s = store()
    grown = grown_in_full(s, ["Texas"], lambda ts: [0.0] * len(ts),
                          BeamSettings(width=50, max_rels=2))
    assert max(len(t) for t in grown.ends) == 2
    deep = grown_in_full(s, ["Texas"], lambda ts: [0.0] * len(ts),
                         BeamSettings(width=50, max_rels=3))
    assert max(len(t) for t in deep.ends) == 3  # Film A; its CVTs would be a fourth: no
    assert deep.ends[("location.location.containedby", "people.person.place_of_birth",
                      "film.film.directed_by")] == {"Film A"}


def test_the_beam_keeps_the_best_prefixes_and_extensions():
    s = store()
    seen: list[list[tuple[str, ...]]] = []

    def score(ts):
        seen.append(list(ts))
        return [1.0 if t[0] == "people.person.place_of_birth" else 0.0 for t in ts]

    grown = grown_in_full(s, ["Dee"], score, BeamSettings(width=1))
    pob, within = "people.person.place_of_birth", "location.location.containedby"
    # one prefix kept per depth (walking back is allowed: only anchors are never re-entered)
    assert set(grown.ends) == {(pob,), (pob, within), (pob, within, within)}
    assert grown.ends[(pob, within, within)] == {"Dallas"}
    assert all(t[0] == pob for batch in seen[1:] for t in batch)
    # a quick relation score keeps only `extend` extensions of a prefix
    few = grown_in_full(s, ["Tom"], lambda ts: [0.0] * len(ts),
                        BeamSettings(width=50, extend=1),
                        quick=lambda rels: [1.0 if r == "film.performance.character" else 0.0
                                            for r in rels])
    two = [t for t in few.ends if len(t) == 2 and t[0] == "film.performance.actor"]
    assert two == [("film.performance.actor", "film.performance.character")]


def test_the_plan_follows_the_question_and_says_how_sure_it_is():
    s = store()
    plan = plan_paths(zero_shot(), s, candidate("Tom performance actor, performance character"))
    assert plan.kind == "zero-shot"
    assert plan.paths[0].rels == ["film.performance.actor", "film.performance.character"]
    assert plan.ends["film.performance.actor > film.performance.character"] == {"Woody",
                                                                                "Forrest"}
    assert 0 < plan.confidence <= 1 and plan.runner_up is not None
    assert plan.runner_up.prob <= plan.confidence
    born = plan_paths(zero_shot(), s, candidate("Tom place of birth"))
    assert born.paths[0].rels == ["people.person.place_of_birth"]
    assert born.prior.get("Concord", 0) > 0.5


def test_planned_ends_join_s_with_their_hops_within_the_budget():
    s = store()
    cand = candidate("Tom performance actor, performance character")
    plan = plan_paths(zero_shot(), s, cand)
    joined = join_plan(s, cand, plan, budget=10)
    ids = {n.id for n in joined.nodes}
    assert {"Woody", "Forrest", "m.01", "m.02"} <= ids
    edges = {(e.src, e.rel, e.dst) for e in joined.edges}
    assert ("m.01", "film.performance.character", "Woody") in edges  # the stored direction
    assert join_plan(s, cand, plan, budget=0) is cand


def answer(conf: float | None, runner: float | None) -> Answer:
    cand = candidate("q")
    return Answer(question="q", candidate=cand, plan=[PlannedPath(rels=["a"], prob=1.0, ends=2)],
                  plan_confidence=conf,
                  plan_runner_up=PlannedPath(rels=["b"], prob=runner, ends=3)
                  if runner is not None else None)


def test_an_unsure_plan_says_so_with_the_runner_up():
    assert answer(0.9, 0.05).plan_notice is None
    assert answer(None, None).plan_notice is None
    low = answer(0.4, 0.1).plan_notice
    assert low and "'a' (p 0.40)" in low and "'b' (p 0.10, 3 end(s) in the KG)" in low
    assert answer(0.6, 0.35).plan_unsure  # the runner-up close to the top path


def test_an_unsure_notice_names_the_path_the_answer_followed():
    ans = answer(0.4, 0.35)
    ans.plan.append(PlannedPath(rels=["b"], prob=0.35, ends=3))
    assert "answered as 'a' (p 0.40)" in ans.plan_notice
    ans.answer_path = "b"  # the best-ranked answer lies on the second reading
    note = ans.plan_notice
    assert "answered along 'b' (p 0.35)" in note and "likeliest reading: 'a' (p 1.00" in note
    ans.answer_path = "a"
    assert "answered as 'a'" in ans.plan_notice


def test_lora_deltas_are_alpha_over_rank_b_a():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((4, 2), dtype=np.float32)
    got = lora_deltas({"w.A": a, "w.B": b}, alpha=4.0, rank=2)
    assert got["w"].shape == (4, 3)
    np.testing.assert_allclose(got["w"], 2.0 * b @ a)
    with pytest.raises(PlannerError, match="without"):
        lora_deltas({"w.A": a}, 4.0, 2)


def test_resolve_reads_matcher_dirs_and_refuses_bad_ones(tmp_path):
    emb = BowEmbedder()
    assert resolve("none", "bow-test", emb) is None
    assert resolve("zero-shot", "bow-test", emb).kind == "zero-shot"
    # the shipped matcher tunes MiniLM: another store embedder plans zero-shot
    assert resolve("bundled", "bow-test", emb).kind == "zero-shot"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "matcher.json").write_text('{"format": "other"}')
    (tmp_path / "bad" / "lora.npz").write_bytes(b"")
    with pytest.raises(PlannerError, match="format"):
        resolve(str(tmp_path / "bad"), "bow-test", emb)
    save_matcher(tmp_path / "m", {"name": "m", "base_model": "minilm", "lora_rank": 1,
                                  "lora_alpha": 1.0}, {})
    with pytest.raises(PlannerError, match="a matcher of 'minilm'"):
        resolve(str(tmp_path / "m"), "bow-test", emb)


TWO = kb("""
Heat|directed_by|Michael Mann
Heat|starred_actors|Al Pacino
Insider|starred_actors|Al Pacino
Insider|directed_by|Michael Mann
Ali|directed_by|Michael Mann
Serpico|starred_actors|Al Pacino
Heat|has_tags|michael mann
""")


def two_anchor(question: str, *names: str) -> Candidate:
    return Candidate(question=question, seeds=[Seed(id=n, name=n) for n in names],
                     anchors=list(names),
                     nodes=[CandidateNode(id=n, name=n, seed=True) for n in names])


def test_two_mentions_answer_with_the_nodes_both_paths_reach():
    s = memory_store(TWO, BowEmbedder())
    cand = two_anchor("films directed by Michael Mann with starred actors Al Pacino",
                      "Michael Mann", "Al Pacino")
    plan = plan_paths(zero_shot(), s, cand)
    assert plan.joint == ["Michael Mann", "Al Pacino"]
    assert {p.anchor: p.rels for p in plan.paths} == {"Michael Mann": ["directed_by"],
                                                      "Al Pacino": ["starred_actors"]}
    assert set(plan.prior) == {"Heat", "Insider"}  # not Ali, not Serpico
    assert all(e == {"Heat", "Insider"} for e in plan.ends.values())


def test_case_variants_of_one_name_plan_together():
    s = memory_store(TWO, BowEmbedder())
    cand = two_anchor("films directed by Michael Mann", "Michael Mann", "michael mann")
    plan = plan_paths(zero_shot(), s, cand)
    assert plan.joint == [] and plan.paths[0].rels == ["directed_by"]
    assert {"Ali", "Heat", "Insider"} <= set(plan.ends["directed_by"])


def test_a_relation_repeats_at_most_max_repeat_times_in_a_row():
    s = memory_store(kb("a|r|b\nb|r|c\nc|r|d\nd|r|e"), BowEmbedder())
    grown = grown_in_full(s, ["a"], lambda ts: [0.0] * len(ts), BeamSettings(width=50))
    assert set(grown.ends) == {("r",), ("r", "r")}
    more = grown_in_full(s, ["a"], lambda ts: [0.0] * len(ts),
                         BeamSettings(width=50, max_repeat=3))
    assert more.ends[("r", "r", "r")] == {"b", "d"}  # back to b, or on to d


def test_a_replaced_matcher_is_read_again_and_never_half(tmp_path):
    """`save_matcher` writes the factors under a new name, then matcher.json atomically;
    `load_matcher` loads again when matcher.json was replaced (a running server picks up
    `train planner --self`), and keeps its loaded one while it is not."""
    from talent_core.planning.matcher import load_matcher, load_meta

    d = tmp_path / "own"
    base = {"base_model": "minilm", "lora_rank": 1, "lora_alpha": 1.0}
    w = "encoder.layer.0.attention.self.query.weight"
    save_matcher(d, {**base, "name": "first"}, {f"{w}.A": np.zeros((1, 384)),
                                                f"{w}.B": np.zeros((384, 1))})
    first = load_matcher(str(d), "minilm", None)
    assert first.name == "first" and load_matcher(str(d), "minilm", None) is first
    first_file = load_meta(d)["lora"]
    save_matcher(d, {**base, "name": "second"}, {f"{w}.A": np.ones((1, 384)),
                                                 f"{w}.B": np.ones((384, 1))})
    second = load_matcher(str(d), "minilm", None)
    assert second.name == "second" and second is not first
    assert load_meta(d)["lora"] != first_file
    save_matcher(d, {**base, "name": "third"}, {f"{w}.A": np.full((1, 384), 2.0),
                                                f"{w}.B": np.full((384, 1), 2.0)})
    # the newest factors and the ones just replaced are kept, older ones go; no temp file
    assert len(list(d.glob("lora-*.npz"))) == 2 and not (d / first_file).exists()
    assert not [p for p in d.iterdir() if p.name.startswith(".")]


def test_a_matcher_json_naming_a_path_is_refused(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "matcher.json").write_text(json.dumps({"format": "talent-path-matcher/1",
                                                "lora": "../../etc/x.npz"}))
    with pytest.raises(PlannerError, match="a file name"):
        resolve(str(d), "minilm", BowEmbedder())


def test_one_self_adaptation_of_a_matcher_at_a_time(tmp_path):
    from talent_core.errors import TrainingBusyError
    from talent_core.training.matcher import exclusive

    out = tmp_path / "data" / "matcher"
    with exclusive(out):
        with pytest.raises(TrainingBusyError, match="another .* is adapting"):
            with exclusive(out):
                pass
    with exclusive(out):  # released when the holder ends
        pass



def test_a_relation_the_topic_lacks_is_said_not_answered_with_confidence():
    """"who directed The Matrix" on a KG without its director: the closest path the topic
    has answers, and the plan says which relation the question read as (`plan_notice`);
    a relation within `MISSING_GAP` of the anchors' best path, or none, says nothing."""
    from types import SimpleNamespace

    from talent_core.models import PlannedPath, plan_notice
    from talent_core.planning.plan import MISSING_GAP, missing_relation

    cos = {("directed_by",): 0.9, ("release_year",): 0.2, ("has_tags",): 0.4}
    matcher = SimpleNamespace(similarity=lambda q, paths: np.array([cos[p] for p in paths]))
    store = SimpleNamespace(top_relations=lambda v, k: [SimpleNamespace(name=r[0])
                                                         for r in cos][:k])
    q = np.ones(4)
    assert missing_relation(store, matcher, q, best=0.5) == "directed_by"
    assert missing_relation(store, matcher, q, best=0.9 - MISSING_GAP + 0.01) is None
    empty = SimpleNamespace(top_relations=lambda v, k: [])
    assert missing_relation(empty, matcher, q, best=0.0) is None
    top = PlannedPath(rels=["starred_actors", "directed_by"], prob=0.98, ends=2,
                      missing="directed_by")
    notice = plan_notice([top], 0.98, None)
    assert notice == ("the question reads as 'directed_by', which the KG does not hold for "
                      "its topic: answered by the closest path it has, "
                      "'starred_actors > directed_by'")
    assert plan_notice([top.model_copy(update={"missing": None})], 0.98, None) is None


def test_the_words_that_join_two_mentions_are_no_relations_words():
    from talent_core.planning.plan import mention_texts

    q = "which films feature both Pamela Reed and Stephanie Zimbalist"
    # "both" read by one mention's path is the co-stars path; "and" leaves the second
    # mention no words of its own: it reads the first one's
    assert mention_texts(q, ["Pamela Reed", "Stephanie Zimbalist"]) == [
        "which films feature", "which films feature"]
    q = "which films directed by Brian Yuzna star Jason Barry"
    assert mention_texts(q, ["Brian Yuzna", "Jason Barry"]) == ["which films directed by",
                                                                "star"]
