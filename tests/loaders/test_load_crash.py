"""Crash safety of loads into the embedded store (subprocesses, SIGKILL):

* kill -9 of the loader mid-way, then a re-run to completion, gives exactly the counts of an
  uninterrupted load;
* kill -9 of the embedded redis-server mid-load loses nothing the loader reported committed,
  and a re-run completes to the same counts.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
from loader_helpers import CLI, REPO, cli_env, run_cli

COMMITTED = re.compile(r"committed batch (\d+): (\d+) triples \(cumulative\), through (.+):(\d+)$")
BATCH = 200


@pytest.fixture(scope="module")
def kg(tmp_path_factory) -> Path:
    """A MetaQA-shaped KG of 12,000 distinct triples (60 batches of 200)."""
    p = tmp_path_factory.mktemp("kg") / "kb.txt"
    rels = ["directed_by", "starred_actors", "release_year", "has_genre", "written_by"]
    with open(p, "w", encoding="utf-8") as f:
        for i in range(12_000):
            movie = f"Movie {i // 5}"
            rel = rels[i % 5]
            tail = f"{rel.split('_')[0].title()} {(i * 7919) % 4000}"
            f.write(f"{movie}|{rel}|{tail}\n")
    return p


def stats(data_dir: Path) -> dict:
    r = run_cli(["stats", "--json"], data_dir)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    return {k: d[k] for k in ("entities", "relations", "triples", "entities_with_embedding")}


@contextlib.contextmanager
def running_server(data_dir: Path):
    """Keep the data dir's server up across the CLI runs of a test (as a UI would), so
    each run does not restart it by replaying the AOF."""
    from talent_core.store.falkordb_server import EmbeddedServer

    server = EmbeddedServer.for_dir(data_dir)
    server.ensure_running()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reference(kg: Path, tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("ref")
    with running_server(d):
        r = run_cli(["load", str(kg), "-f", "metaqa", "--batch-size", str(BATCH)], d)
        assert r.returncode == 0, r.stderr
        s = stats(d)
    assert s["triples"] == 12_000
    return s


class Loader:
    """A loader subprocess whose committed-batch lines are collected as they arrive."""

    def __init__(self, kg: Path, data_dir: Path):
        self.proc = subprocess.Popen(
            [*CLI, "load", str(kg), "-f", "metaqa",
             "--batch-size", str(BATCH)],
            cwd=REPO, env=cli_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.committed: list[tuple[int, int]] = []  # (batch, cumulative triples)
        self.lines: list[str] = []
        self._cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            m = COMMITTED.search(line.rstrip("\n"))
            with self._cv:
                self.lines.append(line)
                if m:
                    self.committed.append((int(m.group(1)), int(m.group(2))))
                self._cv.notify_all()

    def wait_for_batch(self, n: int, timeout: float = 120) -> None:
        with self._cv:
            ok = self._cv.wait_for(
                lambda: any(b >= n for b, _ in self.committed) or self.proc.poll() is not None,
                timeout,
            )
        assert ok and any(b >= n for b, _ in self.committed), "".join(self.lines[-20:])

    def reported(self) -> int:
        with self._cv:
            return max((c for _, c in self.committed), default=0)


def server_pid(data_dir: Path) -> int:
    return int((data_dir / "falkordb.pid").read_text().strip())


def wait_dead(pid: int, timeout: float = 10) -> None:
    """Until `pid` is gone or a zombie (its parent, a stopped loader, cannot reap it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} still alive")


def stop_server(data_dir: Path) -> None:
    """Stop a server left running (a killed loader's orphan)."""
    try:
        pid = server_pid(data_dir)
        os.kill(pid, signal.SIGTERM)
        wait_dead(pid)
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass


def test_kill_loader_then_rerun_gives_the_uninterrupted_counts(kg, reference, tmp_path):
    with running_server(tmp_path):
        _kill_loader_then_rerun(kg, reference, tmp_path)


def _kill_loader_then_rerun(kg: Path, reference: dict, tmp_path: Path) -> None:
    loader = Loader(kg, tmp_path)
    try:
        loader.wait_for_batch(5)
        loader.proc.send_signal(signal.SIGKILL)
        loader.proc.wait(30)
        reported = loader.reported()
        assert loader.proc.returncode == -signal.SIGKILL
        mid = stats(tmp_path)
        assert reported <= mid["triples"] < 12_000, "the kill did not land mid-way"
        r = run_cli(["load", str(kg), "-f", "metaqa", "--batch-size", str(BATCH)], tmp_path)
        assert r.returncode == 0, r.stderr
        assert stats(tmp_path) == reference
    finally:
        if loader.proc.poll() is None:
            loader.proc.kill()


def test_kill_store_mid_load_loses_nothing_committed(kg, reference, tmp_path):
    from talent_core.store.falkordb import FalkorDBStore
    from talent_core.store.falkordb_server import EmbeddedServer

    loader = Loader(kg, tmp_path)  # it starts the server of tmp_path: its child
    server = EmbeddedServer.for_dir(tmp_path)
    try:
        loader.wait_for_batch(5)
        # freeze the loader so that it cannot restart the server itself, kill the server
        loader.proc.send_signal(signal.SIGSTOP)
        pid = server_pid(tmp_path)
        os.kill(pid, signal.SIGKILL)
        wait_dead(pid)
        time.sleep(0.3)  # let the reader thread drain what the loader printed before
        reported = loader.reported()
        assert reported >= 5 * BATCH
        # restart the store from its files (this process now runs the server): every
        # triple reported committed is there
        store = FalkorDBStore(tmp_path, "talent")
        s = store.stats()
        assert s.triples >= reported
        assert s.triples < 12_000, "the kill did not land mid-way"
        store.close()
        # the loader resumes against the restarted server (it retries its write) ...
        loader.proc.send_signal(signal.SIGCONT)
        loader.proc.wait(120)
        # ... and whatever it did, a re-run completes to the uninterrupted counts
        r = run_cli(["load", str(kg), "-f", "metaqa", "--batch-size", str(BATCH)], tmp_path)
        assert r.returncode == 0, r.stderr
        assert stats(tmp_path) == reference
    finally:
        if loader.proc.poll() is None:
            loader.proc.send_signal(signal.SIGCONT)
            loader.proc.kill()
        server.stop()
        stop_server(tmp_path)
