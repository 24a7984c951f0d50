"""GET /v1/sources (read scope) and DELETE /v1/sources/{id} or ?name=NAME (write scope) on an
embedded store holding two sources (issue 33; by id: issue 44)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hash_embedder import HashEmbedder

from talent_core.config import Settings
from talent_core.loaders.api import load_path


class _Pipe:
    """The part of a Pipeline the sources endpoints use."""

    def __init__(self, store):
        self.store = store

    def close(self) -> None:
        pass


@pytest.fixture
def served(embedded_store, tmp_path: Path):
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app
    from talent_core.api.keys import KeyStore

    store = embedded_store(16)
    settings = Settings(data_dir=tmp_path)
    for name, rows in (("one.txt", ["A|r|B", "B|r|C"]), ("two.txt", ["B|r|C", "C|s|D"])):
        (tmp_path / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
        load_path(tmp_path / name, "metaqa", store=store, embedder=HashEmbedder(16),
                  settings=settings, progress=False)  # fmt: skip
    keys = KeyStore(tmp_path)
    read, write = (keys.create(f"t-{s}", s)[1] for s in ("read", "write"))
    with TestClient(create_app(settings, pipeline_factory=lambda: _Pipe(store))) as c:
        c.store = store
        yield c, {"Authorization": f"Bearer {read}"}, {"Authorization": f"Bearer {write}"}


def test_list_and_delete_sources(served):
    c, read, write = served
    assert c.get("/v1/sources").status_code == 401
    got = c.get("/v1/sources", headers=read).json()
    assert [(s["name"], s["triples"], s["only"]) for s in got["sources"]] == [
        ("one.txt", 2, 1), ("two.txt", 2, 1)]
    assert got["totals"]["triples"] == 3
    assert c.delete("/v1/sources/1", headers=read).status_code == 403
    r = c.delete("/v1/sources/1", headers=write)
    assert r.status_code == 200, r.text
    change = r.json()
    assert change["source"] == "one.txt"
    assert (change["removed"], change["triples_deleted"], change["entities_deleted"]) == (2, 1, 1)
    got = c.get("/v1/sources", headers=read).json()
    assert [s["name"] for s in got["sources"]] == ["two.txt"]
    r = c.delete("/v1/sources/1", headers=write)
    assert r.status_code == 404 and "no source with id 1" in r.json()["error"]["message"]
    r = c.delete("/v1/sources/one.txt", headers=write)  # a name in the path (older clients)
    assert r.status_code == 404 and "no source 'one.txt'" in r.json()["error"]["message"]


def test_any_name_is_removed_by_id_or_by_name(served):
    """A name holding `/`, or one that is a number (stored before names were checked), is
    removed by its id; `?name=` takes any name."""
    from talent_core.models import SourceRecord

    c, read, write = served
    for rec in (SourceRecord(id=3, name="kg/v1 (old)"), SourceRecord(id=4, name="2"),
                SourceRecord(id=5, name="a/b")):
        c.store.put_source(rec)
    r = c.delete("/v1/sources/2", headers=write)  # the id 2, not the source named "2"
    assert r.status_code == 200 and r.json()["source"] == "two.txt", r.text
    r = c.delete("/v1/sources/3", headers=write)
    assert r.status_code == 200 and r.json()["source"] == "kg/v1 (old)", r.text
    r = c.delete("/v1/sources", params={"name": "a/b"}, headers=write)
    assert r.status_code == 200 and r.json()["source_id"] == 5, r.text
    assert c.delete("/v1/sources", params={"name": "a/b"}, headers=read).status_code == 403
    got = c.get("/v1/sources", headers=read).json()
    assert [(s["id"], s["name"]) for s in got["sources"]] == [(1, "one.txt"), (4, "2")]


def test_unload_on_a_full_disk_is_507(served, monkeypatch):
    import errno

    from talent_core.store.cypher_store import CypherStore

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "no space left on device", "/data/appendonlydir")

    c, _, write = served
    monkeypatch.setattr(CypherStore, "sweep_entities", full)
    r = c.delete("/v1/sources/1", headers=write)
    assert r.status_code == 507, r.text
    assert r.json()["error"]["message"].startswith("/data/appendonlydir: no space left")
