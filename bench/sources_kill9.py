"""kill -9 during `talent unload` / `talent load --replace` (issue 33), then a rerun.

MetaQA as two overlapping sources (part1 = kb.txt lines 1-80,000, part2 = lines
60,001-133,582, written under --work) is loaded once through the CLI into a template data
dir (TEST-ONLY hash:16 embedder, tests/hash_cli.py; the store code is the product's). A clean
run of each command on a copy gives the reference: `talent unload part1.txt`, and `talent
load part2_v2.txt --replace part2.txt` (part2 with 1,000 triples dropped and 1,000 added).
Then `--runs` runs, each on a fresh copy of the template, alternating the two commands:
start it, SIGKILL at a random time in (15 %, 90 %) of the clean run's duration (runs 0-1,
4-5, 8-9 kill the CLI process, the others the embedded server it started; a command that
ended before its kill time is run again with another time: `not_killed`), wait for both
to be gone,
run the same command again to completion (an unload whose source is already gone exits 1:
"no source"; that run had finished), and compare `talent stats` and `talent sources` with
the reference.

    OMP_NUM_THREADS=1 python bench/sources_kill9.py [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from benchio import write_json_atomic  # noqa: E402
from fault_kill9 import Cli, server_pid, stats, wait_servers_gone  # noqa: E402
from sources_bench import uptime  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "sources_kill9.json"
KB = ROOT.parent / "shared" / "data" / "metaqa" / "kb.txt"


def run(args: list[str], data: Path, timeout: float = 900) -> tuple[int, Cli]:
    c = Cli(args, data)
    return c.wait(timeout), c


def sources(data: Path) -> list:
    rc, c = run(["sources", "--json"], data)
    if rc != 0:
        raise RuntimeError(c.tail())
    return [(s["id"], s["name"], s["state"], s["triples"], s["only"])
            for s in json.loads(c.stdout)["sources"]]


def state(data: Path) -> dict:
    out = {"stats": stats(data, []), "sources": sources(data)}
    wait_servers_gone(data, 120)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--work", type=Path, default=Path("/tmp/b_sources_kill"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    shutil.rmtree(a.work, ignore_errors=True)
    a.work.mkdir(parents=True)
    lines = KB.read_text(encoding="utf-8").splitlines(keepends=True)
    part1, part2, v2 = a.work / "part1.txt", a.work / "part2.txt", a.work / "part2_v2.txt"
    part1.write_text("".join(lines[:80000]), encoding="utf-8")
    p2 = lines[60000:]
    part2.write_text("".join(p2), encoding="utf-8")
    drop = set(rng.sample(range(len(p2)), 1000))
    new = [f"Kill Film {i}|directed_by|{p2[rng.randrange(len(p2))].split('|')[0]}\n"
           for i in range(1000)]
    v2.write_text("".join(x for i, x in enumerate(p2) if i not in drop) + "".join(new),
                  encoding="utf-8")
    template = a.work / "template"
    for p in (part1, part2):
        rc, c = run(["load", str(p), "--format", "metaqa", "--no-progress"], template)
        if rc != 0:
            raise RuntimeError(c.tail())
    wait_servers_gone(template, 120)
    commands = {"unload": ["unload", "part1.txt"],
                "replace": ["load", str(v2), "--format", "metaqa", "--replace", "part2.txt",
                            "--no-progress"]}  # fmt: skip
    out: dict = {"uptime_before": uptime(), "runs": [], "reference": {}}
    for name, cmd in commands.items():
        d = a.work / f"ref-{name}"
        shutil.copytree(template, d)
        t = time.monotonic()
        rc, c = run(cmd, d)
        if rc != 0:
            raise RuntimeError(c.tail())
        out["reference"][name] = {"seconds": round(time.monotonic() - t, 3), **state(d)}
        shutil.rmtree(d)
    i = attempt = 0
    while i < a.runs and attempt < 3 * a.runs:
        attempt += 1
        name = ("unload", "replace")[i % 2]
        target = "cli" if (i // 2) % 2 == 0 else "server"
        d = a.work / f"run-{i}"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(template, d)
        ref = out["reference"][name]
        # a point of the command's own work: after the process start (the reference's
        # first 15 %), before its end (a busy machine makes a run slower or faster)
        at = rng.uniform(0.15, 0.9) * ref["seconds"]
        c = Cli(commands[name], d)
        killed = None
        deadline = time.monotonic() + at
        while time.monotonic() < deadline and c.proc.poll() is None:
            time.sleep(0.01)
        if c.proc.poll() is None:
            pid = c.proc.pid if target == "cli" else server_pid(d)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed = pid
        rc1 = c.wait(900)
        wait_servers_gone(d, 120)
        rc2, c2 = run(commands[name], d)
        got = state(d)
        rec = {"run": i, "attempt": attempt, "command": name, "kill": target,
               "at_s": round(at, 3),
               "killed_pid": killed, "rc_killed": rc1, "rc_rerun": rc2,
               "rerun_tail": c2.tail(300) if rc2 != 0 else "",
               "stats": got["stats"], "sources": got["sources"],
               "match": got == {"stats": ref["stats"], "sources": ref["sources"]}}
        print(json.dumps(rec), flush=True)
        shutil.rmtree(d)
        if killed is None:  # the command ended before the kill: not a kill run, again
            out.setdefault("not_killed", []).append(rec)
            continue
        out["runs"].append(rec)
        i += 1
        write_json_atomic(RESULTS, out)
    out["uptime_after"] = uptime()
    out["all_match"] = all(r["match"] for r in out["runs"])
    write_json_atomic(RESULTS, out)
    shutil.rmtree(template)
    return 0 if out["all_match"] else 1


if __name__ == "__main__":
    sys.exit(main())
