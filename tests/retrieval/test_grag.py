"""GRAG retriever (talent_core/retrieval/grag.py): ego-graphs, ranking, pruning, the text
view, and `retrieve(method="grag")` on the fixture KG (memory and embedded FalkorDB)."""

from __future__ import annotations

import numpy as np
import pytest
from retrieval_helpers import as_edges, memory_store, metaqa_fixture_questions

from talent_core.evaluation.metrics import macro_average, retrieval_scores
from talent_core.models import Candidate, CandidateEdge, CandidateNode
from talent_core.retrieval import RetrievalConfig, retrieve
from talent_core.retrieval.grag import (
    describe,
    ego_embeddings,
    ego_graphs,
    merge_egos,
    rank_egos,
    soft_prune,
)

GRAG_TIMINGS = {"embed", "seeds", "neighbourhood", "rank", "prune", "total"}

# 0 - 1 - 2 - 3, 1 - 4, 2 - 4: a path with a triangle 1-2-4
TOY = np.array([[0, 1], [1, 2], [2, 3], [1, 4], [2, 4]])


def _rows(mat) -> list[list[int]]:
    d = mat.toarray()
    return [np.flatnonzero(r).tolist() for r in d]


def test_ego_graphs_known_answer():
    reach, members = ego_graphs(5, TOY, 1)
    assert _rows(reach) == [[0, 1], [0, 1, 2, 4], [1, 2, 3, 4], [2, 3], [1, 2, 4]]
    # edge e is in ego(c) when both ends are in N_1(c): the induced subgraph, so the
    # triangle's far edge 2-4 belongs to ego(1) although 1 is not one of its ends
    assert _rows(members.T) == [[0], [0, 1, 3, 4], [1, 2, 3, 4], [2], [1, 3, 4]]
    reach2, members2 = ego_graphs(5, TOY, 2)
    assert _rows(reach2)[0] == [0, 1, 2, 4]
    assert _rows(members2.T)[0] == [0, 1, 3, 4]  # not 2-3: 3 is three hops from 0
    assert _rows(reach2)[3] == [1, 2, 3, 4]
    with pytest.raises(ValueError):
        ego_graphs(5, TOY, 0)


def test_ego_embeddings_are_node_plus_edge_sums():
    reach, members = ego_graphs(5, TOY, 1)
    x = np.eye(8, dtype=np.float32)[:5]  # node i -> e_i
    rels = np.eye(8, dtype=np.float32)[5:7]  # relation 0 -> e_5, relation 1 -> e_6
    edge_rel = np.array([0, 0, 1, 1, 0])
    z = ego_embeddings(reach, members, x, edge_rel, rels)
    # ego(3) = {2, 3} with edge 2-3 (relation 1)
    assert z[3].tolist() == [0, 0, 1, 1, 0, 0, 1, 0]
    # ego(1) = {0, 1, 2, 4}, edges 0-1, 1-2 (rel 0), 1-4 (rel 1), 2-4 (rel 0)
    assert z[1].tolist() == [1, 1, 1, 0, 1, 3, 1, 0]


def test_ranking_picks_the_ego_graph_whose_texts_match_the_question():
    reach, members = ego_graphs(5, TOY, 1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    rels = rng.standard_normal((2, 16)).astype(np.float32)
    rels /= np.linalg.norm(rels, axis=1, keepdims=True)
    edge_rel = np.array([0, 0, 1, 0, 0])
    q = x[3] + rels[1]  # the question names node 3 and relation 1: ego(3) = {2, 3}, edge 2-3
    z = ego_embeddings(reach, members, x, edge_rel, rels)
    top, scores = rank_egos(z, q, 2)
    assert top[0] == 3
    assert scores[3] == pytest.approx(
        float(z[3] @ q / np.linalg.norm(z[3]) / np.linalg.norm(q)), rel=1e-5
    )
    assert len(rank_egos(z, q, 9)[0]) == 5


def test_merge_is_the_union_of_ego_graphs():
    reach, members = ego_graphs(5, TOY, 1)
    nodes, edges = merge_egos(reach, members, np.array([0, 3]))
    assert np.flatnonzero(nodes).tolist() == [0, 1, 2, 3]
    assert np.flatnonzero(edges).tolist() == [0, 2]


def test_pruning_drops_an_irrelevant_branch_and_keeps_the_centre_connected():
    # centre 0; 0-1 relevant relation, 1-2 irrelevant; 0-3 irrelevant, 3-4 relevant but
    # only reachable through 0-3; 0-5 irrelevant relation between two relevant nodes
    ep = np.array([[0, 1], [1, 2], [0, 3], [3, 4], [0, 5]])
    node_alpha = np.array([0.9, 0.1, 0.1, 0.1, 0.1, 0.5])
    edge_alpha = np.array([0.6, 0.0, 0.1, 0.7, 0.1])
    everything = np.ones(6, dtype=bool), np.ones(5, dtype=bool)
    nodes, edges = soft_prune(ep, node_alpha, edge_alpha, np.array([0]), *everything, 0.3)
    assert np.flatnonzero(nodes).tolist() == [0, 1, 5]
    assert np.flatnonzero(edges).tolist() == [0, 4]
    # gate <= 0: the merged graph as it is
    nodes, edges = soft_prune(ep, node_alpha, edge_alpha, np.array([0]), *everything, 0.0)
    assert nodes.all() and edges.all()
    # a centre stays even when nothing around it is relevant
    nodes, edges = soft_prune(ep, node_alpha, edge_alpha, np.array([2]), *everything, 0.95)
    assert np.flatnonzero(nodes).tolist() == [2] and not edges.any()


def _cand(method: str = "grag") -> Candidate:
    nodes = [("T", "Titanic", False), ("J", "James Cameron", True), ("Y", "1997", False),
             ("L", "Leonardo DiCaprio", False), ("I", "Inception", False),
             ("X", "Lonely", False)]
    edges = [("T", "directed_by", "J"), ("T", "written_by", "J"), ("T", "release_year", "Y"),
             ("T", "starred_actors", "L"), ("I", "starred_actors", "L"),
             ("I", "release_year", "Y")]
    return Candidate(
        question="q", method=method,
        nodes=[CandidateNode(id=i, name=n, seed=s) for i, n, s in nodes],
        edges=[CandidateEdge(src=s, rel=r, dst=d) for s, r, d in edges],
    )


def test_describe_known_answer():
    # a GRAG candidate: rooted at its first node (the best ego centre), then unreached nodes
    assert describe(_cand()) == "\n".join([
        "[ROOT] Titanic",
        "  1 -[directed_by|written_by]-> James Cameron",
        "  2 -[release_year]-> 1997",
        "    2.1 <-[release_year]- Inception",
        "      ~ -[starred_actors]-> Leonardo DiCaprio (3)",
        "  3 -[starred_actors]-> Leonardo DiCaprio",
        "[ROOT] Lonely",
    ])
    # another method's candidate: the seed first
    assert describe(_cand("pcst")).splitlines()[:3] == [
        "[ROOT] James Cameron",
        "  1 <-[directed_by|written_by]- Titanic",
        "    1.1 -[release_year]-> 1997",
    ]
    assert describe(_cand(), roots=["Y"]).splitlines()[:3] == [
        "[ROOT] 1997", "  1 <-[release_year]- Titanic", "    1.1 -[directed_by|written_by]-> "
        "James Cameron"]
    assert describe(Candidate(question="q")) == ""
    # every node has one line of its own and every edge is written once
    text = describe(_cand())
    own = [ln for ln in text.splitlines() if not ln.strip().startswith("~")]
    assert sorted(ln.split(" ")[-1] for ln in own) == sorted(
        n.name.split(" ")[-1] for n in _cand().nodes)
    assert [text.count(r) for r in ("directed_by", "release_year", "starred_actors")] == [1, 2, 2]


def _connected_to_centres(c: Candidate, centres: set[str]) -> bool:
    adj: dict[str, set[str]] = {n.id: set() for n in c.nodes}
    for e in c.edges:
        adj[e.src].add(e.dst)
        adj[e.dst].add(e.src)
    seen, stack = set(centres), list(centres)
    while stack:
        for v in adj[stack.pop()] - seen:
            seen.add(v)
            stack.append(v)
    return seen == set(adj)


@pytest.mark.parametrize("prune", [0.0, 0.2])
def test_retrieve_grag_on_the_fixture_kg(mem_store, bow, prune):
    rows = []
    for hop in (1, 2):
        for q, topic, answers in metaqa_fixture_questions(hop):
            cfg = RetrievalConfig(method="grag", hops=hop, ego_hops=1, top_egos=3, prune=prune)
            c = retrieve(q, mem_store, bow, cfg, topic)
            assert c.method == "grag" and set(c.timings_ms) == GRAG_TIMINGS
            ids = {n.id for n in c.nodes}
            assert len(ids) == len(c.nodes) and c.nodes
            assert all(e.src in ids and e.dst in ids for e in c.edges)
            seeds = {s.id for s in c.seeds}
            assert all(n.seed == (n.id in seeds) for n in c.nodes)
            # every node hangs off one of the (up to 3) ego centres listed first
            assert _connected_to_centres(c, {n.id for n in c.nodes[:3]})
            rows.append(retrieval_scores([n.name for n in c.nodes], answers))
    m = macro_average(rows)
    # measured on the fixture (bag-of-words vectors, 37 questions): hit 0.81 at 9.1 nodes
    # (prune 0), 0.62 at 5.4 nodes (prune 0.2)
    assert m["hit"] >= 0.55, m
    assert m["size"] <= 12, m


def test_grag_seeds_are_flagged_and_empty_store(mem_store, bow):
    c = retrieve("who directed Gravity", mem_store, bow, None, ["Gravity"], method="grag",
                 hops=1, ego_hops=1, top_egos=5)
    assert "Alfonso Cuarón" in {n.name for n in c.nodes}
    assert any(n.seed and n.id == "Gravity" for n in c.nodes)
    empty = memory_store([], bow)
    c = retrieve("who directed Gravity", empty, bow, None, ["Gravity"], method="grag")
    assert c.nodes == [] and c.edges == [] and set(c.timings_ms) == GRAG_TIMINGS


def test_grag_through_embedded_falkordb_matches_memory(embedded_store, metaqa_triples, bow):
    store = embedded_store(dimension=bow.dimension)
    ids = sorted({x for h, _, t in metaqa_triples for x in (h, t)})
    store.upsert_entities([(i, i, v.tolist()) for i, v in zip(ids, bow.encode(ids), strict=True)])
    rels = sorted({r for _, r, _ in metaqa_triples})
    store.upsert_relations([(r, v.tolist()) for r, v in zip(rels, bow.encode(rels), strict=True)])
    store.upsert_triples(as_edges(metaqa_triples))
    ref = memory_store(metaqa_triples, bow)
    same = total = 0
    for q, topic, _answers in metaqa_fixture_questions(2)[:8]:
        cfg = RetrievalConfig(method="grag", hops=2, ego_hops=1, top_egos=3, prune=0.2)
        a, b = retrieve(q, store, bow, cfg, topic), retrieve(q, ref, bow, cfg, topic)
        total += 1
        same += {n.id for n in a.nodes} == {n.id for n in b.nodes}
    assert same >= total - 1, f"{same}/{total} identical candidates"
