"""Issue 44 (9): a `talent unload` killed with SIGKILL at any point is finished by the next
command that opens the store, before that command reads: `talent sources` lists the store
as a finished unload leaves it and `talent retrieve` never returns an entity the unload
left without a triple. A killed `--replace` whose file is gone keeps its source
`replacing` (said on stderr) with its loose entities swept; run again, it finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from hash_embedder import HashEmbedder
from test_sources import TRIPLES, graph, load, write_kb

from talent_core.config import Settings
from talent_core.loaders.sources import list_sources

DIM = 16
REPO = Path(__file__).resolve().parents[2]
CLI = Path(__file__).resolve().parent / "kill_cli.py"


@pytest.fixture
def parts(tmp_path):
    return (write_kb(tmp_path / "part1.txt", TRIPLES[:80]),
            write_kb(tmp_path / "part2.txt", TRIPLES[60:]))  # fmt: skip


def _env(store, stop: str | None = None) -> dict[str, str]:
    env = dict(os.environ, TALENT_DATA_DIR=str(store.data_dir), TALENT_STORE="embedded",
               TALENT_GRAPH_NAME=store.graph_name, TALENT_EMBEDDING_MODEL=f"hash:{DIM}",
               TALENT_BATCH_SIZE="25", TALENT_PLANNER="none",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if stop is not None:
        env["TALENT_TEST_STOP_AT"] = stop
    return env


def talent(store, args: list[str]) -> subprocess.CompletedProcess:
    """A command on the test's graph (the session's embedded server keeps running)."""
    return subprocess.run([sys.executable, str(CLI), "talent_core",
                           *args], cwd=REPO, env=_env(store), capture_output=True, text=True,
                          timeout=180, check=False)  # fmt: skip


def killed_at(store, stop: str, args: list[str]) -> None:
    """Run `talent ARGS`, stopped just before the write `stop` (kill_cli.py), then kill -9."""
    proc = subprocess.Popen([sys.executable, str(CLI), "talent_core", *args], cwd=REPO,
                            env=_env(store, stop), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED:
            assert proc.poll() is None, f"ended before {stop}: {proc.stderr.read()}"
            assert time.monotonic() < deadline, f"never reached {stop}"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


# the writes of `talent unload part1.txt --batch-size 25` a kill lands before (the state
# mark is the first): the command run next, that must finish the unload first
POINTS = [("retract_only:1", "sources"), ("retract_only:2", "retrieve"),
          ("retract_shared:1", "sources"), ("sweep_entities_among:1", "retrieve"),
          ("schema:1", "retrieve"), ("source_delete:1", "sources")]  # fmt: skip


def test_a_killed_unload_is_finished_by_the_next_command(embedded_store, tmp_path, parts):
    reference = embedded_store(DIM)
    load(parts[1], reference, tmp_path)
    want = graph(reference)
    live = set(want["entities"])
    for stop, command in POINTS:
        store = embedded_store(DIM)
        load(parts[0], store, tmp_path)
        load(parts[1], store, tmp_path)
        killed_at(store, stop, ["unload", "part1.txt", "--batch-size", "25"])
        mid = list_sources(store)
        assert [(s.name, s.state) for s in mid.sources] == [
            ("part1.txt", "unloading"), ("part2.txt", "complete")], stop
        if command == "sources":
            r = talent(store, ["sources", "--json"])
            assert r.returncode == 0, (stop, r.stderr)
            got = json.loads(r.stdout)
            assert [s["name"] for s in got["sources"]] == ["part2.txt"], stop
            assert {k: got["totals"][k] for k in want["stats"]} == want["stats"], stop
        else:  # a read: nothing the unload removes may come back, seeds included
            r = talent(store, ["retrieve", "what did [film 5] and film 3 star", "--json"])
            assert r.returncode == 0, (stop, r.stderr)
            got = json.loads(r.stdout)
            seen = {s["id"] for s in got["seeds"]} | {n["id"] for n in got["nodes"]}
            assert seen and seen <= live, (stop, sorted(seen - live))
        assert graph(store) == want, stop


def test_a_killed_replace_without_its_file_stays_visible_and_is_swept(
        embedded_store, tmp_path, parts):
    store = embedded_store(DIM)
    load(parts[0], store, tmp_path)
    load(parts[1], store, tmp_path)
    new = TRIPLES[70:110] + [("film new", "directed_by", f"person new {i}") for i in range(5)]
    v2 = write_kb(tmp_path / "part2-v2.txt", new)
    args = ["load", str(v2), "--format", "metaqa", "--replace", "part2.txt", "--batch-size",
            "25", "--no-progress"]  # fmt: skip
    killed_at(store, "retract_triples_shared:1", args)  # its own triples gone, not swept
    v2.unlink()
    r = talent(store, ["sources", "--json"])
    assert r.returncode == 0, r.stderr
    assert "replace did not finish" in r.stderr and "--replace 2" in r.stderr
    got = json.loads(r.stdout)
    assert [(s["name"], s["state"]) for s in got["sources"]] == [
        ("part1.txt", "complete"), ("part2.txt", "replacing")]
    now = graph(store)
    ends = {x for h, _, t in now["triples"] for x in (h, t)}
    assert set(now["entities"]) == ends  # no entity left without a triple
    assert {f"film {i}" for i in range(110, 120)}.isdisjoint(ends)
    table = talent(store, ["sources"])
    assert "note: source 2 ('part2.txt') is `replacing`" in table.stdout, table.stdout
    write_kb(v2, new)  # the file back: the same command finishes the replace
    r = talent(store, args)
    assert r.returncode == 0, r.stderr
    fresh = embedded_store(DIM)
    load(parts[0], fresh, tmp_path)
    load(v2, fresh, tmp_path, source="part2.txt")
    assert graph(store) == graph(fresh)


def test_nothing_pending_costs_one_read(embedded_store, tmp_path, parts, monkeypatch):
    from talent_core.loaders.sources import resume_interrupted

    store = embedded_store(DIM)
    load(parts[0], store, tmp_path)
    run = type(store)._run
    seen: list[bool] = []

    def counting(self, text, params=None, write=False):
        seen.append(write)
        return run(self, text, params, write)

    monkeypatch.setattr(type(store), "_run", counting)
    assert resume_interrupted(store, Settings(data_dir=tmp_path)) == []
    assert seen == [False]


def test_a_replace_killed_inside_its_index_rebuild_gets_its_indexes_back(
        embedded_store, tmp_path, parts):
    """A `replacing` source whose run was killed between the drop of the vector indexes and
    their rebuild: the next command rebuilds them (vector seeds work again)."""
    from talent_core.loaders.sources import resume_interrupted
    from talent_core.store.cypher import statements

    store = embedded_store(DIM)
    load(parts[0], store, tmp_path)
    rec = store.source_records()[0]
    store.put_source(rec.model_copy(update={"state": "replacing"}))
    store._run(statements("drop_vector_index", store.dialect)[0], write=True)
    assert store.vector_indexes_missing()
    assert resume_interrupted(store, Settings(data_dir=tmp_path)) == []
    assert not store.vector_indexes_missing()
    assert store.source_records()[0].state == "replacing"
    got = store.top_entities(HashEmbedder(DIM).encode_one("film 3"), 3)
    assert got[0].entity.id == "film 3"


def test_an_index_still_rebuilding_after_a_drop_counts_as_missing(embedded_store):
    """FalkorDB rebuilds a label's index asynchronously after one of its fields is dropped,
    and lists the dropped vector field until it is done: on a few thousand entities the
    check waits for that rebuild instead of reading the old field as present."""
    import numpy as np

    from talent_core.store.cypher import statements

    store = embedded_store(DIM)
    rng = np.random.default_rng(0)
    store.upsert_entities([(f"e{i}", f"entity {i}", rng.standard_normal(DIM).astype(np.float32))
                           for i in range(5000)])
    store._run(statements("drop_vector_index", store.dialect)[0], write=True)
    assert store.vector_indexes_missing()
    store.rebuild_vector_indexes()
    assert not store.vector_indexes_missing()
