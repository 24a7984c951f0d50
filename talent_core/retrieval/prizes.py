"""Prize rules for the PCST step (pure numpy).

`paper_prizes`: TaLenT eq. 6-8 exactly as G-Retriever's `retrieval_via_pcst` computes them.
`path_prizes`: the default rule (relation-path scoring); see its docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def path_prizes(
    n_nodes: int,
    n_edges: int,
    anchors: Sequence[int],
    ranked_ends: Sequence[Sequence[int]],
    k_nodes: int = 10,
    edge_cost: float = 0.5,
) -> Prizes:
    """The default rule (relation-path prizes).

    `ranked_ends`: for each path type, best type first, its end nodes best first (see
    `paths.expand_paths`: score of the type, then support of the end). The k_nodes prized
    nodes are drawn ROUND-ROBIN across the types (the best end of every type, then the
    second best, ...), skipping anchors and nodes already drawn; the r-th drawn node gets
    k_nodes - r, as in the paper rule. Anchors get k_nodes + 1, so the tree keeps them.
    Edges get no prize (relation relevance already chose the paths); cost `edge_cost`.

    Why round-robin: the relation scores rank the correct path type first only for about
    half of the 3-hop questions, but within the top five for over 90%; and every end of
    the correct type is an answer, so one or two ends per type are enough for a hit. A
    type with hundreds of ends (all actors of all films of ...) therefore cannot flood S,
    and there are no tie-shared prizes to vanish. PCST then drops drawn nodes whose path
    costs more than their prize (a rank-10 node three hops out) and shares intermediates.
    """
    node = np.zeros(n_nodes, dtype=np.float64)
    anchors = [int(a) for a in anchors]
    taken = set(anchors)
    drawn: list[int] = []
    k = max(0, int(k_nodes))
    depth = 0
    lists = [list(map(int, ends)) for ends in ranked_ends]
    cursors = [0] * len(lists)
    while len(drawn) < k and any(c < len(lst) for c, lst in zip(cursors, lists, strict=True)):
        for t, lst in enumerate(lists):
            if len(drawn) >= k:
                break
            while cursors[t] < len(lst) and lst[cursors[t]] in taken:
                cursors[t] += 1
            if cursors[t] < len(lst):
                j = lst[cursors[t]]
                cursors[t] += 1
                taken.add(j)
                drawn.append(j)
        depth += 1
    for r, j in enumerate(drawn):
        node[j] = float(k - r)
    if anchors:
        node[anchors] = float(k + 1)
    return Prizes(node=node, edge=np.zeros(n_edges, dtype=np.float64), edge_cost=float(edge_cost))
