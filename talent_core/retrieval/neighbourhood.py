"""Stage 2: the n-hop neighbourhood of the anchors, through the store only.

`neighbourhood` is the plain expansion (the paper rule's graph): one
`store.neighbourhood(anchors, hops, fanout, max_nodes, max_edges)` call.

`OneHop` is what the default rule's question-aware expansion (`paths.expand_paths`) calls
once per depth: the 1-hop neighbourhood of the current frontier, with the same per-node
fan-out and what is left of the total node/edge budgets; it remembers whether any call was
truncated.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from talent_core.models import Subgraph

log = logging.getLogger(__name__)

MIN_HOPS, MAX_HOPS = 1, 3


def check_hops(hops: int) -> int:
    if not MIN_HOPS <= int(hops) <= MAX_HOPS:
        raise ValueError(f"hops must be between {MIN_HOPS} and {MAX_HOPS}, got {hops}")
    return int(hops)


def neighbourhood(
    store,
    anchor_ids: Sequence[str],
    *,
    hops: int = 2,
    fanout: int = 50,
    max_nodes: int = 2000,
    max_edges: int = 5000,
) -> Subgraph:
    check_hops(hops)
    if not anchor_ids:
        return Subgraph()
    sub = store.neighbourhood(
        list(anchor_ids), hops=hops, fanout=fanout, max_nodes=max_nodes, max_edges=max_edges
    )
    if sub.truncated:
        log.debug("neighbourhood of %d anchors truncated by a cap", len(anchor_ids))
    return sub


class OneHop:
    """Frontier -> its 1-hop neighbourhood, within a shared node/edge budget."""

    def __init__(self, store, *, fanout: int = 50, max_nodes: int = 2000, max_edges: int = 5000):
        self.store = store
        self.fanout = fanout
        self.max_nodes = max_nodes
        self.max_edges = max_edges
        self.nodes: set[str] = set()
        self.edges = 0
        self.truncated = False
        self.calls = 0

    def __call__(self, frontier: list[str]) -> Subgraph:
        left_nodes = self.max_nodes - len(self.nodes)
        left_edges = self.max_edges - self.edges
        if not frontier or left_nodes <= 0 or left_edges <= 0:
            if frontier:
                self.truncated = True
            return Subgraph(truncated=bool(frontier))
        self.calls += 1
        # the frontier itself is already counted; the store counts it again in its cap
        sub = self.store.neighbourhood(
            frontier,
            hops=1,
            fanout=self.fanout,
            max_nodes=left_nodes + len(frontier),
            max_edges=left_edges,
        )
        self.nodes.update(n.id for n in sub.nodes)
        self.edges += len(sub.edges)
        self.truncated |= sub.truncated
        return sub
