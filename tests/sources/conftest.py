"""Fixtures of the sources tests: `cli`, `talent` in this process on a graph of the session's
embedded server holding two sources."""

from __future__ import annotations

import pytest
from hash_embedder import HashEmbedder
from test_sources import TRIPLES, load, write_kb
from typer.testing import CliRunner

from talent_core.commands import app
from talent_core.config import get_settings

DIM = 16


@pytest.fixture
def cli(embedded_store, tmp_path, monkeypatch):
    """`talent ARGS` (a CliRunner result) in this process, on a graph holding part1.txt
    (TRIPLES[:80]) and part2.txt (TRIPLES[60:]); the store is `cli.store`."""
    store = embedded_store(DIM)
    for name, rows in (("part1.txt", TRIPLES[:80]), ("part2.txt", TRIPLES[60:])):
        load(write_kb(tmp_path / name, rows), store, tmp_path)
    for key, value in (("DATA_DIR", str(store.data_dir)), ("GRAPH_NAME", store.graph_name),
                       ("STORE", "embedded"), ("EMBEDDING_MODEL", f"hash:{DIM}")):
        monkeypatch.setenv(f"TALENT_{key}", value)
    monkeypatch.setattr("talent_core.loaders.embedders.make_embedder",
                        lambda *a, **k: HashEmbedder(DIM))
    get_settings.cache_clear()

    def run(args: list[str]):
        return CliRunner().invoke(app, args)

    run.store = store
    yield run
    get_settings.cache_clear()


@pytest.fixture
def page_store(tmp_path, monkeypatch):
    """(data dir, store): a fresh embedded store of its own, the settings pointing at it,
    for the Load page's AppTests; stopped afterwards."""
    from talent_core.store.falkordb import FalkorDBStore
    from talent_core.store.falkordb_server import EmbeddedServer

    data = tmp_path / "store"
    monkeypatch.setenv("TALENT_DATA_DIR", str(data))
    monkeypatch.setenv("TALENT_STORE", "embedded")
    get_settings.cache_clear()
    store = FalkorDBStore(data, get_settings().graph_name)
    try:
        store.ensure_schema(DIM)
        yield data, store
    finally:
        store.close()
        EmbeddedServer.for_dir(data).stop()
        get_settings.cache_clear()
