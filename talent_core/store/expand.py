"""Store-independent n-hop expansion: every store fetches one hop per call, this assembles.

The database does the heavy part of each hop (for every frontier node, the `fanout + 1`
smallest incident edges by the stable key (neighbour id, relation, direction), chosen with a
top-k inside the database, so a hub with 10k edges sends at most `fanout + 1` rows); this
module applies the caps deterministically and builds the Subgraph.

Hubs: the database reads at most `max(fanout + 1, caps.hub_scan)` incident edges per frontier
node, in its own traversal order, before the key order applies (a cap before the sort: a
node with 77k edges costs hub_scan rows, not a sort of 77k). Nodes of degree <= hub_scan
get the exact key-order choice; a larger hub the key-order choice among the edges read
(stable for a given store, truncated either way). The in-memory reference store sorts all.

Determinism: seeds and each frontier are processed in id order and each node's edges in key
order, so the result depends neither on the order of `seed_ids` nor (below hub_scan) on the
load order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence

from talent_core.models import Edge, Entity, Subgraph
from talent_core.store.base import ExpansionCaps, check_hops

# (frontier id, stored direction is frontier -> neighbour, relation, neighbour id, its name)
HopRow = tuple[str, bool, str, str, str]
FetchHop = Callable[[list[str], int], Iterable[HopRow]]
FETCH_CHUNK = 64  # frontier ids of the first fetch of a hop; each further fetch doubles


def expand(
    seeds: Sequence[Entity], fetch_hop: FetchHop, hops: int, caps: ExpansionCaps
) -> Subgraph:
    """Breadth-first expansion from `seeds` (entities known to exist; none: an empty graph).

    `fetch_hop(frontier_ids, limit)` returns, for each frontier id, up to `limit` incident
    edges. At most `fanout` of them are followed per node and hop (edges back to known nodes
    count too); a node is added only with the edge that reaches it, so every edge's endpoints
    are in `nodes`. `truncated` is True whenever a cap left out something that existed."""
    check_hops(hops)
    fanout, max_nodes, max_edges = caps.fanout, caps.max_nodes, caps.max_edges
    nodes: dict[str, str] = {}
    truncated = False
    for e in sorted({e.id: e for e in seeds}.values(), key=lambda e: e.id):
        if len(nodes) >= max_nodes:
            truncated = True
            break
        nodes[e.id] = e.name
    edges: dict[tuple[str, str, str], None] = {}
    frontier = sorted(nodes)
    full = False  # max_edges reached and something more was there
    for _ in range(hops):
        if not frontier or full:
            break
        nxt: list[str] = []
        for fid, incident in _incident(frontier, fetch_hop, fanout + 1):
            incident = sorted(incident)
            if len(incident) > fanout:
                truncated = True
                incident = incident[:fanout]
            for mid, rel, out, mname in incident:
                key = (fid, rel, mid) if out else (mid, rel, fid)
                if key in edges:
                    continue
                if len(edges) >= max_edges:
                    truncated = full = True
                    break
                if mid not in nodes:
                    if len(nodes) >= max_nodes:
                        truncated = True
                        continue
                    nodes[mid] = mname
                    nxt.append(mid)
                edges[key] = None
            if full:
                break
        frontier = sorted(nxt)
    return Subgraph(
        nodes=[Entity(id=i, name=n) for i, n in nodes.items()],
        edges=[Edge(src=s, rel=r, dst=d) for s, r, d in edges],
        truncated=truncated,
    )


def _incident(
    frontier: list[str], fetch_hop: FetchHop, limit: int
) -> Iterator[tuple[str, list[tuple[str, str, bool, str]]]]:
    """(frontier id, its fetched incident edges) in frontier order, fetched in chunks of
    FETCH_CHUNK ids (growing), so that an expansion that fills max_edges early (the caller
    stops iterating) has not read the edges of the rest of a large frontier: the same result
    as one fetch of all of it, for far fewer rows at depth 3."""
    i, size = 0, FETCH_CHUNK
    while i < len(frontier):
        chunk = frontier[i : i + size]
        by_node: dict[str, list[tuple[str, str, bool, str]]] = defaultdict(list)
        for fid, out, rel, mid, mname in fetch_hop(chunk, limit):
            by_node[fid].append((mid, rel, bool(out), mname))
        for fid in chunk:
            yield fid, by_node.get(fid, [])
        i += size
        size *= 2
