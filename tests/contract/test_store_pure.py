"""Pure parts of the stores: name normalisation, fulltext query building, key rules, and the
hop-by-hop expansion against an in-memory fetcher (no database)."""

from __future__ import annotations

import pytest

from talent_core.models import Entity
from talent_core.store.base import ExpansionCaps
from talent_core.store.expand import expand
from talent_core.text import (
    key_problem,
    lucene_escape,
    lucene_query,
    normalise_name,
    redisearch_query,
    search_tokens,
)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("  The   Matrix\tRELOADED \n", "the matrix reloaded"),
        ("KEANU reeves", "keanu reeves"),
        ("Zoë", "zoë"),
        ("Zoe\u0308", "zoë"),  # NFC: combining diaeresis composed
        ("m.0abc", "m.0abc"),
        ("   ", ""),
    ],
)
def test_normalise_name(raw, want):
    assert normalise_name(raw) == want


def test_fulltext_queries_contain_only_words():
    assert search_tokens("The Matrix (film), the MATRIX!") == ["the", "matrix", "film"]
    assert redisearch_query('x"}) DETACH | DELETE n // @a:{b}') == "x | detach | delete | n | a | b"
    assert lucene_query("AND OR NOT title:x*") == "and or not title x"
    assert lucene_query("") == redisearch_query("?!") == ""
    assert search_tokens("東京 Привет 🎬") == ["東京", "привет"]
    assert lucene_escape('a+b-c&&d||e!f(g)h{i}j[k]l^m"n~o*p?q:r\\s/t') == (
        'a\\+b\\-c\\&\\&d\\|\\|e\\!f\\(g\\)h\\{i\\}j\\[k\\]l\\^m\\"n\\~o\\*p\\?q\\:r\\\\s\\/t'
    )


def test_key_problem():
    assert key_problem("m.0abc") is None
    assert key_problem("people.person.place_of_birth") is None
    assert key_problem("a b\tc") is None
    assert key_problem("") == "is empty"
    assert key_problem(" a") == key_problem("a ") == key_problem("\n")
    assert "whitespace" in key_problem("a\u3000")
    assert "NUL" in key_problem("a\x00b")


# --- expand -------------------------------------------------------------------------------

# undirected adjacency of a small graph: (src, rel, dst) as stored
TRIPLES = [("s", "r", f"x{i}") for i in range(6)] + [
    ("x0", "q", "y"),
    ("y", "q", "z"),
    ("t", "r", "s"),
]


class Fetcher:
    def __init__(self, triples):
        self.triples = triples
        self.calls: list[tuple[list[str], int]] = []

    def __call__(self, frontier: list[str], limit: int):
        self.calls.append((list(frontier), limit))
        out = []
        for fid in frontier:
            rows = []
            for h, r, t in self.triples:
                if h == fid:
                    rows.append((fid, True, r, t, t.upper()))
                if t == fid:
                    rows.append((fid, False, r, h, h.upper()))
            rows.sort(key=lambda x: (x[3], x[2], x[1]))
            out.extend(reversed(rows[:limit]))  # any row order: expand sorts
        return out


def caps(fanout: int, max_nodes: int, max_edges: int) -> ExpansionCaps:
    return ExpansionCaps(fanout=fanout, max_nodes=max_nodes, max_edges=max_edges)


def seeds(*ids):
    return [Entity(id=i, name=i.upper()) for i in ids]


def test_expand_hops_and_limits():
    f = Fetcher(TRIPLES)
    sg = expand(seeds("s"), f, hops=2, caps=caps(50, 100, 100))
    assert not sg.truncated
    assert sg.node_ids() == {"s", "t", "y"} | {f"x{i}" for i in range(6)}
    assert {(e.src, e.rel, e.dst) for e in sg.edges} == set(TRIPLES) - {("y", "q", "z")}
    assert f.calls[0] == (["s"], 51)  # fanout + 1 to detect a cut
    assert f.calls[1][0] == sorted(f.calls[1][0])  # frontier in id order
    assert len(f.calls) == 2


def test_expand_fanout_cut_is_by_key_and_flagged():
    sg = expand(seeds("s"), Fetcher(TRIPLES), hops=1, caps=caps(3, 100, 100))
    assert sg.truncated
    # the 3 smallest by neighbour id ("t" < "x0" < "x1"), whatever order the rows came in
    assert {(e.src, e.dst) for e in sg.edges} == {("t", "s"), ("s", "x0"), ("s", "x1")}


def test_expand_exact_fit_is_not_truncated():
    sg = expand(seeds("y"), Fetcher(TRIPLES), hops=1, caps=caps(2, 3, 2))
    assert not sg.truncated and len(sg.edges) == 2 and len(sg.nodes) == 3


def test_expand_total_caps():
    sg = expand(seeds("s"), Fetcher(TRIPLES), hops=2, caps=caps(50, 4, 100))
    assert sg.truncated and len(sg.nodes) == 4
    sg = expand(seeds("s"), Fetcher(TRIPLES), hops=2, caps=caps(50, 100, 2))
    assert sg.truncated and len(sg.edges) == 2
    for e in sg.edges:
        assert {e.src, e.dst} <= sg.node_ids()
    many = expand(seeds("b", "a", "c"), Fetcher([]), hops=1, caps=caps(5, 2, 5))
    assert many.truncated and [n.id for n in many.nodes] == ["a", "b"]


def test_expand_order_independent():
    a = expand(seeds("y", "s"), Fetcher(TRIPLES), hops=2, caps=caps(2, 6, 9))
    b = expand(
        seeds("s", "y", "s"), Fetcher(TRIPLES[::-1]), hops=2, caps=caps(2, 6, 9)
    )
    assert a == b


@pytest.mark.parametrize(
    "kwargs", [{"hops": 4}, {"hops": -1}, {"fanout": 0}, {"max_nodes": 0}, {"max_edges": -1}]
)
def test_expand_rejects_bad_caps(kwargs):
    args = {"hops": 1, "fanout": 5, "max_nodes": 10, "max_edges": 10} | kwargs
    with pytest.raises(ValueError):
        expand(seeds("s"), Fetcher(TRIPLES), args.pop("hops"), ExpansionCaps(**args))


# --- Neo4j glue without a server --------------------------------------------------------
# The contract suite runs against Neo4j only with NEO4J_URI; this checks, everywhere, that
# Neo4jStore sends only statements from cypher/neo4j and supplies every $parameter they use.


class _FakeNeo4jDriver:
    def __init__(self):
        import re
        from importlib import resources

        root = resources.files("talent_core.cypher") / "neo4j"
        self.known = set()
        for f in root.iterdir():
            if f.name.endswith(".cypher"):
                from talent_core.store.cypher import statement, statements

                name = f.name[: -len(".cypher")]
                self.known.add(statement(name, "neo4j"))
                self.known.update(statements(name, "neo4j"))
        self.param = re.compile(r"\$(\w+)")
        self.sent: list[str] = []

    def verify_connectivity(self):
        return None

    def execute_query(self, query, parameters=None, routing_=None, database_=None):
        assert query in self.known, f"not a cypher/neo4j statement: {query[:80]!r}"
        missing = set(self.param.findall(query)) - set(parameters or {})
        assert not missing, f"parameters {missing} not supplied for {query[:80]!r}"
        self.sent.append(query)
        if "AS written" in query:
            return [{"written": len(parameters["rows"])}], None, None
        if query.rstrip().endswith("AS n"):
            return [{"n": 0}], None, None
        return [], None, None

    def session(self, database=None):
        driver = self

        class _Session:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def run(self, query, parameters=None):
                driver.execute_query(query, parameters)

                class _Result:
                    def consume(self):
                        return None

                return _Result()

        return _Session()

    def close(self):
        return None


def test_neo4j_store_sends_file_statements_with_all_parameters():
    from talent_core.models import Edge
    from talent_core.store.neo4j import Neo4jStore

    drv = _FakeNeo4jDriver()
    s = Neo4jStore("bolt://fake:7687", driver=drv)
    v = [1.0] + [0.0] * 7
    s.ensure_schema(8)
    with pytest.raises(ValueError, match="dimension"):
        s.upsert_entities([("c", "C", [1.0, 0.0])])
    s.upsert_entities([("a", "A", v), ("b", "B", None)])
    s.upsert_relations([("r", v), ("q", None)])
    s.upsert_triples([Edge(src="a", rel="r", dst="b")])
    s.existing_entities(["a"])
    s.existing_relations(["r"])
    s.top_entities(v, 3)
    s.top_relations(v, 3)
    s.entities_by_name(["A"])
    s.entities_by_id(["a"])
    s.search_names("the matrix", 3)
    s.neighbourhood(["a"], 2, caps(50, 2000, 5000))
    s.entity_similarity(["a"], v)
    s.relation_similarity(["r"], v)
    assert s.stats().triples == 0
    s.clear()
    s.close()
    assert len(set(drv.sent)) >= 20


@pytest.mark.parametrize("max_edges", [20, 40, 120, 10_000])
@pytest.mark.parametrize("max_nodes", [7, 60, 10_000])
def test_expand_fetches_the_frontier_in_chunks_with_the_same_result(
    monkeypatch, max_nodes, max_edges
):
    """The frontier is fetched in growing chunks and reading stops once max_edges is full:
    the same subgraph as one fetch of the whole frontier, from fewer rows."""
    import random

    from talent_core.store import expand as ex

    rnd = random.Random(max_nodes * 7 + max_edges)
    triples = sorted({(f"n{rnd.randrange(90)}", rnd.choice("abc"), f"n{rnd.randrange(90)}")
                      for _ in range(400)})  # fmt: skip
    cap = ExpansionCaps(fanout=6, max_nodes=max_nodes, max_edges=max_edges)
    monkeypatch.setattr(ex, "FETCH_CHUNK", 10**6)
    whole = Fetcher(triples)
    want = ex.expand(seeds("n1", "n2"), whole, 3, cap)
    monkeypatch.setattr(ex, "FETCH_CHUNK", 2)
    chunked = Fetcher(triples)
    got = ex.expand(seeds("n1", "n2"), chunked, 3, cap)
    assert got == want
    asked = sum(len(f) for f, _ in chunked.calls)
    assert asked <= sum(len(f) for f, _ in whole.calls)
    if max_edges == 20 and max_nodes > 7:  # full early in hop 2: the rest is never read
        assert asked < sum(len(f) for f, _ in whole.calls)
