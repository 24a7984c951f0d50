"""Prize rules for the PCST step (pure numpy).

`paper_prizes`: TaLenT eq. 6-8 exactly as G-Retriever's `retrieval_via_pcst` computes them.
`path_prizes`: the default rule (relation-path scoring); see its docstring.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# G-Retriever's constant: each lower tie group's prize is at most (1 - c) of the one above,
# and the edge cost is lowered to below the largest edge prize so at least one edge counts.
GR_C = 0.01


@dataclass(frozen=True)
class Prizes:
    node: np.ndarray  # (N,) float64 >= 0
    edge: np.ndarray  # (E,) float64 >= 0
    edge_cost: float  # the cost c PCST must use (the paper rule may lower it, as G-Retriever)


def rank_prizes(scores: np.ndarray, k: int) -> np.ndarray:
    """Top-k of `scores` get k, k-1, ..., 1 by rank (ties: lower index first), others 0."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    out = np.zeros(scores.size, dtype=np.float64)
    k = max(0, min(int(k), scores.size))
    if k:
        top = np.argsort(-scores, kind="stable")[:k]
        out[top] = np.arange(k, 0, -1, dtype=np.float64)
    return out


def tied_edge_prizes(edge_sim: np.ndarray, k: int, c: float = GR_C) -> np.ndarray:
    """G-Retriever's edge prizes: rank the *distinct* similarity values (edges with the same
    relation text have the same value); the top-k values get k - rank, shared by the edges
    that tie on it: value_r = min((k - r) / n_r, (1 - c) * value_{r-1}); everything below
    the k-th value gets 0. `k` is capped by the number of distinct values.

    (G-Retriever overwrites its similarity tensor in place while it loops, so a prize it has
    just written could collide with a later similarity value; we compare against the
    original similarities, which is what that code means.)"""
    sim = np.asarray(edge_sim, dtype=np.float64).reshape(-1)
    out = np.zeros(sim.size, dtype=np.float64)
    if k <= 0 or sim.size == 0:
        return out
    values = np.unique(sim)[::-1]  # distinct, descending
    k = min(int(k), values.size)
    last = float(k)
    for r in range(k):
        mask = sim == values[r]
        value = min((k - r) / int(mask.sum()), last)
        out[mask] = value
        last = value * (1 - c)
    return out


def paper_prizes(
    node_sim: np.ndarray,
    edge_sim: np.ndarray,
    k_nodes: int = 10,
    k_edges: int = 10,
    edge_cost: float = 0.5,
) -> Prizes:
    """TaLenT eq. 6-8 / G-Retriever: node prizes k_v - rank for the top-k_v nodes by cosine
    similarity, edge prizes from `tied_edge_prizes`, and G-Retriever's cost adjustment
    `c = min(c, max_edge_prize * (1 - 0.01 / 2))` when edges are prized."""
    node = rank_prizes(node_sim, k_nodes)
    edge = tied_edge_prizes(edge_sim, k_edges)
    cost = float(edge_cost)
    if k_edges > 0 and edge.size:
        cost = min(cost, float(edge.max()) * (1 - GR_C / 2))
    return Prizes(node=node, edge=edge, edge_cost=cost)
