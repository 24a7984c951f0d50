"""The ppr retriever plug-in (talent_core/retrieval/retrievers/ppr.py): PageRank known
answers, `retrieve(method="ppr")` on a small in-memory KG, and the plug-in reaching the
registry, `talent retrieve --method ppr`, the UI's controls and the report's methods."""

from __future__ import annotations

import json

import numpy as np
import pytest
from retrieval_helpers import kb, memory_store
from typer.testing import CliRunner

from talent_core.retrieval import registry, retrieve
from talent_core.retrieval.config import METHOD_FIELDS, SIZE_FIELD, RetrievalConfig, ui_controls
from talent_core.retrieval.retrievers.ppr import pagerank

# Gravity's neighbours (1 hop), then a chain away from them (2 and 3 hops)
KG = kb("""
Gravity|directed_by|Alfonso Cuarón
Gravity|starred_actors|Sandra Bullock
Gravity|release_year|2013
Sandra Bullock|acted_in|Speed
Speed|directed_by|Jan de Bont
""")


@pytest.fixture(scope="module")
def small_store(bow):
    return memory_store(KG, bow)


def test_pagerank_decreases_with_distance_from_the_restart_node():
    path = np.array([[0, 1], [1, 2], [2, 3], [3, 4]])
    r = pagerank(5, path, np.array([1.0, 0, 0, 0, 0]), 0.15)
    assert r.sum() == pytest.approx(1.0)
    assert r[1] > r[2] > r[3] > r[4] and r[0] > r[2]  # (a degree-2 node may pass the anchor)
    # one edge: r0 = a + (1 - a) r1, r1 = (1 - a) r0, so r0 = 1 / (2 - a)
    two = pagerank(2, np.array([[0, 1]]), np.array([1.0, 0]), 0.15)
    assert two.tolist() == pytest.approx([1 / 1.85, 0.85 / 1.85])
    # no edges: all the mass stays on the restart node
    assert pagerank(3, np.zeros((0, 2)), np.array([0, 1.0, 0]), 0.15).tolist() == [0, 1, 0]


def test_ppr_keeps_the_anchor_and_its_neighbours_over_far_nodes(small_store, bow):
    cand = retrieve("who directed Gravity", small_store, bow, topic_entities=["Gravity"],
                    method="ppr", ppr_nodes=4)
    names = [n.name for n in cand.nodes]
    assert cand.method == "ppr"
    assert names[0] == "Gravity"
    assert set(names) == {"Gravity", "Alfonso Cuarón", "Sandra Bullock", "2013"}
    scores = {n.name: n.prize for n in cand.nodes}
    assert scores["Sandra Bullock"] > 0
    ids = {n.id for n in cand.nodes}
    assert cand.edges and all(e.src in ids and e.dst in ids for e in cand.edges)
    assert {"neighbourhood", "rank", "seeds", "embed", "total"} <= set(cand.timings_ms)

    wide = retrieve("who directed Gravity", small_store, bow, topic_entities=["Gravity"],
                    method="ppr", ppr_nodes=20)
    far = {n.name: n.prize for n in wide.nodes}
    assert min(far[n] for n in ("Alfonso Cuarón", "Sandra Bullock", "2013")) > far["Speed"] \
        > far["Jan de Bont"]
    assert len(wide.edges) == len(KG)


def test_ppr_is_registered_with_its_settings():
    assert "ppr" in registry.names()
    assert METHOD_FIELDS["ppr"] == {"ppr_nodes", "ppr_restart"}
    assert SIZE_FIELD["ppr"] == "ppr_nodes"
    assert RetrievalConfig().ppr_nodes == 20
    assert RetrievalConfig(method="ppr").method == "ppr"
    assert [c.key for c in ui_controls("ppr")] == ["ppr_nodes"]
    assert [m.name for m in registry.report_methods()].count("ppr") == 1
    assert "ppr" in registry.llm_report_retrievers()


def test_cli_retrieve_method_ppr(small_store, bow, monkeypatch):
    import talent_core.pipeline as pipeline
    from talent_core.commands import app

    monkeypatch.setattr(pipeline, "open_store", lambda settings: small_store)
    monkeypatch.setattr(pipeline, "get_embedder", lambda *a, **k: bow)
    r = CliRunner().invoke(app, ["retrieve", "who directed [Gravity]", "--method", "ppr",
                                 "--ppr-nodes", "3", "--plan-join", "0", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["method"] == "ppr" and len(out["nodes"]) == 3  # PPR's own S (no plan joins)
    assert out["nodes"][0]["name"] == "Gravity"
    bad = CliRunner().invoke(app, ["retrieve", "who directed [Gravity]", "--ppr-nodes", "0"])
    assert bad.exit_code == 2 and "error: --ppr-nodes: " in bad.output


def test_eval_report_methods_ppr(small_store, bow, monkeypatch, tmp_path):
    import talent_core.pipeline as pipeline
    from talent_core.commands import app

    monkeypatch.setattr(pipeline, "open_store", lambda settings: small_store)
    monkeypatch.setattr(pipeline, "get_embedder", lambda *a, **k: bow)
    qa = tmp_path / "qa_1hop.txt"
    qa.write_text("who directed [Gravity]\tAlfonso Cuarón\nwho starred in [Speed]\tSandra "
                  "Bullock\n", encoding="utf-8")
    out = tmp_path / "report"
    r = CliRunner().invoke(app, ["eval", str(qa), "--format", "metaqa", "--methods", "ppr",
                                 "--sweep", "ppr_nodes=2,20", "--report", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads((out / "report.json").read_text())
    groups = {(g["method"], g["label"]): g for g in report["results"]}
    assert set(groups) == {("ppr", "ppr_nodes=2"), ("ppr", "ppr_nodes=20")}
    assert groups[("ppr", "ppr_nodes=20")]["retrieval"]["nodes"]["hit"] == 1.0
