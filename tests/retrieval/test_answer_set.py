"""The complete answer set (talent_core.answer.answer_set: every end of the planned path
that reaches the best answer) and the planned evidence paths (talent_core.explore
.planned_hops / answer_evidence with a store) on a small in-memory KG."""

from __future__ import annotations

from answer_samples import sample_answer
from retrieval_helpers import BowEmbedder, kb, memory_store

from talent_core.answer import Plan, answer_set
from talent_core.explore import Hop, answer_evidence, evidence_json, planned_hops
from talent_core.models import RankedName

# Tom starred in three films; two have directors; one film is written by its director
KG = kb("""
Film A|starred_actors|Tom
Film B|starred_actors|Tom
Film C|starred_actors|Tom
Film A|directed_by|Dee
Film B|directed_by|Eve
Film B|written_by|Eve
Film C|release_year|1975
""")


def store():
    return memory_store(KG, BowEmbedder())


def test_the_answer_set_is_every_end_of_the_best_answers_planned_path():
    plan = Plan(ends={"starred_actors": {"Film A", "Film B", "Film C"},
                      "starred_actors > directed_by": {"Dee", "Eve"}})
    ranked = [RankedName(name="Film B", score=-1.0, id="Film B", path="starred_actors"),
              RankedName(name="Eve", score=-2.0, id="Eve", path="starred_actors > directed_by"),
              RankedName(name="Film A", score=-3.0, id="Film A", path="starred_actors")]
    got, path = answer_set(store(), ranked, plan)
    # the ranked ones first, in rank order; Film C (never scored) after them, from the store
    assert got == [("Film B", "Film B"), ("Film A", "Film A"), ("Film C", "Film C")]
    assert path == "starred_actors"
    # the best answer on no planned path: no set (the generator's margin chooses)
    assert answer_set(store(), [RankedName(name="Tom", score=0.0, id="Tom")], plan) == ([], None)
    assert answer_set(store(), [], plan) == ([], None)


def test_planned_hops_follow_the_path_from_the_anchor_in_the_edges_own_direction():
    hops = planned_hops(store(), ["Tom"], ["starred_actors", "directed_by"], ["Dee", "Eve", "x"])
    assert hops == {
        "Dee": [Hop("Film A", "starred_actors", "Tom"), Hop("Film A", "directed_by", "Dee")],
        "Eve": [Hop("Film B", "starred_actors", "Tom"), Hop("Film B", "directed_by", "Eve")],
    }
    # the path never passes through the anchor, and a relation the KG lacks reaches nothing
    assert planned_hops(store(), ["Tom"], ["starred_actors", "starred_actors"], ["Tom"]) == {}
    assert planned_hops(store(), ["Tom"], ["no_such"], ["Dee"]) == {}


def test_answer_evidence_with_a_store_is_the_planned_path_even_outside_s():
    # S holds Tom and Film One only; the answer Eve is reached past S by the planned path
    ans = sample_answer().model_copy(update={
        "answer": ["Eve"], "answer_ids": ["Eve"], "ranked": [],
        "answer_path": "starred_actors > directed_by"})
    ans.candidate.anchors = ["Tom"]
    ev = answer_evidence(ans, store())
    assert ev[0].id == "Eve" and len(ev[0].paths) == 1 and ev[0].paths[0].planned
    assert ev[0].paths[0].text == "Tom ←starred_actors— Film B —directed_by→ Eve"
    row = evidence_json(ans, ev)[0]
    assert row["planned"] == [True]
    assert [h["dst"] for h in row["evidence"][0]] == ["Tom", "Eve"]
    # without a store: paths over S only (Eve is not in S: none)
    assert answer_evidence(ans)[0].paths == []
