"""The sources half of the store contract (issue 33), on every store: the embedded FalkorDB,
the in-memory reference and Neo4j (when NEO4J_URI is set): which source asserts which
triple, and the primitives `talent unload` / `--replace` are made of."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from talent_core.models import Edge, SourceRecord
from talent_core.store.base import SourceStore


def fake_vector(key: str | int, dim: int = 8) -> list[float]:
    """tests/conftest.py's fake_vector (test modules cannot import conftest portably)."""
    v = np.random.default_rng(zlib.crc32(str(key).encode("utf-8"))).standard_normal(dim)
    return (v / np.linalg.norm(v)).tolist()

A = [("a", "r1", "b"), ("b", "r1", "c"), ("c", "r2", "d")]  # source 1
B = [("c", "r2", "d"), ("d", "r3", "e"), ("e", "r3", "f")]  # source 2 (shares c-r2-d)


def _fill(store, triples, source):
    ids = sorted({x for h, _, t in triples for x in (h, t)})
    store.upsert_entities([(i, f"Node {i}", fake_vector(i)) for i in ids])
    store.upsert_relations([(r, fake_vector(r)) for r in sorted({r for _, r, _ in triples})])
    return store.upsert_triples([Edge(src=h, rel=r, dst=t) for h, r, t in triples], source)


def _triples(store):
    """Every (h, rel, t) of the store, through the read half (each entity's neighbourhood)."""
    out = set()
    for s in (1, 2, 3, 0):
        out |= store.source_triples(s)
    return out


def test_every_store_records_sources(read_store):
    assert isinstance(read_store, SourceStore)


def test_assertions_are_counted_and_a_reload_adds_none(read_store):
    assert _fill(read_store, A, 1) == 3
    assert _fill(read_store, A, 1) == 0  # idempotent: nothing new, nothing written
    assert _fill(read_store, B, 2) == 3  # c-r2-d existed: a new assertion all the same
    assert read_store.source_counts() == {1: (3, 2), 2: (3, 2)}
    assert read_store.source_triples(1) == set(A)
    assert read_store.source_triples(2) == set(B)
    assert read_store.stats().triples == 5


def test_unload_primitives_keep_what_another_source_asserts(read_store):
    _fill(read_store, A, 1)
    _fill(read_store, B, 2)
    assert read_store.retract_all(1, batch=1) == (2, 1)  # a-b, b-c go; c-d stays for 2
    assert read_store.retract_all(1, batch=1) == (0, 0)  # idempotent
    assert read_store.sweep_entities(batch=1) == 2  # a, b
    assert read_store.sweep_relations() == 1  # r1
    assert read_store.source_counts() == {2: (3, 3)}
    assert _triples(read_store) == set(B)
    s = read_store.stats()
    assert (s.entities, s.entities_with_embedding, s.relations, s.triples) == (4, 4, 2, 3)
    assert {e.id for e in read_store.entities_by_id(list("abcdef"))} == set("cdef")
    # the vector index no longer offers a deleted entity
    top = read_store.top_entities(fake_vector("a"), 4)
    assert {x.entity.id for x in top} <= set("cdef") and len(top) == 4


def test_retract_given_triples(read_store):
    _fill(read_store, A, 1)
    _fill(read_store, B, 2)
    assert read_store.retract(1, [("c", "r2", "d"), ("a", "r1", "b"), ("x", "r9", "y")]) == (1, 1)
    assert read_store.retract(1, [("c", "r2", "d")]) == (0, 0)
    assert read_store.source_triples(1) == {("b", "r1", "c")}
    assert read_store.source_counts() == {1: (1, 1), 2: (3, 3)}


def test_legacy_triples_have_no_recorded_source(read_store):
    assert _fill(read_store, A, None) == 0  # a legacy write
    _fill(read_store, B[:1] + [("a", "r1", "b")], 2)
    assert read_store.source_counts() == {0: (3, 1), 2: (2, 0)}
    assert read_store.source_triples(0) == set(A)
    assert read_store.retract_all(0, batch=10) == (1, 2)
    assert read_store.source_counts() == {2: (2, 2)}
    assert _triples(read_store) == {("c", "r2", "d"), ("a", "r1", "b")}


@pytest.mark.parametrize("bad", [0, -1, "1", True])
def test_a_source_id_is_a_positive_integer(read_store, bad):
    read_store.upsert_entities([("a", "A", fake_vector("a"))])
    with pytest.raises(ValueError, match="source id"):
        read_store.upsert_triples([Edge(src="a", rel="r", dst="a")], bad)


def test_source_records_round_trip(read_store):
    assert read_store.source_records() == [] and read_store.next_source_id() == 1
    rec = SourceRecord(id=1, name="kb part 1.txt", sha256="ab" * 32, format="metaqa",
                       created="2026-01-01T00:00:00+00:00", state="loading", rows_read=10)
    read_store.put_source(rec)
    read_store.put_source(rec.model_copy(update={"state": "complete", "loaded": 9}))
    read_store.put_source(SourceRecord(id=3, name="ünïcødé \"quoted\"", format="triples"))
    got = read_store.source_records()
    assert [r.id for r in got] == [1, 3] and read_store.next_source_id() == 4
    assert got[0] == rec.model_copy(update={"state": "complete", "loaded": 9})
    assert got[1].name == "ünïcødé \"quoted\""
    read_store.delete_source(1)
    read_store.delete_source(1)
    assert [r.id for r in read_store.source_records()] == [3]


def test_name_collisions(read_store):
    read_store.upsert_entities([("m1", "The Island", fake_vector(1)),
                                ("m2", "the  island", fake_vector(2)),
                                ("m3", "THE ISLAND", fake_vector(3)),
                                ("p1", "Heat", fake_vector(4)), ("p2", "heat", fake_vector(5)),
                                ("u", "Unique", fake_vector(6))])  # fmt: skip
    got = read_store.name_collisions(ids_per_name=2)
    assert [(c.name.lower().split(), c.count) for c in got] == [(["the", "island"], 3),
                                                               (["heat"], 2)]
    assert len(got[0].ids) == 2 and set(got[0].ids) <= {"m1", "m2", "m3"}
    assert set(got[1].ids) == {"p1", "p2"}


def test_retract_reports_the_endpoints_and_the_sweep_checks_only_those(read_store):
    _fill(read_store, A, 1)
    _fill(read_store, B, 2)
    read_store.upsert_entities([("lonely", "Lonely", fake_vector("lonely"))])  # no triple
    touched: set[str] = set()
    assert read_store.retract_all(1, 1, touched) == (2, 1)
    assert touched == {"a", "b", "c"}  # endpoints of a-r1-b and b-r1-c
    assert read_store.sweep_entities(10, among=sorted(touched)) == 2  # a, b; c keeps c-d
    assert {e.id for e in read_store.entities_by_id(["lonely"])} == {"lonely"}
    assert read_store.sweep_entities(10) == 1  # the scan finds it
