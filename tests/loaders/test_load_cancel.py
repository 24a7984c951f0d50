"""Cancelling a load (`cancel=`, the UI's Cancel button): it stops at a batch boundary, the
batches read before it are committed exactly (store counts match the report), the report
says `cancelled`, the rejects file stays valid JSONL and no side output appears."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from hash_embedder import HashEmbedder
from loader_helpers import FIXTURES, FakeStore

from talent_core.config import Settings
from talent_core.loaders.api import load_path

DIM = 16


def kb(tmp_path: Path, rows: int, bad_every: int = 0) -> Path:
    """A MetaQA kb.txt of `rows` distinct triples over distinct names; with `bad_every`,
    every such line is a row with two fields (rejected in skip mode)."""
    lines = []
    for i in range(rows):
        lines.append(f"head {i}|rel{i % 3}|tail {i}")
        if bad_every and i % bad_every == 0:
            lines.append(f"bad {i}|only two fields")
    path = tmp_path / "kb.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def after(batches: int) -> Callable[[], bool]:
    """A cancel callable that says stop once `batches` batches were read (it is asked
    before each batch)."""
    asked: list[int] = []

    def cancel() -> bool:
        asked.append(1)
        return len(asked) > batches

    return cancel


def load(path: Path, store, tmp_path: Path, **kw):
    return load_path(path, kw.pop("fmt", "metaqa"), store=store, embedder=HashEmbedder(DIM),
                     settings=Settings(data_dir=tmp_path), progress=False, **kw)


def test_cancel_after_the_first_batch_commits_exactly_that_batch(embedded_store, tmp_path):
    """The embedded store's default path (bulk on an empty graph, batches overlapped with
    their preparation): the first batch is in the store, nothing of the rest."""
    store = embedded_store(DIM)
    src = kb(tmp_path, 25)
    rep = load(src, store, tmp_path, batch_size=10, cancel=after(1))
    assert rep.cancelled
    assert (rep.batches, rep.rows_read, rep.loaded, rep.new_triples) == (1, 10, 10, 10)
    s = store.stats()
    assert (s.triples, s.entities, s.entities_with_embedding) == (10, 20, 20)
    got = {e.id for e in store.entities_by_id([f"head {i}" for i in range(25)])}
    assert got == {f"head {i}" for i in range(10)}
    # the committed batches stay: a full reload completes to the file's exact counts
    rep2 = load(src, store, tmp_path, batch_size=10)
    assert not rep2.cancelled and rep2.new_triples == 15
    s = store.stats()
    assert (s.triples, s.entities, s.relations) == (25, 50, 3)


def test_cancel_from_an_event_set_by_on_commit(fake_store: FakeStore, tmp_path):
    """As the UI does it: an Event's `is_set` as `cancel`, set here at the first commit
    (the MERGE path, batches written one after the other)."""
    done = threading.Event()
    rep = load(kb(tmp_path, 30), fake_store, tmp_path, batch_size=10, overlap=False,
               on_commit=lambda p: done.set(), cancel=done.is_set)
    assert rep.cancelled and rep.batches == 1 and rep.loaded == 10
    assert fake_store.triples == {(f"head {i}", f"rel{i % 3}", f"tail {i}") for i in range(10)}


def test_cancelled_skip_load_keeps_a_valid_rejects_file(fake_store: FakeStore, tmp_path):
    rejects = tmp_path / "out" / "rejects.jsonl"
    rep = load(kb(tmp_path, 40, bad_every=5), fake_store, tmp_path, batch_size=10,
               on_error="skip", rejects=rejects, cancel=after(2))
    assert rep.cancelled and rep.loaded == 20 and len(fake_store.triples) == 20
    rows = [json.loads(x) for x in rejects.read_text(encoding="utf-8").splitlines()]
    # the bad rows read before the cancel: those among the first 20 good rows
    assert len(rows) == rep.rejected == 4
    assert all(r["reason"] and r["raw"].startswith("bad ") for r in rows)
    assert not rejects.with_name("rejects.jsonl.tmp").exists()


def test_cancel_before_any_batch_is_no_error_and_writes_nothing(fake_store, tmp_path):
    rep = load(kb(tmp_path, 5), fake_store, tmp_path, cancel=lambda: True)
    assert rep.cancelled and rep.rows_read == 0 and rep.loaded == 0
    assert not fake_store.triples and not fake_store.entities


def test_cancelled_rog_load_leaves_no_side_output(fake_store: FakeStore, tmp_path):
    """A side output (questions) exists only for a complete load."""
    side = tmp_path / "questions" / "toy.jsonl"
    rep = load(FIXTURES / "rog" / "webqsp_toy.jsonl", fake_store, tmp_path, fmt="rog",
               batch_size=20, side_output_path=side, cancel=after(1))
    assert rep.cancelled and rep.batches == 1 and len(fake_store.triples) == rep.loaded > 0
    assert rep.side_output_file is None
    assert not side.exists() and not side.with_name("toy.jsonl.tmp").exists()
