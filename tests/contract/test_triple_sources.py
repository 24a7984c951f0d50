"""`SourceStore.triple_sources` under the contract (every store): which sources assert the
triples of an answer's evidence (issue 33: the Ask page says when there are several)."""

from __future__ import annotations

from test_sources_contract import A, B, _fill

from talent_core.models import Edge


def test_triple_sources_names_every_asserting_source(read_store):
    _fill(read_store, A, 1)
    _fill(read_store, B, 2)
    got = read_store.triple_sources([("a", "r1", "b"), ("c", "r2", "d"), ("d", "r3", "e"),
                                     ("d", "r2", "c"), ("zz", "r1", "a")])
    # the shared triple both; a reversed or unknown triple is not one the store holds
    assert got == {("a", "r1", "b"): [1], ("c", "r2", "d"): [1, 2], ("d", "r3", "e"): [2]}
    assert read_store.triple_sources([]) == {}


def test_a_triple_written_without_a_source_is_legacy(read_store):
    read_store.upsert_entities([("x", "X", None), ("y", "Y", None)])
    read_store.upsert_triples([Edge(src="x", rel="r", dst="y")])
    assert read_store.triple_sources([("x", "r", "y")]) == {("x", "r", "y"): [0]}
