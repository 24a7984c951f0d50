"""One contract suite for every store: the embedded FalkorDB always, Neo4j when NEO4J_URI is
set (see tests/conftest.py); the read half (`read_store`) runs on the in-memory store too.
Embedded-only durability tests are at the end."""

from __future__ import annotations

import itertools
import math
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from talent_core.models import Edge, Subgraph
from talent_core.store.base import ExpansionCaps, GraphReader, GraphStore

REPO = Path(__file__).resolve().parents[2]


# The same fake vectors as the `one_hot` / `fake_vector` fixtures of tests/conftest.py (test
# modules cannot import conftest portably; module-level data needs them as functions).
def one_hot(i: int, dim: int = 8) -> list[float]:
    v = [0.0] * dim
    v[i % dim] = 1.0
    return v


def fake_vector(key: str | int, dim: int = 8) -> list[float]:
    v = np.random.default_rng(zlib.crc32(str(key).encode("utf-8"))).standard_normal(dim)
    return (v / np.linalg.norm(v)).tolist()


# --- small fixtures of data -------------------------------------------------------------

PEOPLE = [
    ("m.0abc", "Keanu Reeves"),
    ("m.0def", "The Matrix"),
    ("m.0ghi", "The Matrix Reloaded"),
    ("m.0jkl", "Beirut"),
    ("m.0mno", "keanu   REEVES"),  # another entity, same normalised name
]
FB_RELS = ["film.film.starring", "people.person.place_of_birth", "film.film.sequel"]


def load_people(store: GraphStore) -> None:
    store.upsert_entities([(i, n, one_hot(k)) for k, (i, n) in enumerate(PEOPLE)])
    store.upsert_relations([(r, one_hot(k)) for k, r in enumerate(FB_RELS)])
    store.upsert_triples(
        [
            Edge(src="m.0def", rel="film.film.starring", dst="m.0abc"),
            Edge(src="m.0ghi", rel="film.film.starring", dst="m.0abc"),
            Edge(src="m.0abc", rel="people.person.place_of_birth", dst="m.0jkl"),
            Edge(src="m.0def", rel="film.film.sequel", dst="m.0ghi"),
        ]
    )


# Neighbourhood graph: a chain a->b->c->d->e, a hub H with 20 leaves (H -> leaf), a->H,
# and a back edge c->a.
CHAIN = [("a", "r1", "b"), ("b", "r2", "c"), ("c", "r3", "d"), ("d", "r4", "e"), ("c", "r6", "a")]
HUB = [("a", "r5", "H")] + [("H", "genre_of", f"leaf{i:02d}") for i in range(20)]
NB_TRIPLES = CHAIN + HUB


def load_nb(store: GraphStore, reverse: bool = False) -> None:
    ids = sorted({x for h, _, t in NB_TRIPLES for x in (h, t)})
    triples = NB_TRIPLES[::-1] if reverse else NB_TRIPLES
    if reverse:
        ids = ids[::-1]
    store.upsert_entities([(i, f"Node {i}", fake_vector(i)) for i in ids])
    store.upsert_triples([Edge(src=h, rel=r, dst=t) for h, r, t in triples])


def nb(
    store: GraphReader,
    seed_ids: list[str],
    hops: int = 2,
    fanout: int = 50,
    max_nodes: int = 2000,
    max_edges: int = 5000,
) -> Subgraph:
    """`store.neighbourhood` with this suite's caps."""
    caps = ExpansionCaps(fanout=fanout, max_nodes=max_nodes, max_edges=max_edges)
    return store.neighbourhood(seed_ids, hops, caps)


def edge_set(sg: Subgraph) -> set[tuple[str, str, str]]:
    return {(e.src, e.rel, e.dst) for e in sg.edges}


def assert_consistent(sg: Subgraph) -> None:
    ids = [n.id for n in sg.nodes]
    assert len(ids) == len(set(ids)), "a node appears twice"
    keys = [(e.src, e.rel, e.dst) for e in sg.edges]
    assert len(keys) == len(set(keys)), "an edge appears twice"
    for s, _, d in keys:
        assert s in sg.node_ids() and d in sg.node_ids(), f"dangling edge {s}->{d}"


def counts(store: GraphStore) -> tuple[int, int, int, int]:
    st = store.stats()
    return st.entities, st.relations, st.triples, st.entities_with_embedding


# --- schema ---------------------------------------------------------------------------------


def test_protocol_and_dialect(read_store):
    assert isinstance(read_store, GraphReader)
    assert read_store.dialect in ("falkordb", "neo4j", "memory")
    assert isinstance(read_store, GraphStore) == (read_store.dialect != "memory")


def test_schema_is_idempotent(graph_store):
    graph_store.ensure_schema(8)
    graph_store.ensure_schema(8)
    load_people(graph_store)
    graph_store.ensure_schema(8)
    assert counts(graph_store) == (5, 3, 4, 5)


def test_schema_refuses_another_dimension(graph_store):
    load_people(graph_store)
    with pytest.raises(ValueError, match="dimension"):
        graph_store.ensure_schema(16)


def test_empty_store(read_store):
    assert counts(read_store) == (0, 0, 0, 0)
    assert read_store.top_entities(one_hot(0), 5) == []
    assert read_store.entities_by_name(["x"]) == []
    assert nb(read_store, ["x"]) == Subgraph()


# --- writes ---------------------------------------------------------------------------------


def test_upserts_are_idempotent(graph_store):
    load_people(graph_store)
    first = counts(graph_store)
    assert first == (5, 3, 4, 5)
    load_people(graph_store)
    load_people(graph_store)
    assert counts(graph_store) == first


def test_duplicates_within_one_batch(graph_store):
    graph_store.upsert_entities([("x", "X1", one_hot(0)), ("x", "X2", one_hot(1))])
    graph_store.upsert_entities([("y", "Y", one_hot(2))])
    e = Edge(src="x", rel="r", dst="y")
    graph_store.upsert_triples([e, e, e, Edge(src="y", rel="r", dst="x")])
    assert counts(graph_store)[::2] == (2, 2)
    # the last row of a key wins
    assert graph_store.entities_by_id(["x"])[0].name == "X2"
    assert graph_store.top_entities(one_hot(1), 1)[0].entity.id == "x"


def test_upsert_updates_name_and_embedding(graph_store):
    graph_store.upsert_entities([("x", "Old Name", one_hot(0))])
    graph_store.upsert_entities([("x", "New  Name", one_hot(3))])
    assert counts(graph_store)[0] == 1
    assert graph_store.entities_by_name(["new name"])[0].id == "x"
    assert graph_store.entities_by_name(["old name"]) == []
    assert graph_store.top_entities(one_hot(3), 1)[0].entity.id == "x"


def test_batches_larger_than_batch_size(graph_store):
    graph_store.batch_size = 3
    graph_store.vector_batch_size = 2
    ids = [f"e{i}" for i in range(11)]
    graph_store.upsert_entities([(i, i, fake_vector(i)) for i in ids])
    graph_store.upsert_triples([Edge(src=a, rel="next", dst=b) for a, b in itertools.pairwise(ids)])
    assert counts(graph_store)[:3] == (11, 0, 10)
    assert len(graph_store.entities_by_id(ids)) == 11


def test_triples_need_their_entities(graph_store):
    graph_store.upsert_entities([("a", "A", one_hot(0))])
    with pytest.raises(ValueError, match="nowhere"):
        graph_store.upsert_triples([Edge(src="a", rel="r", dst="nowhere")])
    assert counts(graph_store)[2] == 0


def test_existing_entities_and_relations(graph_store):
    graph_store.upsert_entities([("a", "A", one_hot(0)), ("b", "B", None)])
    graph_store.upsert_relations([("r1", one_hot(1)), ("r2", None)])
    assert graph_store.existing_entities(["a", "b", "zz"]) == {"a"}
    assert graph_store.existing_relations(["r1", "r2", "zz"]) == {"r1"}
    assert graph_store.existing_entities([]) == set()
    # an entity stored without an embedding keeps it when re-upserted without one
    graph_store.upsert_entities([("b", "B", one_hot(2))])
    graph_store.upsert_entities([("b", "B renamed", None)])
    assert graph_store.existing_entities(["b"]) == {"b"}
    assert graph_store.entities_by_id(["b"])[0].name == "B renamed"
    st = graph_store.stats()
    assert (st.entities, st.entities_with_embedding, st.relations) == (2, 2, 2)


def test_entities_without_vectors_are_listed_and_filled(read_store):
    """`talent load --vectors later` then `talent vectors`: the entities stored without an
    embedding come first in id order; filling sets only those, never creates an entity
    (one an unload deleted meanwhile stays deleted), never replaces a vector."""
    read_store.upsert_entities([("a", "A", one_hot(0))]
                               + [(f"n{k}", f"Name {k}", None) for k in range(5)])
    assert read_store.entities_without_vectors(3) == [("n0", "Name 0"), ("n1", "Name 1"),
                                                      ("n2", "Name 2")]
    set_ = read_store.set_entity_vectors(
        [("n0", one_hot(1)), ("n1", one_hot(2)), ("a", one_hot(5)), ("gone", one_hot(3))])
    assert set_ == 2  # "a" had its vector, "gone" is not in the store
    assert read_store.entities_without_vectors(10) == [
        ("n2", "Name 2"), ("n3", "Name 3"), ("n4", "Name 4")]
    assert read_store.entities_by_id(["gone"]) == []
    st = read_store.stats()
    assert (st.entities, st.entities_with_embedding) == (6, 3)
    # the filled vectors are found by the vector index and the similarity reads
    assert read_store.top_entities(one_hot(2), 1)[0].entity.id == "n1"
    assert read_store.top_entities(one_hot(0), 1)[0].entity.id == "a"  # kept, not replaced
    sims = read_store.entity_similarity(["n0", "n2"], one_hot(1))
    assert sims.keys() == {"n0"} and sims["n0"] == pytest.approx(1.0, abs=1e-5)


def test_bad_embeddings_are_refused(graph_store):
    with pytest.raises(ValueError):
        graph_store.upsert_entities([("a", "A", [math.nan] * 8)])
    with pytest.raises(ValueError):
        graph_store.upsert_entities([("a", "A", [1.0] * 5)])  # dimension 8 expected
    assert counts(graph_store)[0] == 0


# --- vector top-k ---------------------------------------------------------------------------


def test_top_entities_order_and_scores(read_store):
    read_store.upsert_entities(
        [
            ("same", "Same", one_hot(0)),
            ("near", "Near", [0.9, 0.1, 0, 0, 0, 0, 0, 0]),
            ("orth", "Orthogonal", one_hot(1)),
            ("opp", "Opposite", [-1.0, 0, 0, 0, 0, 0, 0, 0]),
        ]
    )
    res = read_store.top_entities(one_hot(0), 4)
    assert [r.entity.id for r in res] == ["same", "near", "orth", "opp"]
    assert res[0].entity.name == "Same"
    expected = [1.0, 0.9 / math.hypot(0.9, 0.1), 0.0, -1.0]
    for r, want in zip(res, expected):
        assert r.score == pytest.approx(want, abs=1e-4)
    # the query vector's scale does not matter (cosine)
    assert read_store.top_entities([5.0] + [0.0] * 7, 1)[0].entity.id == "same"
    assert len(read_store.top_entities(one_hot(0), 2)) == 2
    assert read_store.top_entities(one_hot(0), 0) == []


def test_top_relations_order_and_scores(read_store):
    read_store.upsert_relations([(r, one_hot(k)) for k, r in enumerate(FB_RELS)])
    res = read_store.top_relations(one_hot(1), 3)
    assert res[0].name == "people.person.place_of_birth"
    assert res[0].score == pytest.approx(1.0, abs=1e-4)
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)
    assert all(r.score == pytest.approx(0.0, abs=1e-4) for r in res[1:])


def test_vector_index_finds_each_of_many(read_store):
    ids = [f"n{i}" for i in range(200)]
    read_store.upsert_entities([(i, i, fake_vector(i)) for i in ids])
    for i in ids[::7]:
        top = read_store.top_entities(fake_vector(i), 3)
        assert top[0].entity.id == i and top[0].score == pytest.approx(1.0, abs=1e-4)


def test_similarities_are_computed_in_the_store(read_store):
    load_people(read_store)
    q = [0.6, 0.8, 0, 0, 0, 0, 0, 0]
    sims = read_store.entity_similarity(["m.0abc", "m.0def", "m.0jkl", "nope"], q)
    assert set(sims) == {"m.0abc", "m.0def", "m.0jkl"}
    assert sims["m.0abc"] == pytest.approx(0.6, abs=1e-4)
    assert sims["m.0def"] == pytest.approx(0.8, abs=1e-4)
    assert sims["m.0jkl"] == pytest.approx(0.0, abs=1e-4)
    rs = read_store.relation_similarity(["film.film.starring", "film.film.sequel", "x"], q)
    assert rs == pytest.approx({"film.film.starring": 0.6, "film.film.sequel": 0.0}, abs=1e-4)
    assert read_store.entity_similarity([], q) == {}


def test_stored_vectors_come_back_unit_length(read_store):
    load_people(read_store)
    ev = read_store.entity_vectors(["m.0abc", "m.0def", "nope"])
    assert set(ev) == {"m.0abc", "m.0def"}
    q = np.array([0.6, 0.8, 0, 0, 0, 0, 0, 0], dtype=np.float32)
    sims = read_store.entity_similarity(["m.0abc", "m.0def"], q)
    for i, v in ev.items():
        assert v.dtype == np.float32 and v.shape == (8,)
        assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)
        assert float(v @ q) == pytest.approx(sims[i], abs=1e-4)  # the same vector the store scores
    rv = read_store.relation_vectors(["film.film.starring", "x"])
    assert set(rv) == {"film.film.starring"}
    assert float(rv["film.film.starring"] @ q) == pytest.approx(0.6, abs=1e-4)
    assert read_store.entity_vectors([]) == {} and read_store.relation_vectors([]) == {}


# --- names ----------------------------------------------------------------------------------


def test_entities_by_name_is_case_and_space_insensitive(read_store):
    load_people(read_store)
    got = read_store.entities_by_name(["  KEANU reeves "])
    assert sorted(e.id for e in got) == ["m.0abc", "m.0mno"]
    got = read_store.entities_by_name(["the\tmatrix", "beirut", "unknown"])
    assert [e.id for e in got] == ["m.0def", "m.0jkl"]  # in the order asked
    assert read_store.entities_by_name([]) == []


def test_entities_by_id(read_store):
    load_people(read_store)
    got = read_store.entities_by_id(["m.0jkl", "missing", "m.0abc", "m.0jkl"])
    assert [(e.id, e.name) for e in got] == [("m.0jkl", "Beirut"), ("m.0abc", "Keanu Reeves")]


def test_search_names(read_store):
    load_people(read_store)
    got = read_store.search_names("matrix", 5)
    assert [e.id for e in got] == ["m.0def", "m.0ghi"]  # equal scores: shorter name first
    assert [e.id for e in read_store.search_names("Matrix (Reloaded)", 1)] == ["m.0ghi"]
    assert len(read_store.search_names("the matrix", 1)) == 1
    assert read_store.search_names("zzzqqq", 5) == []
    # query syntax in user text is inert
    for text in ['x"}) DETACH DELETE n //', "*", "AND OR NOT", "a:b (c) [d] ~e^2 \\", ""]:
        read_store.search_names(text, 5)
    assert counts(read_store)[0] == 5


def test_fuzzy_names(read_store):
    """Every word within its edits (`text.fuzzy_terms`), case and accents as the index has
    them; only membership is the contract (linking rescores the hits)."""
    load_people(read_store)
    read_store.upsert_entities([("m.0pqr", "Amélie", one_hot(5)), ("m.0stu", "Inception",
                                                                   one_hot(6))])
    def ids(text, k=10):
        return {e.id for e in read_store.fuzzy_names(text, k)}

    assert ids("Incepton") == {"m.0stu"}  # one deletion
    assert ids("incpetion") == {"m.0stu"}  # a swap: two edits without Damerau, allowed at 9
    assert ids("amelie") == {"m.0pqr"}  # the accent is one substitution
    assert ids("keanu reevs") == {"m.0abc", "m.0mno"}  # every word must match
    assert ids("keanu matrx") == set()
    assert ids("the matrx") == {"m.0def", "m.0ghi"}
    assert ids("tha matrix") == {"m.0def", "m.0ghi"}  # 3 letters beside others: one edit
    assert ids("zzz matrix") == set()
    assert ids("tha") == set()  # alone: none
    assert ids("beirutxyz") == set()  # three edits
    assert len(read_store.fuzzy_names("matrx", 1)) == 1
    assert read_store.fuzzy_names("zzzqqq", 5) == []
    assert read_store.fuzzy_names("matrix", 0) == []
    for text in ['x"}) DETACH DELETE n //', "*", "AND OR NOT", "a:b (c) [d] ~e^2 \\", "",
                 "%%%", "~2"]:
        read_store.fuzzy_names(text, 5)
    assert counts(read_store)[0] == 7


def test_identifier_names_exact_and_fuzzy(read_store):
    """Names written as identifiers ("Daniel_OPARE"): the exact key is the lowercased name,
    and a fuzzy term of words joined by "_" matches the identifier whole on every store
    (the fulltext indexes keep it as one token; issue 45)."""
    read_store.upsert_entities([("d", "Daniel_OPARE", one_hot(1)), ("r", "Repo_Men", one_hot(2)),
                                ("j", "j_p_morgan_jr", one_hot(3))])
    assert [e.id for e in read_store.entities_by_name(["daniel_opare", "Repo_Men"])] == [
        "d", "r"]
    assert {e.id for e in read_store.fuzzy_names("danel_opare", 10)} == {"d"}
    assert {e.id for e in read_store.fuzzy_names("repo_mne", 10)} == {"r"}
    assert {e.id for e in read_store.fuzzy_names("j_p_morgn_jr", 10)} == {"j"}
    assert read_store.fuzzy_names("opare_daniel", 10) == []


# --- Freebase shapes and hostile text ---------------------------------------------------


def test_freebase_ids_and_dotted_relations_round_trip(graph_store):
    load_people(graph_store)
    sg = nb(graph_store, ["m.0abc"], hops=1)
    assert edge_set(sg) == {
        ("m.0def", "film.film.starring", "m.0abc"),
        ("m.0ghi", "film.film.starring", "m.0abc"),
        ("m.0abc", "people.person.place_of_birth", "m.0jkl"),
    }
    assert graph_store.existing_relations(FB_RELS) == set(FB_RELS)


HOSTILE = [
    'x"}) DETACH DELETE n //',
    "'; MATCH (n) DETACH DELETE n; //",
    "back\\slash \\\" \\' end\\",
    "new\nline\ttab",
    "Zoë Saldaña · 東京 · Привет · 🎬",
    "$param {map: 1} `tick`",
    "a,b|c*d:e",
]


def test_hostile_and_unicode_text_is_stored_verbatim(graph_store):
    rows = [(t, t, fake_vector(k)) for k, t in enumerate(HOSTILE)]  # as ids AND names
    graph_store.upsert_entities(rows)
    graph_store.upsert_relations([(t, fake_vector(t)) for t in HOSTILE])
    graph_store.upsert_triples(
        [Edge(src=HOSTILE[k], rel=HOSTILE[k], dst=HOSTILE[k + 1]) for k in range(len(rows) - 1)]
    )
    n = len(HOSTILE)
    assert counts(graph_store) == (n, n, n - 1, n)
    got = graph_store.entities_by_id(HOSTILE)
    assert [(e.id, e.name) for e in got] == [(t, t) for t in HOSTILE]
    for t in HOSTILE:
        assert [e.id for e in graph_store.entities_by_name([t])] == [t]
    graph_store.upsert_entities(rows)  # MERGE finds every one of them again
    graph_store.upsert_relations([(t, fake_vector(t)) for t in HOSTILE])
    assert counts(graph_store) == (n, n, n - 1, n)
    sg = nb(graph_store, [HOSTILE[0]], hops=3)
    assert {e.rel for e in sg.edges} == set(HOSTILE[:3])
    assert graph_store.top_relations(fake_vector(HOSTILE[4]), 1)[0].name == HOSTILE[4]
    assert set(graph_store.existing_relations(HOSTILE)) == set(HOSTILE)


def test_names_may_have_any_spacing(read_store):
    read_store.upsert_entities([("a", "  Padded  Name\n", one_hot(0)), ("b", "", one_hot(1))])
    assert [(e.id, e.name) for e in read_store.entities_by_id(["a", "b"])] == [
        ("a", "  Padded  Name\n"),
        ("b", ""),
    ]
    assert [e.id for e in read_store.entities_by_name(["padded name"])] == ["a"]
    assert read_store.entities_by_name(["", "  "]) == []  # a blank name matches nothing


@pytest.mark.parametrize("bad", ["", " lead", "trail ", "\n", "   ", "nul\x00"])
def test_keys_that_cannot_be_stored_are_refused(graph_store, bad):
    with pytest.raises(ValueError, match="entity id"):
        graph_store.upsert_entities([("fine", "Fine", one_hot(0)), (bad, "X", one_hot(1))])
    with pytest.raises(ValueError, match="relation name"):
        graph_store.upsert_relations([(bad, one_hot(0))])
    graph_store.upsert_entities([("fine", "Fine", one_hot(0))])
    with pytest.raises(ValueError, match="relation name"):
        graph_store.upsert_triples([Edge(src="fine", rel=bad, dst="fine")])
    assert counts(graph_store) == (1, 0, 0, 1)  # nothing of a refused call was written
    assert graph_store.entities_by_id([bad]) == []
    assert graph_store.existing_entities([bad]) == set()


# --- neighbourhood ------------------------------------------------------------------------


def test_neighbourhood_hops(read_store):
    load_nb(read_store)
    one = nb(read_store, ["b"], hops=1)
    assert edge_set(one) == {("a", "r1", "b"), ("b", "r2", "c")}  # both directions, as stored
    assert {n.id: n.name for n in one.nodes} == {"a": "Node a", "b": "Node b", "c": "Node c"}
    assert not one.truncated
    two = nb(read_store, ["d"], hops=2)
    assert edge_set(two) == {("c", "r3", "d"), ("d", "r4", "e"), ("b", "r2", "c"), ("c", "r6", "a")}
    assert not two.truncated
    three = nb(read_store, ["e"], hops=3)
    assert three.node_ids() == {"e", "d", "c", "b", "a"}
    # the nodes reached by the last hop are not expanded: a-b joins two of them, not followed
    assert ("a", "r1", "b") not in edge_set(three) and not three.truncated
    assert "H" not in three.node_ids()
    for sg in (one, two, three):
        assert_consistent(sg)
    zero = nb(read_store, ["e"], hops=0)
    assert zero.node_ids() == {"e"} and zero.edges == []
    with pytest.raises(ValueError):
        nb(read_store, ["e"], hops=4)


def test_follow_one_relation_both_directions(read_store):
    load_nb(read_store)
    # c has r2 from b, r3 to d, r6 to a: only the asked relation, whichever way it points
    assert read_store.follow(["c"], "r3", 10) == [("c", "d")]
    assert sorted(read_store.follow(["c", "b"], "r2", 10)) == [("b", "c"), ("c", "b")]
    assert read_store.follow(["a"], "r6", 10) == [("a", "c")]
    # per-node limit in neighbour-id order; unknown ids and relations give nothing
    leaves = read_store.follow(["H"], "genre_of", 5)
    assert leaves == [("H", f"leaf{i:02d}") for i in range(5)]
    assert read_store.follow(["H"], "genre_of", 100)[-1] == ("H", "leaf19")
    assert read_store.follow(["nope"], "r1", 10) == []
    assert read_store.follow(["a"], "no such relation", 10) == []
    assert read_store.follow(["a"], "r1; MATCH (n) DETACH DELETE n", 10) == []
    assert len(nb(read_store, ["a"], hops=1).edges) == 3  # the text above was a parameter


def test_count_follow_counts_distinct_neighbours_in_the_store(read_store):
    load_nb(read_store)
    # c has r2 from b, r3 to d, r6 to a; b and c reach each other over r2 (either way)
    assert read_store.count_follow(["c"], "r3") == 1
    assert read_store.count_follow(["c", "b"], "r2") == 2
    assert read_store.count_follow(["c", "b"], "r2", exclude=["b"]) == 1
    assert read_store.count_follow(["H"], "genre_of") == 20  # past follow's per-node limit
    assert read_store.count_follow(["H", "H"], "genre_of") == 20  # distinct, not per id
    assert read_store.count_follow([], "r3") == 0
    assert read_store.count_follow(["nope"], "r3") == 0
    assert read_store.count_follow(["c"], "r3') MATCH (n) DETACH DELETE n //") == 0
    assert len(nb(read_store, ["a"], hops=1).edges) == 3  # the text above was a parameter


def test_member_values_reads_a_relation_of_each_member(read_store):
    load_nb(read_store)
    # in the triple's own direction: b -r2-> c is b's value, not c's
    assert read_store.member_values(["c", "b"], "r2") == [("b", "c", "Node c")]
    assert read_store.member_values(["c"], "r3") == [("c", "d", "Node d")]
    assert read_store.member_values(["d"], "r3") == []
    assert len(read_store.member_values(["H"], "genre_of")) == 20
    assert read_store.member_values(["nope", "c"], "r9") == []
    assert read_store.member_values(["c"], "r3' OR true //") == []


def test_triples_among_gives_the_hops_in_their_own_direction(read_store):
    load_nb(read_store)
    # c has r2 from b, r3 to d, r6 to a: each edge as stored, whichever id comes first
    got = read_store.triples_among(["d", "c", "b", "a"], ["r2", "r3", "r6"])
    assert [(e.src, e.rel, e.dst) for e in got] == [
        ("b", "r2", "c"), ("c", "r3", "d"), ("c", "r6", "a")]
    assert read_store.triples_among(["c", "d"], ["r2"]) == []  # b is not among the ids
    assert read_store.triples_among(["nope", "c"], ["r3"]) == []
    assert read_store.triples_among(["c", "d"], ["r3') MATCH (n) DETACH DELETE n //"]) == []
    assert len(nb(read_store, ["a"], hops=1).edges) == 3  # the text above was a parameter


def test_neighbourhood_fanout_cap(read_store):
    load_nb(read_store)
    full = nb(read_store, ["H"], hops=1, fanout=50)
    assert len(full.edges) == 21 and not full.truncated
    capped = nb(read_store, ["H"], hops=1, fanout=5)
    assert capped.truncated
    assert len(capped.edges) == 5
    # the choice is by a stable key (neighbour id), not by load order
    assert edge_set(capped) == {("a", "r5", "H")} | {
        ("H", "genre_of", f"leaf{i:02d}") for i in range(4)
    }
    assert_consistent(capped)
    # the cap applies per node and hop: from a, H is reached, then H's edges are capped
    two = nb(read_store, ["a"], hops=2, fanout=5)
    assert two.truncated
    assert sum(1 for e in two.edges if "H" in (e.src, e.dst)) <= 5 + 1
    assert_consistent(two)


def test_neighbourhood_is_deterministic_and_load_order_independent(read_store, embedded_store):
    load_nb(read_store)
    other = embedded_store(8)
    load_nb(other, reverse=True)
    for kwargs in ({"hops": 2, "fanout": 3}, {"hops": 3, "fanout": 2, "max_nodes": 7}):
        a = nb(read_store, ["a", "e"], **kwargs)
        b = nb(read_store, ["e", "a", "e"], **kwargs)
        c = nb(other, ["a", "e"], **kwargs)
        assert a == b == c
        assert a.truncated


def test_neighbourhood_total_caps(read_store):
    load_nb(read_store)
    sg = nb(read_store, ["a"], hops=2, fanout=50, max_nodes=4)
    assert len(sg.nodes) == 4 and sg.truncated
    assert_consistent(sg)
    sg = nb(read_store, ["a"], hops=2, fanout=50, max_edges=3)
    assert len(sg.edges) == 3 and sg.truncated
    assert_consistent(sg)
    exact = nb(read_store, ["b"], hops=1, max_edges=2, max_nodes=3)
    assert len(exact.edges) == 2 and not exact.truncated  # caps reached, nothing cut


def test_neighbourhood_seeds(read_store):
    load_nb(read_store)
    assert nb(read_store, []) == Subgraph()
    assert nb(read_store, ["no-such-id"], hops=2) == Subgraph()
    mixed = nb(read_store, ["no-such-id", "e"], hops=1)
    assert mixed.node_ids() == {"e", "d"}
    multi = nb(read_store, ["a", "e"], hops=1)
    assert {"a", "e", "b", "H", "c", "d"} == multi.node_ids()
    assert_consistent(multi)
    # an isolated entity is its own neighbourhood
    read_store.upsert_entities([("alone", "Alone", one_hot(0))])
    assert nb(read_store, ["alone"]).node_ids() == {"alone"}


# --- stats / clear --------------------------------------------------------------------------


def test_stats_and_clear(graph_store):
    load_people(graph_store)
    st = graph_store.stats()
    assert (st.entities, st.relations, st.triples, st.entities_with_embedding) == (5, 3, 4, 5)
    assert st.store.startswith(graph_store.dialect)
    graph_store.clear()
    assert counts(graph_store) == (0, 0, 0, 0)
    graph_store.ensure_schema(16)  # indexes went with the data: another dimension is fine
    graph_store.upsert_entities([("a", "A", [1.0] + [0.0] * 15)])
    assert graph_store.top_entities([1.0] + [0.0] * 15, 1)[0].entity.id == "a"


# --- embedded store only: the server process and durability ----------------------------


def _store(data_dir: Path, graph: str = "g"):
    from talent_core.store.falkordb import FalkorDBStore

    return FalkorDBStore(data_dir, graph)


def _wait_gone(store, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while store.server.started_here:  # polls (and reaps) our child
        assert time.monotonic() < deadline, "server did not die"
        time.sleep(0.05)


def test_embedded_persists_across_stop_and_restart(tmp_path):
    d = tmp_path / "data"
    s = _store(d)
    assert not (d / "falkordb.sock").exists()  # nothing starts before the first use
    s.ensure_schema(8)
    load_people(s)
    assert s.server.started_here and (d / "falkordb.sock").exists()
    s.stop_server()
    assert not (d / "falkordb.sock").exists() and not (d / "falkordb.pid").exists()
    s2 = _store(d)
    assert counts(s2) == (5, 3, 4, 5)
    assert s2.top_entities(one_hot(1), 1)[0].entity.id == "m.0def"
    assert [e.id for e in s2.search_names("beirut", 3)] == ["m.0jkl"]
    s2.stop_server()


def test_embedded_index_ddl_lives_in_the_aof_base(tmp_path):
    """Index DDL replayed from the incremental AOF is built asynchronously, after the writes
    replayed behind it ran as full scans (minutes for MetaQA): ensure_schema compacts."""
    d = tmp_path / "data"
    s = _store(d)
    s.ensure_schema(8)
    load_people(s)
    incr = b"".join(p.read_bytes() for p in (d / "appendonlydir").glob("*.incr.aof"))
    assert b"MERGE" in incr  # the writes are there...
    assert b"CREATE INDEX" not in incr and b"CREATE VECTOR INDEX" not in incr  # ...DDL is not
    s.stop_server()


def test_embedded_kill9_loses_no_acknowledged_write(tmp_path):
    d = tmp_path / "data"
    s = _store(d)
    s.ensure_schema(8)
    load_people(s)
    s.upsert_entities([(f"k{i}", f"K {i}", fake_vector(i)) for i in range(300)])
    ids = [f"k{i}" for i in range(300)]
    s.upsert_triples([Edge(src=a, rel="next", dst=b) for a, b in itertools.pairwise(ids)])
    pid = s.server.pid
    os.kill(pid, signal.SIGKILL)  # right after the acknowledged writes
    _wait_gone(s)
    assert (d / "falkordb.sock").exists() and (d / "falkordb.pid").exists()  # left stale
    s2 = _store(d)
    assert counts(s2) == (305, 3, 303, 305)
    assert s2.server.pid != pid
    # the first store object reconnects to the new server by itself
    assert counts(s) == (305, 3, 303, 305)
    s2.stop_server()


def test_embedded_start_that_stalls_is_killed_and_started_again(tmp_path, monkeypatch, caplog):
    """A server that hangs at start-up (seen in CI after a kill -9: RDB decoded, then idle)
    is stopped here with SIGSTOP: it neither answers nor uses CPU. The starter kills it and
    starts another; nothing acknowledged before is lost."""
    from talent_core.store import falkordb_server

    d = tmp_path / "data"
    s = _store(d)
    s.ensure_schema(8)
    load_people(s)
    os.kill(s.server.pid, signal.SIGKILL)
    _wait_gone(s)
    real_start, stalled = falkordb_server.EmbeddedServer._start, []

    def start_and_freeze(self, lock_fd):
        real_start(self, lock_fd)
        if not stalled:
            stalled.append(self._proc.pid)
            os.kill(self._proc.pid, signal.SIGSTOP)

    monkeypatch.setattr(falkordb_server.EmbeddedServer, "_start", start_and_freeze)
    s2 = _store(d)
    s2.server.stall_timeout, s2.server.start_timeout = 6.0, 120.0
    with caplog.at_level("WARNING", logger=falkordb_server.__name__):
        assert counts(s2) == (5, 3, 4, 5)
    assert stalled and s2.server.pid != stalled[0]
    assert not psutil_alive(stalled[0])
    assert any("stalled at start-up" in r.getMessage() for r in caplog.records)
    s2.stop_server()


def test_embedded_start_that_always_stalls_is_a_clear_error(tmp_path, monkeypatch):
    from talent_core.errors import EmbeddedServerError
    from talent_core.store import falkordb_server

    real_start, frozen = falkordb_server.EmbeddedServer._start, []

    def start_and_freeze(self, lock_fd):
        real_start(self, lock_fd)
        frozen.append(self._proc.pid)
        os.kill(self._proc.pid, signal.SIGSTOP)

    monkeypatch.setattr(falkordb_server.EmbeddedServer, "_start", start_and_freeze)
    s = _store(tmp_path / "data")
    s.server.stall_timeout, s.server.restarts = 6.0, 1
    with pytest.raises(EmbeddedServerError, match="stalled at start-up 2 times"):
        s.ensure_schema(8)
    assert len(frozen) == 2 and not any(psutil_alive(pid) for pid in frozen)


def psutil_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_embedded_stale_socket_and_pidfile(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(d / "falkordb.sock"))  # a socket file nobody listens on
    sock.close()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (d / "falkordb.pid").write_text(f"{dead.pid}\n")
    s = _store(d)
    s.ensure_schema(8)
    s.upsert_entities([("a", "A", one_hot(0))])
    assert counts(s)[0] == 1
    assert s.server.pid != dead.pid
    s.stop_server()


def test_embedded_long_data_dir_path(tmp_path):
    d = tmp_path / ("long-" * 25) / "data"
    s = _store(d)
    s.ensure_schema(8)
    s.upsert_entities([("a", "A", one_hot(0))])
    assert counts(s)[0] == 1
    assert (d / "falkordb.sock").exists()  # the socket file lives in the data dir anyway
    s.stop_server()


def test_embedded_merge_is_unique_under_concurrent_writers(embedded_store):
    """FalkorDB has no usable unique constraint (see cypher/falkordb/schema.cypher):
    uniqueness rests on MERGE plus the store's write lock, with several writers at once.
    Without the lock this pattern duplicated edges in ~40% of runs; two rounds here."""
    from talent_core.store.falkordb import FalkorDBStore

    ids = [f"n{i}" for i in range(1500)]
    for _ in range(2):
        first = embedded_store(8)
        stores = [FalkorDBStore(first.data_dir, first.graph_name) for _ in range(4)]
        errors: list[BaseException] = []

        def write(store: FalkorDBStore, k: int, errors=errors) -> None:
            try:
                for lo in range(0, len(ids), 100):
                    part = ids[lo : lo + 100]
                    store.upsert_entities([(i, f"{i} by {k}", fake_vector(i)) for i in part])
                    store.upsert_triples(
                        [Edge(src=a, rel="r", dst=b) for a, b in itertools.pairwise(part)]
                    )
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=write, args=(s, k)) for k, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert counts(first) == (1500, 0, 15 * 99, 1500)
        for s in stores:
            s.close()


def test_embedded_start_failure_names_the_log(tmp_path):
    from talent_core.errors import EmbeddedServerError

    d = tmp_path / "data"
    (d / "appendonlydir").mkdir(parents=True)
    (d / "appendonlydir" / "appendonly.aof.manifest").write_text("this is not a manifest\n")
    s = _store(d)
    with pytest.raises(EmbeddedServerError, match="falkordb.log"):
        s.stats()


OTHER_PROCESS = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from talent_core.models import Edge
    from talent_core.store.falkordb import FalkorDBStore
    s = FalkorDBStore(Path(sys.argv[1]), "g")
    s.ensure_schema(8)
    s.upsert_entities([("a", "A", [1.0] + [0.0] * 7), ("b", "B", [0.0, 1.0] + [0.0] * 6)])
    s.upsert_triples([Edge(src="a", rel="r", dst="b")])
    print("ready", s.server.pid, flush=True)
    sys.stdin.readline()  # hold the server until told to exit (then atexit stops it)
    """
)


def test_embedded_server_is_shared_and_restarted_after_its_owner_exits(tmp_path):
    d = tmp_path / "data"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    owner = subprocess.Popen(
        [sys.executable, "-c", OTHER_PROCESS, str(d)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        line = owner.stdout.readline().split()
        assert line and line[0] == "ready", "the other process failed to start the server"
        s = _store(d)
        assert counts(s)[:3] == (2, 0, 1)  # re-used the running server
        assert not s.server.started_here and s.server.pid == int(line[1])
        owner.stdin.write("\n")
        owner.stdin.flush()
        assert owner.wait(60) == 0
        assert not (d / "falkordb.sock").exists()  # the owner shut it down cleanly at exit
        assert counts(s)[:3] == (2, 0, 1)  # ... and our next query restarts it, data intact
        assert s.server.started_here
        s.stop_server()
    finally:
        if owner.poll() is None:
            owner.kill()
