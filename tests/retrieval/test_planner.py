"""The relation-path planner's pure parts: path-type ends, labels, walks through a store,
the prior, the rescoring, the classifier and its file format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from talent_core.errors import PlannerError
from talent_core.models import Edge
from talent_core.retrieval.planner import (
    PlannerModel,
    fit,
    label_types,
    node_prior,
    plan_text,
    rescore,
    resolve_planner,
    type_ends,
    walk,
)
from talent_core.store.memory import MemoryStore

# film1 -directed_by-> dir1, film1 -starred_actors-> act1, act1 <-starred_actors- film2,
# film2 -directed_by-> dir2, film2 -directed_by-> dir1 (dir1 directed both)
EDGES = [
    Edge(src="film1", rel="directed_by", dst="dir1"),
    Edge(src="film1", rel="starred_actors", dst="act1"),
    Edge(src="film2", rel="starred_actors", dst="act1"),
    Edge(src="film2", rel="directed_by", dst="dir2"),
    Edge(src="film2", rel="directed_by", dst="dir1"),
]


def memory_store() -> MemoryStore:
    store = MemoryStore()
    ids = sorted({x for e in EDGES for x in (e.src, e.dst)})
    store.upsert_entities([(i, i.upper(), None) for i in ids])
    store.upsert_triples(EDGES)
    return store


def test_type_ends_ignore_direction_and_never_reenter_an_anchor():
    ends = type_ends(EDGES, ["film1"], 3)
    assert ends[("directed_by",)] == {"dir1"}
    assert ends[("starred_actors", "starred_actors")] == {"film2"}
    # the films' directors of the films sharing an actor: film1 itself is never re-entered
    assert ends[("starred_actors", "starred_actors", "directed_by")] == {"dir1", "dir2"}
    assert ("directed_by", "directed_by") in ends and ends[("directed_by", "directed_by")] == {
        "film2"}
    assert all("film1" not in e for e in ends.values())
    assert max(len(t) for t in ends) == 3
    assert max(len(t) for t in type_ends(EDGES, ["film1"], 1)) == 1


def test_label_is_the_best_jaccard_type_and_ties_share():
    ends = {("a",): {"x", "y"}, ("b",): {"x"}, ("c", "d"): {"x", "y", "z"}}
    assert label_types(ends, {"x", "y"}) == {("a",): 1.0}
    assert label_types(ends, {"q"}) == {}
    tied = label_types({("a",): {"x"}, ("b",): {"x"}, ("a", "a", "a"): {"x"}}, {"x"})
    assert tied == {("a",): 0.5, ("b",): 0.5}  # of tied types, the shortest


def test_walk_through_a_store_matches_the_pure_ends_and_flags_caps():
    store = memory_store()
    paths = [("directed_by",), ("starred_actors", "starred_actors", "directed_by")]
    ends, cut = walk(store.follow, ["film1"], paths, limit=10)
    pure = type_ends(EDGES, ["film1"], 3)
    assert ends == {p: pure[p] for p in paths} and not cut
    # dir1 has two films: a limit of 1 neighbour per node cuts the walk, and says so
    _, cut = walk(store.follow, ["dir1"], [("directed_by",)], limit=1)
    assert cut


def test_prior_sums_the_planned_types_and_rescore_prefers_on_path_names():
    ends = {("a",): {"x", "y"}, ("b",): {"y"}}
    prior = node_prior([(("a",), 0.7), (("b",), 0.3)], ends)
    assert prior == pytest.approx({"x": 0.7, "y": 1.0})
    on = rescore(-3.0, prior["y"], 5.0, 1e-3)
    off = rescore(-1.0, 0.0, 5.0, 1e-3)
    assert on > off  # a likelier name off every planned path loses
    assert rescore(-1.0, 0.0, 0.0, 1e-3) == -1.0  # w = 0: the model's score alone


def test_plan_text_removes_the_anchor_mention():
    assert plan_text("who directed The Matrix", ["the matrix"]) == "who directed"


def toy_model() -> tuple[PlannerModel, np.ndarray]:
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((3, 16)).astype(np.float32)
    x = np.concatenate([c + 0.1 * rng.standard_normal((20, 16)) for c in centres])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = np.repeat(np.eye(3, dtype=np.float32), 20, axis=0)
    w, b, loss = fit(x, y, epochs=200)
    assert loss < 0.1
    model = PlannerModel(paths=[("a",), ("b", "c"), ("d",)], weight=w, bias=b,
                         meta={"embedding_model": "toy", "answer_weight": 2.0})
    assert (model.probabilities(x).argmax(1) == y.argmax(1)).all()
    return model, centres


def test_fit_separates_classes_and_plan_keeps_the_mass():
    model, centres = toy_model()
    plan = model.plan(centres[1], mass=0.5)
    assert [t for t, _ in plan] == [("b", "c")] and plan[0][1] == pytest.approx(1.0)
    wide = model.plan(centres[1], mass=1.0, top=2)
    assert len(wide) == 2 and sum(p for _, p in wide) == pytest.approx(1.0)
    # a type whose relations the store lacks is dropped; the rest is renormalised
    known = model.plan(centres[1], mass=0.5, known={"a", "d"})
    assert ("b", "c") not in [t for t, _ in known] and known
    assert model.plan(centres[1], known=set()) == []


def test_save_load_round_trip_and_clear_errors(tmp_path):
    model, centres = toy_model()
    model.save(tmp_path / "p")
    back = PlannerModel.load(tmp_path / "p")
    assert back.paths == model.paths and back.answer_weight == 2.0
    assert np.allclose(back.probabilities(centres), model.probabilities(centres))
    assert not list((tmp_path / "p").glob("*.tmp*"))
    with pytest.raises(PlannerError, match="not a planner directory"):
        PlannerModel.load(tmp_path / "missing")
    meta = json.loads((tmp_path / "p" / "planner.json").read_text())
    (tmp_path / "p" / "planner.json").write_text(json.dumps({**meta, "format": "other/9"}))
    with pytest.raises(PlannerError, match="format"):
        PlannerModel.load(tmp_path / "p")


def test_resolve_planner_checks_embedder_and_store_relations(tmp_path):
    model, _ = toy_model()
    model.save(tmp_path / "p")

    class Store:
        def __init__(self, rels):
            self.rels = rels

        def existing_relations(self, names):
            return {n for n in names if n in self.rels}

    assert resolve_planner("none", Store({"a"}), "toy") == (None, set())
    got, known = resolve_planner(str(tmp_path / "p"), Store({"a", "zz"}), "toy")
    assert got is not None and known == {"a"}
    assert resolve_planner(str(tmp_path / "p"), Store(set()), "toy")[0] is None
    with pytest.raises(PlannerError, match="embeddings"):
        resolve_planner(str(tmp_path / "p"), Store({"a"}), "minilm")


def test_planned_ends_join_the_candidate_answers_likeliest_first():
    from talent_core.answer import join_planned

    model, _ = toy_model()
    model.meta["join_limit"] = 2
    kg = {"dir1": ("DIR1", "dir1")}  # already a candidate
    join_planned(memory_store(), model, kg, {"dir1": 1.0, "film2": 0.2, "act1": 0.9, "dir2": 0.5})
    # the two likeliest planned ends not yet candidates, with the KG's names
    assert kg == {"dir1": ("DIR1", "dir1"), "act1": ("ACT1", "act1"), "dir2": ("DIR2", "dir2")}
