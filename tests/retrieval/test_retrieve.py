"""retrieve() end to end: the fixture MetaQA KG, a bag-of-words embedder, and both the
dict store and the real embedded FalkorDB store (same expansion semantics)."""

from __future__ import annotations

import numpy as np
import pytest
from retrieval_helpers import as_edges, memory_store, metaqa_fixture_questions

from talent_core.evaluation.metrics import macro_average, retrieval_scores
from talent_core.llm.textualise import textualise
from talent_core.models import Candidate
from talent_core.retrieval import RetrievalConfig, retrieve
from talent_core.retrieval.pcst import is_connected

TIMINGS = {"embed", "seeds", "neighbourhood", "pcst", "total"}


def _connected(c: Candidate) -> bool:
    idx = {n.id: i for i, n in enumerate(c.nodes)}
    edges = np.array([[idx[e.src], idx[e.dst]] for e in c.edges]).reshape(-1, 2)
    return is_connected(len(idx), edges, np.arange(len(idx)), np.arange(len(edges)))


def _run(store, bow, hop, rule, **kw):
    rows, cands = [], []
    for q, topic, answers in metaqa_fixture_questions(hop):
        c = retrieve(q, store, bow, RetrievalConfig(hops=hop, prizes=rule, **kw), topic)
        cands.append(c)
        rows.append(retrieval_scores([n.name for n in c.nodes], answers))
    return macro_average(rows), cands


@pytest.mark.parametrize("rule", ["default", "paper"])
@pytest.mark.parametrize("hop", [1, 2])
def test_candidates_hold_answers_and_are_connected(mem_store, bow, hop, rule):
    m, cands = _run(mem_store, bow, hop, rule)
    # measured 1.0 (default, both hops; paper 1-hop) and 0.94 (paper 2-hop) on the fixture
    assert m["hit"] >= 0.9, m
    for c in cands:
        assert c.nodes and _connected(c)
        assert set(c.timings_ms) == TIMINGS
        ids = {n.id for n in c.nodes}
        assert all(e.src in ids and e.dst in ids for e in c.edges)
        assert any(n.seed for n in c.nodes)  # the topic entity is kept
        assert len(c.nodes) <= 40


def test_default_rule_is_more_compact_than_paper_on_three_hops(mem_store, bow):
    d, _ = _run(mem_store, bow, 3, "default")
    p, _ = _run(mem_store, bow, 3, "paper")
    # measured: default 0.85 hit at 17 nodes, paper 0.85 at 52 nodes
    assert d["hit"] >= p["hit"] - 1e-9
    assert d["size"] < 0.6 * p["size"]


def test_overrides_and_validation(mem_store, bow):
    c = retrieve(
        "who directed Gravity", mem_store, bow, None, ["Gravity"], k_nodes=3, node_sim_share=0,
        hops=2,  # the toy bag-of-words embedder needs the shallower search at k = 3
    )
    assert len([n for n in c.nodes if n.prize > 0]) <= 4  # 3 drawn + the anchor
    assert "Alfonso Cuarón" in {n.name for n in c.nodes}
    with pytest.raises(ValueError):
        retrieve("q", mem_store, bow, None, None, hops=4)
    with pytest.raises(ValueError):
        retrieve("q", mem_store, bow, None, None, no_such_knob=1)


@pytest.mark.parametrize("rule", ["default", "paper"])
def test_empty_store_and_isolated_seed(bow, rule):
    empty = memory_store([], bow)
    c = retrieve("who directed Gravity", empty, bow, None, ["Gravity"], prizes=rule)
    assert c.nodes == [] and c.edges == [] and c.seeds == []
    assert set(c.timings_ms) == TIMINGS
    # a KG where the topic entity has no edges at all: S is that single node
    lonely = memory_store([("Lonely Film", "directed_by", "Someone")], bow)
    lonely.upsert_entities([("Solo", "Solo", bow.encode_one("Solo"))])
    c = retrieve("who directed Solo", lonely, bow, None, ["Solo"], prizes=rule)
    assert [n.id for n in c.nodes] == ["Solo"] and c.edges == []
    assert c.nodes[0].seed


def test_no_topic_uses_name_matches(mem_store, bow):
    c = retrieve("who directed Gravity", mem_store, bow)
    anchors = [s for s in c.seeds if "name" in s.sources]
    assert [s.id for s in anchors] == ["Gravity"]
    assert "Alfonso Cuarón" in {n.name for n in c.nodes}


def test_textualise_real_candidate(mem_store, bow):
    c = retrieve("who starred in The Matrix", mem_store, bow, None, ["The Matrix"])
    text = textualise(c)
    assert text.startswith("<DESC>\nnode_id,node_attr\n0,") and text.endswith("</DESC>")
    assert "keanu reeves" in text and "Keanu" not in text


def test_embedded_falkordb_store_gives_the_same_candidates(embedded_store, metaqa_triples, bow):
    """The same retrieval through the real FalkorDB store (loaded with the fixture KG and
    the same bag-of-words vectors) as through the dict store."""
    store = embedded_store(dimension=bow.dimension)
    ids = sorted({x for h, _, t in metaqa_triples for x in (h, t)})
    vecs = bow.encode(ids)
    store.upsert_entities([(i, i, v.tolist()) for i, v in zip(ids, vecs, strict=True)])
    rels = sorted({r for _, r, _ in metaqa_triples})
    store.upsert_relations([(r, v.tolist()) for r, v in zip(rels, bow.encode(rels), strict=True)])
    store.upsert_triples(as_edges(metaqa_triples))
    ref = memory_store(metaqa_triples, bow)
    same = total = 0
    for hop in (1, 2, 3):
        for rule in ("default", "paper"):
            for q, topic, _answers in metaqa_fixture_questions(hop)[:6]:
                cfg = RetrievalConfig(hops=hop, prizes=rule)
                a = retrieve(q, store, bow, cfg, topic)
                b = retrieve(q, ref, bow, cfg, topic)
                assert a.truncated == b.truncated
                total += 1
                same += {n.id for n in a.nodes} == {n.id for n in b.nodes}
    # float32 cosines in the database vs float64 here may reorder exact near-ties only
    assert same >= total - 2, f"{same}/{total} identical candidates"


def test_vector_method_is_the_top_k_entities_by_question_cosine(mem_store, bow):
    q = "who directed Titanic"
    c = retrieve(q, mem_store, bow, RetrievalConfig(method="vector", k_nodes=4))
    top = mem_store.top_entities(bow.encode([q])[0], 4)
    assert c.method == "vector" and not c.edges
    assert [n.id for n in c.nodes] == [h.entity.id for h in top]
    assert [n.prize for n in c.nodes] == pytest.approx([h.score for h in top])
    assert {"vector", "total"} <= set(c.timings_ms)
    assert retrieve(q, mem_store, bow, method="pcst").method == "pcst"
