"""Stage 2: the n-hop neighbourhood of the anchors, through the store only.

`neighbourhood` is the plain expansion (the paper rule's graph): one
`store.neighbourhood(anchors, hops, caps)` call (`RetrievalConfig.caps()`).

`OneHop` is what the default rule's question-aware expansion (`paths.expand_paths`) calls
once per depth: the 1-hop neighbourhood of the current frontier, with the same per-node
fan-out and what is left of the total node/edge budgets; it remembers whether any call was
truncated.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from talent_core.models import Subgraph
from talent_core.retrieval.config import MAX_HOPS, MIN_HOPS
from talent_core.store.base import ExpansionCaps, GraphReader

log = logging.getLogger(__name__)

def check_hops(hops: int) -> int:
    if not MIN_HOPS <= int(hops) <= MAX_HOPS:
        raise ValueError(f"hops must be between {MIN_HOPS} and {MAX_HOPS}, got {hops}")
    return int(hops)


def neighbourhood(
    store: GraphReader, anchor_ids: Sequence[str], hops: int, caps: ExpansionCaps
) -> Subgraph:
    check_hops(hops)
    if not anchor_ids:
        return Subgraph()
    sub = store.neighbourhood(list(anchor_ids), hops, caps)
    if sub.truncated:
        log.debug("neighbourhood of %d anchors truncated by a cap", len(anchor_ids))
    return sub


class OneHop:
    """Frontier -> its 1-hop neighbourhood, within a shared node/edge budget."""

    def __init__(self, store: GraphReader, caps: ExpansionCaps):
        self.store = store
        self.caps = caps
        self.nodes: set[str] = set()
        self.edges = 0
        self.truncated = False
        self.calls = 0

    def __call__(self, frontier: list[str]) -> Subgraph:
        left_nodes = self.caps.max_nodes - len(self.nodes)
        left_edges = self.caps.max_edges - self.edges
        if not frontier or left_nodes <= 0 or left_edges <= 0:
            if frontier:
                self.truncated = True
            return Subgraph(truncated=bool(frontier))
        self.calls += 1
        # the frontier itself is already counted; the store counts it again in its cap
        left = ExpansionCaps(
            fanout=self.caps.fanout, max_nodes=left_nodes + len(frontier), max_edges=left_edges
        )
        sub = self.store.neighbourhood(frontier, 1, left)
        self.nodes.update(n.id for n in sub.nodes)
        self.edges += len(sub.edges)
        self.truncated |= sub.truncated
        return sub
