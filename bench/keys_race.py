"""Issue 44, item 1: `talent keys` changes racing each other, as real processes of the CLI.
Per trial, in a fresh data dir (TALENT_DATA_DIR): (a) 8 `talent keys create` started at
once; (b) 8 keys made, then 8 `talent keys revoke` of them and 8 new creates started at
once. Lost: a create that exited 0 and printed a key that is not stored (or does not
verify); revived: a revoke that exited 0 whose key is still stored (or still verifies);
failed: a process that exited non-zero (its last stderr line kept). The goal: 0 of each.

    python bench/keys_race.py --trials 20 --out bench/results/keys_race.json
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from benchio import write_json_atomic

from talent_core.api.keys import KeyStore

N = 8
FAILED: list[str] = []  # the processes of the running scenario that exited non-zero


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def _race(data_dir: Path, jobs: list[list[str]]) -> list[tuple[list[str], int, str]]:
    """Start every `talent keys ...` of ``jobs`` at once; (args, exit status, stdout). A
    process that fails is recorded in FAILED (its last stderr line)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "TALENT_DATA_DIR": str(data_dir), "PYTHONPATH": path}
    procs = [(args, subprocess.Popen([sys.executable, "-m", "talent_core", "keys", *args],
                                     env=env, cwd=data_dir.parent, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE))
             for args in jobs]  # fmt: skip
    out = []
    for args, p in procs:
        stdout, stderr = p.communicate(timeout=120)
        if p.returncode != 0:
            FAILED.append(f"{' '.join(args)}: exit {p.returncode}: "
                          f"{(stderr.strip().splitlines() or [''])[-1]}")
        out.append((args, p.returncode, stdout))
    return out


def creates(data_dir: Path) -> dict:
    results = _race(data_dir, [["create", "--name", f"c{i}", "--scope", "read"]
                               for i in range(N)])  # fmt: skip
    ks = KeyStore(data_dir)
    stored = {k.name for k in ks.keys()}
    ok = [(a, out.strip().splitlines()[-1]) for a, rc, out in results if rc == 0 and out.strip()]
    lost = sum(1 for a, key in ok if a[2] not in stored or ks.verify(key) is None)
    return {"exit_0": len(ok), "stored": len(stored), "lost": lost}


def revokes_and_creates(data_dir: Path) -> dict:
    ks = KeyStore(data_dir)
    old = {f"r{i}": ks.create(f"r{i}", "read")[1] for i in range(N)}
    jobs = [["revoke", f"r{i}"] for i in range(N)]  # (no --name: older versions run it too)
    jobs += [["create", "--name", f"c{i}", "--scope", "read"] for i in range(N)]
    results = _race(data_dir, jobs)
    check = KeyStore(data_dir)
    stored = {k.name for k in check.keys()}
    revoked = [a[1] for a, rc, _ in results if a[0] == "revoke" and rc == 0]
    made = [(a[2], out.strip().splitlines()[-1]) for a, rc, out in results
            if a[0] == "create" and rc == 0 and out.strip()]  # fmt: skip
    return {"exit_0": len(revoked) + len(made), "stored": len(stored),
            "revived": sum(1 for n in revoked if n in stored or check.verify(old[n])),
            "lost": sum(1 for n, key in made if n not in stored or check.verify(key) is None)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "keys_race.json")
    args = ap.parse_args()
    out: dict = {"processes_per_trial": {"creates": N, "revokes_and_creates": 2 * N},
                 "loadavg_before": loadavg(), "cpus": os.cpu_count()}
    for name, scenario in (("creates", creates), ("revokes_and_creates", revokes_and_creates)):
        trials, t0 = [], time.perf_counter()
        FAILED.clear()
        for i in range(args.trials):
            with tempfile.TemporaryDirectory(prefix="keys-race-") as tmp:
                t = time.perf_counter()
                r = scenario(Path(tmp) / "data")
                r["seconds"] = round(time.perf_counter() - t, 2)
                trials.append(r)
                print(name, i, r, flush=True)
        out[name] = {"trials": len(trials), "lost": sum(t["lost"] for t in trials),
                     "revived": sum(t.get("revived", 0) for t in trials),
                     "failed_processes": len(FAILED), "failures": FAILED[:10],
                     "seconds": round(time.perf_counter() - t0, 1), "loadavg_after": loadavg(),
                     "per_trial": trials}
    out["loadavg_after"] = loadavg()
    write_json_atomic(args.out, out)
    print({k: {x: out[k][x] for x in ("trials", "lost", "revived", "failed_processes",
                                      "seconds")}
           for k in ("creates", "revokes_and_creates")})


if __name__ == "__main__":
    main()
