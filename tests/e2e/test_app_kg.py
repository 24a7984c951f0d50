"""app/kg.py without Streamlit: roles, evidence paths, CVT labels, component text, export,
and the store look-ups on the in-memory store."""

from __future__ import annotations

import csv
import io
import json

from app.kg import (
    Extra,
    answer_evidence,
    component_text,
    elements,
    evidence_paths,
    export_csv,
    export_json,
    find_entities,
    missing_topics,
    one_hop,
    path_text,
    readable_label,
)
from talent_core.models import (
    Answer,
    Candidate,
    CandidateEdge,
    CandidateNode,
    Edge,
    OutOfCandidate,
    RankedName,
    Selection,
)


def _answer() -> Answer:
    nodes = [CandidateNode(id="tom", name="Tom", seed=True),
             CandidateNode(id="f1", name="Film One"), CandidateNode(id="f2", name="Film Two"),
             CandidateNode(id="d", name="Dee <b>"), CandidateNode(id="m.0x", name="m.0x")]
    edges = [CandidateEdge(src="f1", rel="starred_actors", dst="tom"),
             CandidateEdge(src="f2", rel="starred_actors", dst="tom"),
             CandidateEdge(src="f1", rel="directed_by", dst="d"),
             CandidateEdge(src="f2", rel="directed_by", dst="d"),
             CandidateEdge(src="m.0x", rel="film.performance.actor", dst="tom")]
    cand = Candidate(question="who directed Tom's films", nodes=nodes, edges=edges)
    sel = Selection(selected=[nodes[1]], out_of_candidate=[
        OutOfCandidate(name="Elsewhere", grounded=True, id="e9", kg_name="Elsewhere"),
        OutOfCandidate(name="Nowhere", grounded=False)])
    return Answer(question=cand.question, answer=["Dee <b>"], candidate=cand, selection=sel,
                  ranked=[RankedName(name="Dee <b>", score=-1.0, id="d")], decode="ranked")


def test_evidence_paths_are_shortest_paths_from_a_seed_both_directions():
    ans = _answer()
    paths = evidence_paths(ans.candidate, "d")
    assert len(paths) == 2 and all(len(p) == 2 for p in paths)
    names = {n.id: n.name for n in ans.candidate.nodes}
    texts = {path_text(p, names, "d") for p in paths}
    assert "Tom ←starred_actors— Film One —directed_by→ Dee <b>" in texts
    assert evidence_paths(ans.candidate, "tom") == [[]]  # a seed answers itself
    assert evidence_paths(ans.candidate, "nowhere") == []
    ev = answer_evidence(ans)
    assert ev[0].answer == "Dee <b>" and ev[0].id == "d" and len(ev[0].text) == 2


def test_roles_colour_every_kind_of_node_and_keep_html_out_of_the_component():
    ans = _answer()
    extra = Extra()
    extra.edges.add(("e9", "directed_by", "f1"))  # the grounded out-of-S node, joined to S
    els = elements(ans, extra, answer_evidence(ans))
    role = {n["data"]["id"]: n["data"]["label"] for n in els["nodes"]}
    assert role == {"tom": "seed", "f1": "selected", "f2": "candidate", "d": "answer",
                    "m.0x": "candidate", "e9": "grounded", "missing:Nowhere": "missing"}
    names = {n["data"]["id"]: n["data"]["name"] for n in els["nodes"]}
    assert names["d"] == "Dee ‹b›" and "<" not in json.dumps(els)
    assert names["m.0x"] == "⟨film.performance⟩ m.0x"  # a CVT node's readable label
    groups = {(e["data"]["source"], e["data"]["target"]): e["data"]["label"]
              for e in els["edges"]}
    assert groups[("f1", "d")] == "EVIDENCE" and groups[("e9", "f1")] == "JOIN"
    assert groups[("m.0x", "tom")] == "S"


def test_cvt_labels_and_component_text():
    assert readable_label("Gravity") == "Gravity"
    assert readable_label("g.11b6", []) == "⟨CVT⟩ g.11b6"
    assert readable_label("m.0abc", ["a.b.c", "a.b.d", "x.y"]) == "⟨a.b⟩ m.0abc"
    assert component_text("<img src=x onerror=alert(1)>") == "‹img src=x onerror=alert(1)›"


def test_export_json_and_csv_carry_answers_and_their_paths():
    ans = _answer()
    ev = answer_evidence(ans)
    data = json.loads(export_json(ans, ev))
    assert data["answers"][0]["answer"] == "Dee <b>"
    assert data["answers"][0]["evidence"][0][0]["src"] in ("Film One", "Film Two")
    rows = list(csv.DictReader(io.StringIO(export_csv(ans, ev))))
    assert len(rows) == 4 and {r["answer"] for r in rows} == {"Dee <b>"}
    assert [r["step"] for r in rows] == ["1", "2", "1", "2"]


class _Vec:
    dimension = 4

    def encode(self, texts, progress=False):
        import numpy as np

        return np.ones((len(texts), 4), dtype="float32") / 2


def test_store_lookups_on_the_memory_store():
    from talent_core.store.memory import MemoryStore

    store = MemoryStore()
    store.upsert_entities([("a", "Gravity", [1, 0, 0, 0]), ("b", "Alfonso Cuarón", [0, 1, 0, 0]),
                           ("c", "Gravity Falls", [0.5, 0.5, 0.5, 0.5])])
    store.upsert_relations([("directed_by", [1, 0, 0, 0])])
    store.upsert_triples([Edge(src="a", rel="directed_by", dst="b")])
    found = find_entities(store, _Vec(), "Gravity")
    assert found[0][0].id == "a" and found[0][1] == "exact name"
    assert {e.id for e, _, _ in found} >= {"a", "c"}
    sub = one_hop(store, "a")
    assert {(e.src, e.rel, e.dst) for e in sub.edges} == {("a", "directed_by", "b")}
    missing = missing_topics(store, _Vec(), ["Gravity", "Tom Hanks"])
    assert list(missing) == ["Tom Hanks"] and missing["Tom Hanks"]
