"""PCST wrapper: known answers (hand-simulated Goemans-Williamson) and defined edge cases.

A broken pcst_fast build (pcst-fast 1.0.10 with numpy 2 returns wrong trees) fails here.
"""

from __future__ import annotations

import numpy as np
import pytest

from talent_core.retrieval.pcst import is_connected, pcst


def _sets(res):
    return set(res.nodes.tolist()), set(res.edges.tolist())


def test_known_answer_tree_with_virtual_edge_node():
    # 0(4) -e0- 1(0) -e1- 2(4) -e2- 3(1);  1 -e3- 4(0);  2 =e4= 5(0) with edge prize 3;
    # a separate component 6(1) -e5- 7(1). Uniform cost c = 0.5.
    # By hand (GW growth, 'gw' pruning, one cluster):
    #  * e4 (prize 3 > c) becomes virtual node 8 with prize 2.5 and two zero-cost edges: it
    #    merges with 2 and 5 at t=0, so e4 and node 5 are in the tree.
    #  * 2 and 3 are both active: e2 tight at t=0.25 -> 3 joins (net 1 - 0.5 > 0).
    #  * 0 grows alone on e0, the {2,3,5,8} cluster on e1: both tight at t=0.5 -> 1 joins
    #    as the zero-prize Steiner node between 0 and 2 (net 8 - 1 > 4).
    #  * 4 has no prize: its cluster is inactive from t=0, so gw pruning cuts it off.
    #  * {6,7} (net 1.5) loses to the main tree (net 9.5) with num_clusters = 1.
    edges = np.array([[0, 1], [1, 2], [2, 3], [1, 4], [2, 5], [6, 7]])
    node_prizes = np.array([4, 0, 4, 1, 0, 0, 1, 1], dtype=float)
    edge_prizes = np.array([0, 0, 0, 0, 3, 0], dtype=float)
    res = pcst(8, edges, node_prizes, edge_prizes, 0.5)
    assert _sets(res) == ({0, 1, 2, 3, 5}, {0, 1, 2, 4})
    assert is_connected(8, edges, res.nodes, res.edges)


def test_known_answer_steiner_path_and_too_expensive_leaf():
    # Path 0(3) - 1(0) - 2(3) - 3(0.4), cost 1 per edge. 3's moat runs out at t=0.4; the
    # edge 2-3 goes tight at t=0.6 from 2's side only, joining an inactive cluster, which gw
    # pruning removes. 0 and 2 pay for the path through the Steiner node 1 (6 - 2 > 3).
    edges = np.array([[0, 1], [1, 2], [2, 3]])
    res = pcst(4, edges, np.array([3, 0, 3, 0.4]), None, 1.0)
    assert _sets(res) == ({0, 1, 2}, {0, 1})
    # With per-unit cost 10 nothing pays for an edge: the single best node (2 has prize 4).
    res = pcst(3, edges[:2], np.array([3, 0, 4.0]), None, 10.0)
    assert _sets(res) == ({2}, set())


def test_edge_prize_counts_through_virtual_node():
    # No node prizes at all: only the virtual node of the prized edge makes the tree.
    edges = np.array([[0, 1], [1, 2]])
    res = pcst(3, edges, np.zeros(3), np.array([2.0, 0.0]), 0.5)
    assert _sets(res) == ({0, 1}, {0})
    # The same edge prize below the cost does not make an edge worth taking.
    res = pcst(3, edges, np.zeros(3), np.array([0.4, 0.0]), 0.5)
    assert res.empty


def test_edge_cases_are_defined():
    assert pcst(0, np.zeros((0, 2)), np.zeros(0)).empty
    # single node with a prize -> that node
    assert _sets(pcst(1, np.zeros((0, 2)), np.array([1.0]))) == ({0}, set())
    # single node without a prize -> empty (pcst_fast would return it arbitrarily)
    assert pcst(1, np.zeros((0, 2)), np.array([0.0])).empty
    # no prizes anywhere -> empty
    assert pcst(3, np.array([[0, 1], [1, 2]]), np.zeros(3)).empty
    # no edges -> best single node
    assert _sets(pcst(3, np.zeros((0, 2)), np.array([1.0, 5.0, 2.0]))) == ({1}, set())


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="node_prizes"):
        pcst(2, np.array([[0, 1]]), np.zeros(3))
    with pytest.raises(ValueError, match="out of range"):
        pcst(2, np.array([[0, 2]]), np.ones(2))
    with pytest.raises(ValueError, match=">= 0"):
        pcst(2, np.array([[0, 1]]), np.array([1.0, -1.0]))


def test_random_graphs_give_connected_trees():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 30))
        m = int(rng.integers(1, 3 * n))
        edges = rng.integers(0, n, size=(m, 2))
        edges = edges[edges[:, 0] != edges[:, 1]]
        prizes = np.where(rng.random(n) < 0.3, rng.integers(1, 10, n), 0).astype(float)
        eprizes = np.where(rng.random(len(edges)) < 0.2, rng.random(len(edges)) * 3, 0)
        res = pcst(n, edges, prizes, eprizes, 0.5)
        assert is_connected(n, edges, res.nodes, res.edges)
        assert set(edges[res.edges].reshape(-1).tolist()) <= set(res.nodes.tolist())
        if res.nodes.size:
            assert prizes[res.nodes].sum() + eprizes[res.edges].sum() > 0
        if eprizes.max(initial=0) <= 0.5:
            # no virtual nodes: a tree, |E| = |V| - 1, unless parallel edges were offered
            pairs = {tuple(sorted(e)) for e in edges.tolist()}
            if len(pairs) == len(edges):
                assert res.edges.size == max(res.nodes.size - 1, 0)
