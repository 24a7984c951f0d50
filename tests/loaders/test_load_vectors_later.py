"""`talent load --vectors later` then `talent vectors`: the graph written first without its
entity vectors (bulk and MERGE paths), the vectors filled afterwards, gives exactly the
store of a load that embedded as it went; one fill at a time; the CLI as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from loader_helpers import FIXTURES, run_cli
from test_load_bulk import CASES, DIM, assert_same_graph, load, snapshot

from talent_core.errors import StoreBusyError
from talent_core.loaders.vectors import LOCK_NAME, fill_vectors, vectors_left
from talent_core.private_files import locked


@pytest.mark.parametrize("bulk", [True, False], ids=["bulk", "merge"])
@pytest.mark.parametrize(("path", "fmt", "batch"), CASES, ids=[c[1] for c in CASES])
def test_graph_first_then_vectors_is_the_store_of_one_load(embedded_store, tmp_path, path, fmt,
                                                           batch, bulk):
    store = embedded_store(DIM)
    report = load(path, fmt, store, tmp_path, batch_size=batch, bulk=bulk, vectors="later")
    assert report.new_entities_embedded == 0 and (report.bulk_batches > 0) == bulk
    st = store.stats()
    assert st.triples > 0
    assert st.entities_with_embedding == 0 and vectors_left(store) == (st.entities, st.entities)
    assert store.relation_vectors([r for r, in store._read("relation_names")])  # relations now

    filled = fill_vectors(store, HashEmbedder(DIM), tmp_path, page=16)
    assert (filled.embedded, filled.left) == (st.entities, 0)
    reference = embedded_store(DIM)
    load(path, fmt, reference, tmp_path, batch_size=batch, bulk=False)
    assert_same_graph(snapshot(reference), snapshot(store))


def test_one_fill_at_a_time(embedded_store, tmp_path):
    store = embedded_store(DIM)
    load(FIXTURES / "metaqa" / "kb.txt", "metaqa", store, tmp_path, vectors="later")
    with locked(tmp_path, LOCK_NAME, "vector fill", StoreBusyError),  \
            pytest.raises(StoreBusyError, match="vector fill"):
        fill_vectors(store, HashEmbedder(DIM), tmp_path)
    assert store.stats().entities_with_embedding == 0  # the refused fill wrote nothing
    assert fill_vectors(store, HashEmbedder(DIM), tmp_path).left == 0


def test_cli_load_vectors_later_then_vectors(tmp_path: Path):
    r = run_cli(["load", str(FIXTURES / "metaqa" / "kb.txt"), "--vectors", "later"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "`talent vectors` embeds them" in r.stdout
    st = json.loads(run_cli(["stats", "--json"], tmp_path).stdout)
    assert (st["entities"], st["entities_with_embedding"], st["triples"]) == (197, 0, 377)
    v = run_cli(["vectors", "--json"], tmp_path)
    assert v.returncode == 0, v.stderr
    assert json.loads(v.stdout)["embedded"] == 197 and json.loads(v.stdout)["left"] == 0
    st = json.loads(run_cli(["stats", "--json"], tmp_path).stdout)
    assert st["entities_with_embedding"] == 197
    again = run_cli(["vectors"], tmp_path)  # nothing left: says so, loads no model
    assert again.returncode == 0 and "0 entities embedded" in again.stdout
    assert "0 of 197 still without" in again.stdout


def test_a_fill_that_cannot_start_is_said_and_the_load_stands(monkeypatch):
    """`fill_behind` after a vectors-later load: when the fill's process cannot start, one
    line says how many names wait and what to run (no exception: the load it follows has
    succeeded); with nothing left, no line."""
    from types import SimpleNamespace

    import talent_core.loaders.vectors as vectors

    def refuse(settings):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(vectors, "fill_in_background", refuse)
    store = SimpleNamespace(stats=lambda: SimpleNamespace(entities=10, entities_with_embedding=4))
    note = vectors.fill_behind(store, None)
    assert note.startswith(vectors.FILL_NOTE) and "6 of 10 names wait" in note
    assert "Too many open files" in note and "run talent vectors" in note
    done = SimpleNamespace(stats=lambda: SimpleNamespace(entities=10, entities_with_embedding=10))
    assert vectors.fill_behind(done, None) is None
