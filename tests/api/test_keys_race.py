"""Issue 44, item 1: changes to the keys file from several processes (and threads) at once
are serialised: every created key is stored and verifies, and a revoked key stays revoked.
Real processes of the KeyStore API, released together by a barrier (each says it is ready
on stdout, then waits for a line on stdin)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from talent_core.api.keys import KeyStore

REPO = Path(__file__).resolve().parents[2]
N = 8
CHILD = """
import json, sys
from pathlib import Path
from talent_core.api.keys import KeyStore
data_dir, op, arg = sys.argv[1:4]
ks = KeyStore(Path(data_dir))
print("ready", flush=True)
sys.stdin.readline()
if op == "create":
    rec, plain = ks.create(arg, "read")
    print(json.dumps({"id": rec.id, "key": plain}), flush=True)
else:
    rec = ks.revoke(arg)
    print(json.dumps({"id": rec.id}), flush=True)
"""


def _race(data_dir: Path, jobs: list[tuple[str, str]]) -> list[dict]:
    """Run each (op, arg) in a process of its own, all released at once; their results."""
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(data_dir), op, arg],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=REPO)
             for op, arg in jobs]  # fmt: skip
    for p in procs:  # the barrier: every child has imported and is waiting
        assert p.stdout.readline().strip() == "ready", p.communicate()[1]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def test_concurrent_creates_are_all_stored(tmp_path):
    data_dir = tmp_path / "data"
    printed = _race(data_dir, [("create", f"c{i}") for i in range(N)])
    ks = KeyStore(data_dir)
    assert sorted(k.name for k in ks.keys()) == sorted(f"c{i}" for i in range(N))
    for p in printed:  # a printed key is a stored key
        assert ks.verify(p["key"]) is not None and ks.verify(p["key"]).id == p["id"]


def test_revokes_racing_creates_lose_nothing_and_revive_nothing(tmp_path):
    data_dir = tmp_path / "data"
    ks = KeyStore(data_dir)
    old = {f"r{i}": ks.create(f"r{i}", "read")[1] for i in range(N)}
    jobs = [("revoke", f"r{i}") for i in range(N)] + [("create", f"c{i}") for i in range(N)]
    printed = _race(data_dir, jobs)
    names = sorted(k.name for k in KeyStore(data_dir).keys())
    assert names == sorted(f"c{i}" for i in range(N))  # 0 lost, 0 revived
    check = KeyStore(data_dir)
    assert all(check.verify(k) is None for k in old.values())
    assert all(check.verify(p["key"]) is not None for p in printed if "key" in p)


def test_concurrent_creates_from_threads_are_all_stored(tmp_path):
    data_dir = tmp_path / "data"
    shared = KeyStore(data_dir)
    barrier = threading.Barrier(2 * N)
    printed: list[str] = []
    errors: list[BaseException] = []

    def create(ks: KeyStore, name: str) -> None:
        barrier.wait()
        try:
            printed.append(ks.create(name, "read")[1])
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=create, args=(shared, f"s{i}")) for i in range(N)]
    threads += [threading.Thread(target=create, args=(KeyStore(data_dir), f"o{i}"))
                for i in range(N)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(KeyStore(data_dir).keys()) == 2 * N
    assert all(shared.verify(k) is not None for k in printed)


def test_the_data_dir_check_survives_files_coming_and_going(tmp_path):
    """`check_data_dir` (run by every `talent keys` command) while another process's
    temporary keys file appears and is renamed away: a vanished entry is no error (it
    raised FileNotFoundError, a traceback, in one bench trial of 20)."""
    import os
    import tempfile
    import time

    from talent_core.store.data_dir import check_data_dir

    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            fd, tmp = tempfile.mkstemp(prefix=".api_keys.", dir=data_dir)
            os.close(fd)
            os.replace(tmp, data_dir / "api_keys.json")

    t = threading.Thread(target=churn)
    t.start()
    try:
        deadline = time.monotonic() + 3
        checks = 0
        while time.monotonic() < deadline:
            check_data_dir(data_dir)
            checks += 1
    finally:
        stop.set()
        t.join()
    assert checks > 100
