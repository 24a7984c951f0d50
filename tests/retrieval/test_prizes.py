from __future__ import annotations

import numpy as np
import pytest

from talent_core.retrieval.prizes import (
    GR_C,
    paper_prizes,
    path_prizes,
    rank_prizes,
    tied_edge_prizes,
)


def test_rank_prizes_top_k_get_k_minus_rank():
    p = rank_prizes(np.array([0.1, 0.9, 0.5, 0.7]), 3)
    assert p.tolist() == [0.0, 3.0, 1.0, 2.0]
    # ties: lower index first; k larger than n is capped; k = 0 -> nothing
    assert rank_prizes(np.array([0.5, 0.5]), 5).tolist() == [2.0, 1.0]
    assert rank_prizes(np.array([0.5, 0.5]), 0).tolist() == [0.0, 0.0]


def test_tied_edge_prizes_match_g_retriever_by_hand():
    # distinct similarity values: 0.9 (3 edges), 0.8 (1 edge), 0.5 (2 edges), 0.1 (1 edge)
    sim = np.array([0.9, 0.5, 0.9, 0.8, 0.1, 0.9, 0.5])
    p = tied_edge_prizes(sim, k=3)
    # k = 3 distinct values get prizes; G-Retriever:
    #   r=0: min(3/3, 3)            = 1.0      next cap 1.0  * 0.99 = 0.99
    #   r=1: min(2/1, 0.99)         = 0.99     next cap 0.99 * 0.99 = 0.9801
    #   r=2: min(1/2, 0.9801)       = 0.5
    #   0.1 is below the 3rd value -> 0
    assert p == pytest.approx([1.0, 0.5, 1.0, 0.99, 0.0, 1.0, 0.5])
    # more k than distinct values: k is capped at 4 distinct values
    p = tied_edge_prizes(sim, k=10)
    # r=0: min(4/3, 4) = 1.3333; r=1: min(3/1, 1.32) = 1.32; r=2: min(2/2, 1.3068) = 1.0;
    # r=3: min(1/1, 0.99) = 0.99
    expect = [4 / 3, 1.0, 4 / 3, 4 / 3 * (1 - GR_C), 0.99, 4 / 3, 1.0]
    assert p == pytest.approx(expect)


def test_tied_edge_prizes_vanish_with_many_ties():
    # the failure the issue describes: one relation shared by 300 edges gets 10/300 each
    sim = np.array([0.9] * 300 + [0.2] * 5)
    p = tied_edge_prizes(sim, k=10)
    assert p[0] == pytest.approx(2 / 300)  # k capped at 2 distinct values: 2/300
    assert p[-1] == pytest.approx(min(1 / 5, 2 / 300 * (1 - GR_C)))


def test_paper_prizes_lowers_cost_below_max_edge_prize():
    pr = paper_prizes(np.array([0.2, 0.9]), np.array([0.9] * 100), k_nodes=1, k_edges=10)
    assert pr.node.tolist() == [0.0, 1.0]
    assert pr.edge[0] == pytest.approx(1 / 100)
    assert pr.edge_cost == pytest.approx(0.01 * (1 - GR_C / 2))
    # no edge prizes -> the cost stays
    pr = paper_prizes(np.array([0.2]), np.array([0.9]), k_nodes=1, k_edges=0, edge_cost=0.5)
    assert pr.edge_cost == 0.5 and pr.edge.tolist() == [0.0]


def test_path_prizes_round_robin_over_path_types():
    # type A ends (best first): 5, 6, 7; type B: 6, 8; type C: 9. Anchor 0.
    pr = path_prizes(10, 3, [0], [[5, 6, 7], [6, 8], [9]], k_nodes=5, edge_cost=0.5)
    # round 1: A->5, B->6, C->9; round 2: A->7 (6 taken), B->8
    assert pr.node.tolist() == [6.0, 0, 0, 0, 0, 5.0, 4.0, 2.0, 1.0, 3.0]
    assert pr.edge.tolist() == [0.0, 0.0, 0.0] and pr.edge_cost == 0.5
    # anchors are never drawn as ends, k_nodes bounds the drawn nodes
    pr = path_prizes(4, 0, [1], [[1, 2, 3]], k_nodes=1)
    assert pr.node.tolist() == [0.0, 2.0, 1.0, 0.0]
    # nothing to draw
    pr = path_prizes(2, 0, [], [], k_nodes=3)
    assert pr.node.tolist() == [0.0, 0.0]
