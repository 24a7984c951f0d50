"""The relation-path planner's pure parts and what the answer stage does with a plan: walks
through a store (direction ignored, anchors never re-entered, caps flagged), the node prior
and the rescoring, the truncated softmax plan, the planned ends joining the candidate
answers (never a CVT node), and the relation-path label records the matcher trains on.

(Ported from the softmax-classifier planner's tests; the matcher and its beam are tested in
test_matcher_planning.py and test_matcher_training.py.)"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from retrieval_helpers import BowEmbedder, kb, memory_store

from talent_core.answer import join_planned, rescored
from talent_core.errors import DataError
from talent_core.llm.ranking import Scored
from talent_core.models import Candidate, CandidateNode, PlannedPath, Seed
from talent_core.planning import plan_paths
from talent_core.planning.matcher import PathMatcher
from talent_core.planning.paths import (
    node_paths,
    node_prior,
    plan_text,
    planned,
    rescore,
    top_plan,
    walk,
)
from talent_core.planning.plan import MatcherPlanner
from talent_core.training.path_labels import (
    LABEL_SOURCES,
    PathLabelRecord,
    path_labels,
    read_path_labels,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "webqsp-train" / "train.jsonl"

# Film1 -directed_by-> Dir1, Film1 -starred_actors-> Act1, Act1 <-starred_actors- Film2,
# Film2 -directed_by-> Dir2, Film2 -directed_by-> Dir1 (Dir1 directed both)
KG = kb("""
Film1|directed_by|Dir1
Film1|starred_actors|Act1
Film2|starred_actors|Act1
Film2|directed_by|Dir2
Film2|directed_by|Dir1
""")


def store():
    return memory_store(KG, BowEmbedder())


def zero_shot(**kw) -> MatcherPlanner:
    return MatcherPlanner(PathMatcher({"name": "zero-shot", "trained": False}, BowEmbedder()),
                          **kw)


# --- walks ---------------------------------------------------------------------------------


def test_walk_through_a_store_ignores_direction_and_never_reenters_an_anchor():
    s = store()
    paths = [("directed_by",), ("starred_actors", "starred_actors"),
             ("starred_actors", "starred_actors", "directed_by"), ("directed_by", "directed_by")]
    ends, cut = walk(s.follow, ["Film1"], paths, limit=10)
    assert not cut and set(ends) == set(paths)  # exactly the asked paths
    assert ends[("directed_by",)] == {"Dir1"}
    assert ends[("starred_actors", "starred_actors")] == {"Film2"}  # against the edge's way
    # the directors of the films sharing an actor: Film1 itself is never re-entered
    assert ends[("starred_actors", "starred_actors", "directed_by")] == {"Dir1", "Dir2"}
    assert ends[("directed_by", "directed_by")] == {"Film2"}
    assert all("Film1" not in e for e in ends.values())
    assert walk(s.follow, ["Film1"], [("in_language",)], limit=10) == ({("in_language",): set()},
                                                                       False)


def test_walk_follows_each_prefix_once_and_flags_the_caps():
    s = store()
    calls: list[tuple[list[str], str, int]] = []

    def follow(ids, rel, limit):
        calls.append((list(ids), rel, limit))
        return s.follow(ids, rel, limit)

    paths = [("starred_actors",), ("starred_actors", "starred_actors"),
             ("starred_actors", "directed_by"), ("directed_by", "has_genre", "has_genre")]
    walk(follow, ["Film1"], paths, limit=10)
    # one call per distinct prefix, one neighbour past the limit asked for (to see a cut);
    # a prefix that reached nothing is not followed further
    assert [(ids, rel) for ids, rel, _ in calls] == [
        (["Film1"], "starred_actors"), (["Act1"], "starred_actors"), (["Act1"], "directed_by"),
        (["Film1"], "directed_by"), (["Dir1"], "has_genre")]
    assert {lim for *_, lim in calls} == {11}

    # Dir1 has two films: one neighbour per node cuts the walk, and says so
    ends, cut = walk(s.follow, ["Dir1"], [("directed_by",)], limit=1)
    assert cut and ends[("directed_by",)] == {"Film1"}  # in id order
    assert walk(s.follow, ["Dir1"], [("directed_by",)], limit=2) == (
        {("directed_by",): {"Film1", "Film2"}}, False)
    # a frontier past max_frontier is cut in id order: Film2's other director is not reached
    two = [("directed_by", "directed_by")]
    assert walk(s.follow, ["Dir1"], two, limit=10) == ({two[0]: {"Dir2"}}, False)
    assert walk(s.follow, ["Dir1"], two, limit=10, max_frontier=1) == ({two[0]: set()}, True)


# --- the plan, the prior and the rescoring ---------------------------------------------------


def test_plan_text_removes_the_anchor_mention():
    assert plan_text("who directed The Matrix", ["the matrix"]) == "who directed"


def test_top_plan_keeps_the_likeliest_paths_until_the_mass():
    plan = top_plan({("a",): 9.0, ("b",): 1.0}, mass=0.95)
    assert [t for t, _ in plan] == [("a",)] and plan[0][1] == pytest.approx(1.0)
    even = top_plan({("b",): 0.0, ("a", "c"): 0.0, ("a",): 0.0}, mass=0.95, top=5)
    # ties: the shorter path, then by name; renormalised over what is kept
    assert [t for t, _ in even] == [("a",), ("b",), ("a", "c")]
    assert [q for _, q in even] == pytest.approx([1 / 3] * 3)
    capped = top_plan({("b",): 0.0, ("a", "c"): 0.0, ("a",): 0.0}, mass=0.95, top=2)
    assert [t for t, _ in capped] == [("a",), ("b",)]
    assert [q for _, q in capped] == pytest.approx([0.5, 0.5])
    assert top_plan({}) == []


def test_prior_sums_the_planned_paths_and_rescore_prefers_on_path_names():
    ends = {("a",): {"x", "y"}, ("b",): {"y"}}
    plan = [(("a",), 0.7), (("b",), 0.3)]
    prior = node_prior(plan, ends)
    assert prior == pytest.approx({"x": 0.7, "y": 1.0})
    assert node_paths([(("b",), 0.3), (("a",), 0.7)], ends) == {"x": ("a",), "y": ("a",)}
    assert node_prior(plan, {}) == {}
    on = rescore(-3.0, prior["y"], 5.0, 1e-3)
    off = rescore(-1.0, 0.0, 5.0, 1e-3)
    assert on > off  # a likelier name off every planned path loses
    assert off == pytest.approx(-1.0 + 5.0 * math.log(1e-3))
    assert rescore(-1.0, 0.0, 0.0, 1e-3) == -1.0  # w = 0: the model's score alone
    assert planned([(("a", "b"), 0.123456)], {("a", "b"): {"x", "y"}}) == [
        PlannedPath(rels=["a", "b"], prob=0.1235, ends=2)]


def candidate(question: str, anchor: str) -> Candidate:
    return Candidate(question=question, seeds=[Seed(id=anchor, name=anchor)],
                     anchors=[anchor], nodes=[CandidateNode(id=anchor, name=anchor, seed=True)])


def test_ranked_answers_are_rescored_with_the_planners_weight():
    s = store()
    planner = zero_shot()
    plan = plan_paths(planner, s, candidate("Film1 directed by", "Film1"))
    assert plan.kind == "zero-shot" and plan.paths[0].rels == ["directed_by"]
    # (bag-of-words ties directed_by with directed_by > directed_by: the shorter first)
    assert plan.prior["Dir1"] == max(plan.prior.values()) > plan.prior["Act1"]
    kg = {"dir1": ("Dir1", "Dir1"), "act1": ("Act1", "Act1")}
    # the language model prefers the actor; the plan puts the director first
    ranked, scored = rescored(planner, [Scored("act1", -1.0), Scored("dir1", -2.0)], kg, plan)
    assert [r.name for r in ranked] == ["Dir1", "Act1"]
    for r in ranked:
        assert r.score == pytest.approx(
            r.lm_score + planner.answer_weight * math.log(r.prior + planner.eps), abs=0.02)
        # (the prior is reported to 4 places: w = 20 turns its rounding into ~0.01)
    assert ranked[0].path == "directed_by" and ranked[0].id == "Dir1"
    assert [x.name for x in scored] == ["dir1", "act1"]


# --- planned ends joining the candidate answers ----------------------------------------------


class JoinLimit:
    """The one thing `join_planned` reads of a planner."""

    def __init__(self, join_limit: int):
        self.join_limit = join_limit


def test_planned_ends_join_the_candidate_answers_likeliest_first():
    s = store()
    prior = {"Dir1": 1.0, "Film2": 0.2, "Act1": 0.9, "Dir2": 0.5}
    kg = {"dir1": ("Dir1", "Dir1")}  # already a candidate
    join_planned(s, JoinLimit(2), kg, prior)  # type: ignore[arg-type]
    # the two likeliest planned ends not yet candidates, with the KG's names
    assert kg == {"dir1": ("Dir1", "Dir1"), "act1": ("Act1", "Act1"), "dir2": ("Dir2", "Dir2")}

    kg = {"dir1": ("Dir1", "Dir1")}
    join_planned(s, zero_shot(join_limit=1), kg, prior)
    assert kg == {"dir1": ("Dir1", "Dir1"), "act1": ("Act1", "Act1")}
    assert zero_shot().join_limit == 50

    kg = {}
    join_planned(s, None, kg, prior)  # no planner: nothing joins
    assert kg == {}


def test_cvt_ends_never_join_the_answers():
    s = memory_store(kb("""
Ann Lee|people.person.spouse_s|m.0abc
m.0abc|people.marriage.spouse|Bob
"""), BowEmbedder())
    kg: dict[str, tuple[str, str]] = {}
    join_planned(s, JoinLimit(10), kg, {"m.0abc": 0.9, "Bob": 0.5})  # type: ignore[arg-type]
    assert kg == {"bob": ("Bob", "Bob")}
    # through a plan: the path walks through the CVT node, which is never an end
    plan = plan_paths(zero_shot(), s, candidate("Ann Lee person spouse s, marriage spouse",
                                                "Ann Lee"))
    assert plan.paths and "m.0abc" not in plan.prior and plan.prior.get("Bob", 0) > 0
    kg = {}
    join_planned(s, zero_shot(), kg, plan.prior)
    assert kg == {"bob": ("Bob", "Bob")}


# --- relation-path label records ---------------------------------------------------------------

BORN = ["people.person.place_of_birth"]
SPOUSE = ["people.person.spouse_s", "people.marriage.spouse"]


def record(i: int, question: str, chain: list[str], ground: list[list[str]],
           split: str = "train") -> dict:
    return {"id": f"WebQTrn-{i}", "split": split, "question": question, "q_entity": ["Ann Lee"],
            "answer": ["x"], "inferential_chain": chain, "ground_paths": ground}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reader_reads_good_records_and_names_the_bad_line(tmp_path):
    good = [json.dumps(record(0, "where was ann lee born", BORN, [BORN, []])),
            "",
            json.dumps({**record(1, "who did ann lee marry", SPOUSE, [SPOUSE], "validation"),
                        "extra": "ignored"})]
    recs = read_path_labels(write_lines(tmp_path / "ok.jsonl", good))
    assert [r.id for r in recs] == ["WebQTrn-0", "WebQTrn-1"]
    assert recs[0].ground_paths == [BORN, []] and recs[1].split == "validation"
    assert recs[0].q_entity == ["Ann Lee"] and recs[0].inferential_chain == BORN

    bad_json = write_lines(tmp_path / "bad.jsonl", [good[0], "{not json"])
    with pytest.raises(DataError, match=r"bad\.jsonl:2: invalid JSON"):
        read_path_labels(bad_json)
    bad_split = write_lines(tmp_path / "split.jsonl", [
        good[0], good[0], json.dumps(record(2, "q", BORN, [BORN], "test"))])
    with pytest.raises(DataError, match=r"split\.jsonl:3: split"):
        read_path_labels(bad_split)
    no_question = write_lines(tmp_path / "noq.jsonl", [json.dumps({"id": "a", "q_entity": []})])
    with pytest.raises(DataError, match=r"noq\.jsonl:1: question"):
        read_path_labels(no_question)
    empty_rel = write_lines(tmp_path / "rel.jsonl", [json.dumps(record(3, "q", BORN, [[" "]]))])
    with pytest.raises(DataError, match=r"rel\.jsonl:1: ground_paths"):
        read_path_labels(empty_rel)
    empty_chain = write_lines(tmp_path / "chain.jsonl", [json.dumps(record(4, "q", [""], []))])
    with pytest.raises(DataError, match=r"chain\.jsonl:1: inferential_chain"):
        read_path_labels(empty_chain)
    not_object = write_lines(tmp_path / "list.jsonl", [good[0], "[1, 2]"])
    with pytest.raises(DataError, match=r"list\.jsonl:2: expected a JSON object"):
        read_path_labels(not_object)
    with pytest.raises(DataError, match=r"blank\.jsonl: no label records"):
        read_path_labels(write_lines(tmp_path / "blank.jsonl", ["", "  "]))
    with pytest.raises(DataError, match=r"missing\.jsonl: cannot read"):
        read_path_labels(tmp_path / "missing.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"id": "\xe9"}\n')
    with pytest.raises(DataError, match=r"latin1\.jsonl: invalid UTF-8"):
        read_path_labels(tmp_path / "latin1.jsonl")


def test_label_sources():
    assert LABEL_SOURCES == ("ground", "chain", "both")
    noisy = [["people.person.gender", "people.person.gender"], ["people.marriage.spouse"] * 2]
    rec = PathLabelRecord.model_validate(record(0, "q", SPOUSE, [*noisy, []]))
    assert path_labels(rec, "ground") == {tuple(p): 0.5 for p in noisy}  # the empty path: no
    assert path_labels(rec, "chain") == {tuple(SPOUSE): 1.0}
    # both: the ground paths sharing a relation with the chain
    assert path_labels(rec, "both") == {("people.marriage.spouse",) * 2: 1.0}
    none_agree = PathLabelRecord.model_validate(record(1, "q", BORN, [SPOUSE]))
    assert path_labels(none_agree, "both") == {tuple(SPOUSE): 1.0}
    no_ground = PathLabelRecord.model_validate(record(2, "q", BORN, []))
    assert path_labels(no_ground, "both") == {tuple(BORN): 1.0}
    assert path_labels(no_ground, "ground") == {}
    long = PathLabelRecord.model_validate(record(3, "q", ["a", "b", "c", "d"], [["a"] * 4]))
    assert path_labels(long, "both") == {}  # longer than max_len
    assert path_labels(long, "both", max_len=4) == {("a",) * 4: 1.0}


@pytest.mark.data
@pytest.mark.skipif(not DATA.is_file(), reason="../shared/data/webqsp-train absent")
def test_webqsp_training_labels_read():
    recs = read_path_labels(DATA)
    assert len(recs) == 3072
    assert sum(r.split == "validation" for r in recs) == 246
    assert sum(not r.q_entity for r in recs) <= 1
    assert sum(bool(r.ground_paths) for r in recs) == 2950
    assert sum(bool(r.inferential_chain) for r in recs) == 3021
    assert sum(bool(path_labels(r, "both")) for r in recs) >= 3000
