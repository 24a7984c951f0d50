"""Planning over the anchors' own relation paths (talent_core.planning, issue 29): trained
types restricted to those that start at an anchor, the zero-shot planner's readable path
words, CVT nodes walked through but never planned ends, and S joined by planned ends."""

from __future__ import annotations

import numpy as np
from retrieval_helpers import BowEmbedder, kb, memory_store

from talent_core.models import Candidate, CandidateNode, Seed
from talent_core.planning import ANCHOR_CAPS, join_plan, plan_paths
from talent_core.retrieval.planner import (
    PlannerModel,
    anchor_types,
    path_words,
    plan_scores,
    readable_relation,
    top_plan,
    trained_types,
    type_ends,
    zero_shot_planner,
)

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
""")


def store():
    return memory_store(KG, BowEmbedder())


def candidate(question: str, anchor: str = "Tom") -> Candidate:
    return Candidate(question=question, seeds=[Seed(id=anchor, name=anchor)],
                     anchors=[anchor], nodes=[CandidateNode(id=anchor, name=anchor, seed=True)])


def test_readable_relation_names():
    assert readable_relation("people.person.place_of_birth") == "person place of birth"
    assert readable_relation("directed_by") == "directed by"
    assert path_words(("film.performance.actor", "film.performance.character")) == \
        "performance actor, performance character"


def test_anchor_types_walk_through_cvt_nodes_and_never_end_there():
    s = store()
    sub = s.neighbourhood(["Tom"], 2, ANCHOR_CAPS)
    cvt = {n.id for n in sub.nodes if n.name.startswith("m.")}
    own = anchor_types(sub.edges, ["Tom"], 2, cvt)
    assert ("film.performance.actor",) not in own  # ends only at CVT nodes
    assert own[("film.performance.actor", "film.performance.character")] == {"Woody", "Forrest"}
    assert own[("people.person.place_of_birth",)] == {"Concord"}
    assert ("film.performance.actor",) in type_ends(sub.edges, ["Tom"], 2)


def test_scores_and_top_plan():
    sim = {("a",): 0.9, ("b",): 0.1}
    assert plan_scores({}, sim, 10.0) == {("a",): 9.0, ("b",): 1.0}
    assert plan_scores({("b",): 0.0, ("a",): -20.0}, sim, 1.0)[("b",)] > \
        plan_scores({("b",): 0.0, ("a",): -20.0}, sim, 1.0)[("a",)]
    plan = top_plan({("a",): 9.0, ("b",): 1.0}, mass=0.95)
    assert [t for t, _ in plan] == [("a",)] and abs(plan[0][1] - 1.0) < 1e-9
    plan = top_plan({("a",): 0.0, ("b",): 0.0}, mass=0.95, top=5)
    assert [round(q, 3) for _, q in plan] == [0.5, 0.5]
    assert top_plan({}) == []


def planner_over(paths: list[tuple[str, ...]], favourite: int, dim: int) -> PlannerModel:
    bias = np.full(len(paths), -5.0, np.float32)
    bias[favourite] = 5.0
    return PlannerModel(paths=paths, weight=np.zeros((len(paths), dim), np.float32), bias=bias,
                        meta={"name": "toy", "embedding_model": "bow", "consider": 2})


def test_trained_types_are_the_likeliest_that_start_at_an_anchor():
    paths = [("x",), ("y", "z"), ("people.person.spouse_s",), ("w", "x")]
    m = planner_over(paths, 0, 4)
    p = m.probabilities(np.ones(4))
    rels = {"x", "y", "z", "people.person.spouse_s", "w"}
    assert trained_types(m, p, {"people.person.spouse_s", "w"}, rels) == [
        ("people.person.spouse_s",), ("w", "x")]
    assert trained_types(m, p, {"x", "y", "w"}, rels) == [("x",), ("y", "z"), ("w", "x")]
    # a type with a relation the store lacks is never walked
    assert trained_types(m, p, {"w"}, rels - {"x"}) == []


def test_a_trained_plan_uses_only_paths_the_anchor_has():
    s, emb = store(), BowEmbedder()
    dim = len(emb.encode(["x"])[0])
    # the planner's favourite type does not exist at Tom: the plan is the next one that does
    paths = [("film.film.directed_by",), ("people.person.place_of_birth",)]
    m = planner_over(paths, 0, dim)
    m.bias[:] = [5.0, 0.0]
    plan = plan_paths(m, {r for p in paths for r in p}, emb, s, candidate("where was Tom born"))
    assert [p.rels for p in plan.paths] == [["people.person.place_of_birth"]]
    assert plan.kind == "trained (toy)" and plan.prior == {"Concord": 1.0}


def test_zero_shot_plans_by_the_path_words_and_falls_in_for_a_trained_planner():
    s, emb = store(), BowEmbedder()
    zs = zero_shot_planner("bow")
    plan = plan_paths(zs, set(), emb, s, candidate("what character did Tom play performance"))
    assert plan.kind == "zero-shot"
    assert plan.paths[0].rels == ["film.performance.actor", "film.performance.character"]
    assert plan.ends["film.performance.actor > film.performance.character"] == {"Woody",
                                                                                "Forrest"}
    # a trained planner none of whose types start at the anchor: zero-shot answers
    dim = len(emb.encode(["x"])[0])
    m = planner_over([("film.film.directed_by",)], 0, dim)
    plan = plan_paths(m, {"film.film.directed_by"}, emb, s, candidate("who is Tom's spouse"))
    assert plan.kind == "zero-shot" and plan.paths[0].rels == ["people.person.spouse_s"]


def test_planned_ends_join_s_with_their_hops_within_the_budget():
    s, emb = store(), BowEmbedder()
    cand = candidate("what character did Tom play performance")
    plan = plan_paths(zero_shot_planner("bow"), set(), emb, s, cand)
    joined = join_plan(s, cand, plan, budget=10)
    ids = {n.id for n in joined.nodes}
    assert {"Woody", "Forrest", "m.01", "m.02"} <= ids
    edges = {(e.src, e.rel, e.dst) for e in joined.edges}
    assert ("m.01", "film.performance.character", "Woody") in edges  # the stored direction
    assert ("m.01", "film.performance.actor", "Tom") in edges
    small = join_plan(s, cand, plan, budget=2)  # one end and its CVT: the second does not fit
    assert len(small.nodes) == 3
    assert join_plan(s, cand, plan, budget=0) is cand
    assert cand.nodes == [CandidateNode(id="Tom", name="Tom", seed=True)]  # not changed
