"""Bounded versions of the issue-15 soak and kill -9 benches (bench/soak.py,
bench/fault_kill9.py), run as subprocesses on small synthetic KGs in temporary data dirs:

* soak: 4 retrieval clients for 8 s while a loader writes: 0 errors, exact final counts,
  no server left after the stop;
* faults: kill -9 of the loader, then of the server, mid-load; after a re-run the counts
  equal a clean load's, and no server or watchdog is left behind.

The full measurements (16 clients x 60 s; 20 runs x 100k triples) are the benches'
defaults; their results live in bench/results/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(script: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("TALENT_")}
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_soak_small(tmp_path):
    out = tmp_path / "soak.json"
    r = _run("soak.py", ["--seconds", "8", "--clients", "4", "--preload", "10000",
                         "--load-triples", "20000", "--part-triples", "5000",
                         "--tmp", str(tmp_path), "--out", str(out)], timeout=300)  # fmt: skip
    assert out.is_file(), r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["errors"] == 0, res["error_messages"]
    assert res["ok"] > 0
    assert res["loader"]["returncode"] == 0 and res["loader"]["parts_loaded"] > 0
    assert res["final_stats"] == res["expected_stats"]
    assert res["orphan_servers_after_stop"] == []
    assert r.returncode == 0, r.stderr[-3000:]


def test_kill9_loader_and_server_small(tmp_path):
    out = tmp_path / "fault.json"
    r = _run("fault_kill9.py", ["--runs", "2", "--triples", "20000", "--batch-size", "2000",
                                "--tmp", str(tmp_path), "--out", str(out)],
             timeout=600)  # fmt: skip
    assert out.is_file(), r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["reference"]["equal"], res["reference"]
    assert [x["killed"] for x in res["runs"]] == ["loader", "server"]
    for run in res["runs"]:
        assert run["match"], run
        assert run["orphans"] == [], run
        assert run["server_gone_after_s"] is not None, run
    assert r.returncode == 0, r.stderr[-3000:]
