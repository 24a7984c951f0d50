"""talent_core.explore: evidence paths, readable labels, the export, and the store look-ups
(entity search, missing topics, neighbours, out-of-candidate joins) on the in-memory store."""

from __future__ import annotations

import csv
import io
import json
import os

from answer_samples import sample_answer

from talent_core.config import Settings
from talent_core.explore import (
    EXPLORE_CAPS,
    Hop,
    answer_evidence,
    evidence_json,
    evidence_paths,
    expand_step,
    export_csv,
    export_json,
    find_entities,
    missing_topics,
    one_hop,
    out_of_candidate_joins,
    path_text,
    readable_label,
    store_problem,
)
from talent_core.models import Answer, Candidate, CandidateNode, Edge, OutOfCandidate, Selection
from talent_core.store.memory import MemoryStore


def test_evidence_paths_are_shortest_paths_from_a_seed_both_directions():
    ans = sample_answer()
    paths = evidence_paths(ans.candidate, "d")
    assert len(paths) == 2 and all(len(p) == 2 for p in paths)
    assert paths[0][0] == Hop("f1", "starred_actors", "tom") and paths[0][1].rel == "directed_by"
    names = {n.id: n.name for n in ans.candidate.nodes}
    texts = {path_text(p, names, "d") for p in paths}
    assert "Tom ←starred_actors— Film One —directed_by→ Dee <b>" in texts
    assert evidence_paths(ans.candidate, "tom") == [[]]  # a seed answers itself
    assert path_text([], names, "tom") == "Tom (a seed)"
    assert evidence_paths(ans.candidate, "nowhere") == []
    assert len(evidence_paths(ans.candidate, "d", max_paths=1)) == 1
    assert evidence_paths(ans.candidate, "d", max_hops=1) == []
    ev = answer_evidence(ans)
    assert ev[0].answer == "Dee <b>" and ev[0].id == "d"
    assert [p.hops for p in ev[0].paths] == paths
    assert [p.text for p in ev[0].paths] == [path_text(p, names, "d") for p in paths]


def test_an_answer_outside_s_has_no_path_and_a_seed_answer_one_empty_path():
    ans = sample_answer().model_copy(update={"answer": ["Elsewhere", "Tom", "Unknown"],
                                             "ranked": []})
    ev = {e.answer: e for e in answer_evidence(ans)}
    assert ev["Elsewhere"].id == "e9" and ev["Elsewhere"].paths == []
    assert [(p.hops, p.text) for p in ev["Tom"].paths] == [([], "Tom (a seed)")]
    assert ev["Unknown"].id is None and ev["Unknown"].paths == []


def test_cvt_labels():
    assert readable_label("Gravity") == "Gravity"
    assert readable_label("g.11b6", []) == "⟨CVT⟩ g.11b6"
    assert readable_label("m.0abc", ["a.b.c", "a.b.d", "x.y"]) == "⟨a.b⟩ m.0abc"


def test_export_json_and_csv_carry_answers_and_their_paths():
    ans = sample_answer()
    ev = answer_evidence(ans)
    data = json.loads(export_json(ans, ev))
    assert data["answers"] == evidence_json(ans, ev)  # the same as `talent ask --json`'s
    first = data["answers"][0]
    assert first["answer"] == "Dee <b>" and first["id"] == "d"
    assert first["evidence"][0] == [
        {"src": "Film One", "rel": "starred_actors", "dst": "Tom", "src_id": "f1",
         "dst_id": "tom"},
        {"src": "Film One", "rel": "directed_by", "dst": "Dee <b>", "src_id": "f1",
         "dst_id": "d"}]
    assert first["evidence_text"] == [p.text for p in ev[0].paths]
    rows = list(csv.DictReader(io.StringIO(export_csv(ans, ev))))
    assert len(rows) == 4 and {r["answer"] for r in rows} == {"Dee <b>"}
    assert [r["step"] for r in rows] == ["1", "2", "1", "2"]
    assert [r["path"] for r in rows] == ["1", "1", "2", "2"]


class _Vec:
    dimension = 4

    def encode(self, texts, progress=False):
        import numpy as np

        return np.ones((len(texts), 4), dtype="float32") / 2


def _store() -> MemoryStore:
    store = MemoryStore()
    store.upsert_entities([("a", "Gravity", [1, 0, 0, 0]), ("b", "Alfonso Cuarón", [0, 1, 0, 0]),
                           ("c", "Gravity Falls", [0.5, 0.5, 0.5, 0.5]),
                           ("x", "Elsewhere", [0, 0, 1, 0])])
    store.upsert_relations([("directed_by", [1, 0, 0, 0]), ("near", [0, 1, 0, 0])])
    store.upsert_triples([Edge(src="a", rel="directed_by", dst="b"),
                          Edge(src="x", rel="near", dst="a"), Edge(src="x", rel="near", dst="c"),
                          Edge(src="b", rel="near", dst="x")])
    return store


def test_store_lookups_on_the_memory_store():
    store = _store()
    found = find_entities(store, _Vec(), "Gravity")
    assert found[0].entity.id == "a" and found[0].how == "exact name" and found[0].score is None
    assert {m.entity.id for m in found} >= {"a", "c"}
    assert all(m.score is not None for m in found if m.how == "vector")
    assert find_entities(store, _Vec(), "   ") == []
    sub = one_hop(store, "a", EXPLORE_CAPS)
    assert {(e.src, e.rel, e.dst) for e in sub.edges} == {("a", "directed_by", "b"),
                                                        ("x", "near", "a")}
    assert expand_step(store, "a", 1) == sub  # both neighbours fit in one click's step
    missing = missing_topics(store, _Vec(), ["Gravity", "Tom Hanks"])
    assert list(missing) == ["Tom Hanks"] and missing["Tom Hanks"]


def test_out_of_candidate_joins_keep_only_the_edges_into_s():
    """`x` (grounded, outside S) touches a and b in S and c outside it: the joins are its
    edges to a and b, in both directions, sorted; a missing name and a node of S add none."""
    cand = Candidate(question="q", nodes=[CandidateNode(id="a", name="Gravity", seed=True),
                                          CandidateNode(id="b", name="Alfonso Cuarón")])
    sel = Selection(out_of_candidate=[
        OutOfCandidate(name="Elsewhere", grounded=True, id="x", kg_name="Elsewhere"),
        OutOfCandidate(name="Gravity", grounded=True, id="a", kg_name="Gravity"),
        OutOfCandidate(name="Nowhere", grounded=False)])
    ans = Answer(question="q", answer=[], candidate=cand, selection=sel)
    assert out_of_candidate_joins(_store(), ans) == [Hop("b", "near", "x"),
                                                     Hop("x", "near", "a")]
    assert out_of_candidate_joins(_store(), ans.model_copy(update={"selection": None})) == []


def test_store_problem_names_an_unsafe_data_dir(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    problem = store_problem(Settings(store="embedded", data_dir=shared))
    assert problem and "shared is writable by other users" in problem
    assert store_problem(Settings(store="embedded", data_dir=tmp_path / "fresh")) is None
    assert store_problem(Settings(store="neo4j", data_dir=shared)) is None


def test_each_click_on_a_hub_adds_the_next_step_of_its_neighbours():
    store = MemoryStore()
    ids = ["hub", *(f"n{i:02d}" for i in range(25))]
    store.upsert_entities([(i, i, None) for i in ids])
    store.upsert_relations([("r", None)])
    store.upsert_triples([Edge(src="hub", rel="r", dst=i) for i in ids[1:]])
    steps = [expand_step(store, "hub", t) for t in (1, 2, 3)]
    assert [len(s.edges) for s in steps] == [10, 20, 25]
    assert [s.truncated for s in steps] == [True, True, False]
    assert {e.dst for e in steps[0].edges} < {e.dst for e in steps[1].edges}  # adds, in order
