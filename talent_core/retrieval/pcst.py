"""Prize-collecting Steiner tree over a small graph: G-Retriever's `retrieval_via_pcst` step.

Pure: arrays in, selected indices out. Mirrors G-Retriever exactly:

* an edge whose prize is at most the edge cost stays a real edge with cost `cost - prize`;
* an edge whose prize exceeds the cost becomes a *virtual node* with prize `prize - cost`,
  joined to both endpoints by two zero-cost edges, so the edge prize counts (pcst_fast itself
  only knows node prizes and edge costs);
* `pcst_fast(edges, prizes, costs, root=-1, num_clusters=1, pruning="gw", verbosity=0)`;
* the selected edges are the real edges returned plus the original edges of the selected
  virtual nodes; the selected nodes are the real vertices returned plus every endpoint of a
  selected edge. The result is connected. It is a tree in the virtual graph; mapped back it
  can hold a cycle when a virtual node is a leaf whose far endpoint is already in the tree,
  or with parallel edges (two relations between the same pair), exactly as G-Retriever.

Defined results where pcst_fast is undefined or arbitrary:
* no nodes -> empty;
* nothing to gain (no positive node prize and no edge prize above the cost) -> empty
  (pcst_fast would return one arbitrary node);
* no edges -> the single node of highest prize (lowest index on ties).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PCSTResult:
    nodes: np.ndarray  # sorted int64 indices of the selected nodes
    edges: np.ndarray  # sorted int64 indices into the input edge list

    @property
    def empty(self) -> bool:
        return self.nodes.size == 0


_EMPTY = PCSTResult(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def pcst(
    num_nodes: int,
    edges: np.ndarray,
    node_prizes: np.ndarray,
    edge_prizes: np.ndarray | None = None,
    edge_cost: float = 0.5,
    *,
    root: int = -1,
    num_clusters: int = 1,
    pruning: str = "gw",
) -> PCSTResult:
    """Select a connected subgraph maximising prizes minus `edge_cost` per edge.

    `edges`: (E, 2) int array of node indices in [0, num_nodes); `node_prizes`: (num_nodes,);
    `edge_prizes`: (E,) or None for zeros; `edge_cost`: the per-edge cost c (>= 0).
    """
    from pcst_fast import pcst_fast

    if edge_cost < 0:
        raise ValueError(f"edge_cost must be >= 0, got {edge_cost}")
    node_prizes = np.asarray(node_prizes, dtype=np.float64).reshape(-1)
    if node_prizes.shape[0] != num_nodes:
        raise ValueError(f"node_prizes has {node_prizes.shape[0]} entries for {num_nodes} nodes")
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    n_edges = edges.shape[0]
    if edge_prizes is None:
        edge_prizes = np.zeros(n_edges, dtype=np.float64)
    edge_prizes = np.asarray(edge_prizes, dtype=np.float64).reshape(-1)
    if edge_prizes.shape[0] != n_edges:
        raise ValueError(f"edge_prizes has {edge_prizes.shape[0]} entries for {n_edges} edges")
    if n_edges and (edges.min() < 0 or edges.max() >= num_nodes):
        raise ValueError("edge endpoint out of range")
    if np.any(node_prizes < 0) or np.any(edge_prizes < 0):
        raise ValueError("prizes must be >= 0")

    if num_nodes == 0:
        return _EMPTY
    if not (node_prizes.max() > 0 or (n_edges and edge_prizes.max() > edge_cost)):
        return _EMPTY
    if n_edges == 0:
        best = int(np.argmax(node_prizes))
        return PCSTResult(np.array([best], dtype=np.int64), np.zeros(0, dtype=np.int64))

    # G-Retriever: edges with prize > cost become virtual nodes so that their prize counts.
    virtual = edge_prizes > edge_cost
    real_idx = np.flatnonzero(~virtual)
    virt_idx = np.flatnonzero(virtual)
    n_virt = virt_idx.size
    virt_nodes = num_nodes + np.arange(n_virt, dtype=np.int64)
    all_edges = np.concatenate(
        [
            edges[real_idx],
            np.stack([edges[virt_idx, 0], virt_nodes], axis=1),
            np.stack([virt_nodes, edges[virt_idx, 1]], axis=1),
        ]
    )
    costs = np.concatenate(
        [edge_cost - edge_prizes[real_idx], np.zeros(2 * n_virt, dtype=np.float64)]
    )
    prizes = np.concatenate([node_prizes, edge_prizes[virt_idx] - edge_cost])

    vertices, sel_edges = pcst_fast(all_edges, prizes, costs, root, num_clusters, pruning, 0)
    vertices = np.asarray(vertices, dtype=np.int64)
    sel_edges = np.asarray(sel_edges, dtype=np.int64)

    chosen = [real_idx[sel_edges[sel_edges < real_idx.size]]]
    vv = vertices[vertices >= num_nodes]
    if vv.size:
        chosen.append(virt_idx[vv - num_nodes])
    edge_sel = np.unique(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)
    node_sel = np.unique(
        np.concatenate([vertices[vertices < num_nodes], edges[edge_sel].reshape(-1)])
    )
    return PCSTResult(node_sel.astype(np.int64), edge_sel.astype(np.int64))


def is_connected(
    num_nodes: int, edges: np.ndarray, nodes: np.ndarray, edge_idx: np.ndarray
) -> bool:
    """True when `nodes` with the edges `edge_idx` form one connected component (an empty
    selection and a single node count as connected)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    if nodes.size <= 1:
        return True
    parent = {int(n): int(n) for n in nodes}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in np.asarray(edges, dtype=np.int64).reshape(-1, 2)[edge_idx]:
        if int(a) not in parent or int(b) not in parent:
            return False
        ra, rb = find(int(a)), find(int(b))
        if ra != rb:
            parent[ra] = rb
    return len({find(int(n)) for n in nodes}) == 1
