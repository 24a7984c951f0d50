"""The hub cap of the database stores' neighbourhood expansion (ExpansionCaps.hub_scan,
talent_core/store/expand.py): at most max(fanout + 1, hub_scan) incident edges of a node are
read before the key order picks the fanout, so a hub costs hub_scan rows, not a sort of all
its edges. The in-memory reference store sorts all of them (test_store_contract)."""

from __future__ import annotations

from talent_core.models import Edge
from talent_core.store.base import ExpansionCaps

LEAVES = [f"L{i:02d}" for i in range(30)]
# Written with L00..L04 (the key-order top 5) in the middle: neither the first nor the last
# 8 edges written hold L00, whichever end a store starts reading from.
ORDER = LEAVES[15:] + LEAVES[:5] + LEAVES[5:15]


def _hub(store) -> None:
    store.upsert_entities([(x, x, None) for x in ["H", *ORDER]])
    store.upsert_relations([("r", None)])
    # One write per edge: Neo4j links a node's relationships newest-first across
    # transactions, but within one transaction in an order set by record ids (reused after the
    # fixture's deletes): a one-batch hub read L06..L00,L29.. first on a fresh 5.26 store and
    # L00,L01,L16,.. after other tests, so "the order written" would mean nothing there.
    for x in ORDER:
        store.upsert_triples([Edge(src="H", rel="r", dst=x)])


def caps(hub_scan: int) -> ExpansionCaps:
    return ExpansionCaps(fanout=5, max_nodes=100, max_edges=100, hub_scan=hub_scan)


def test_a_node_within_the_scan_gets_the_exact_key_order_choice(graph_store):
    _hub(graph_store)
    sub = graph_store.neighbourhood(["H"], 1, caps(30))
    assert sorted(e.dst for e in sub.edges) == LEAVES[:5]
    assert sub.truncated


def test_a_hub_past_the_scan_is_read_only_up_to_it(graph_store):
    _hub(graph_store)
    capped = [graph_store.neighbourhood(["H"], 1, caps(8)) for _ in range(3)]
    assert all(c == capped[0] for c in capped)  # the same choice on every call
    dst = sorted(e.dst for e in capped[0].edges)
    assert len(dst) == 5 and capped[0].truncated and set(dst) <= set(LEAVES)
    assert "L00" not in dst  # chosen among the 8 edges read, not among all 30
    # the scan is never below fanout + 1: the fanout is still filled and truncation seen
    tiny = graph_store.neighbourhood(["H"], 1, caps(1))
    assert len(tiny.edges) == 5 and tiny.truncated
    # a node of small degree is unaffected by the cap
    leaf = graph_store.neighbourhood(["L07"], 1, caps(8))
    assert [(e.src, e.dst) for e in leaf.edges] == [("H", "L07")]


def test_retrieval_config_hands_the_scan_to_the_store():
    from talent_core.retrieval.config import RetrievalConfig

    assert RetrievalConfig(hub_scan=77).caps().hub_scan == 77


def test_the_path_rule_hands_the_scan_to_the_store():
    from talent_core.models import Subgraph
    from talent_core.retrieval.neighbourhood import OneHop

    seen: list[ExpansionCaps] = []

    class Store:
        def neighbourhood(self, ids, hops, caps):
            seen.append(caps)
            return Subgraph()

    OneHop(Store(), caps(7))(["H"])
    assert seen[0].hub_scan == 7 and seen[0].fanout == 5
