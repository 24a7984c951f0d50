"""Fault runs: kill -9 of the loader or of the embedded server mid-load, then a re-run (issue 15).

A synthetic movie KG (`bench/synthetic_kg.py`) of `--triples` triples is written once as a
TSV of triples. A clean load into a fresh data dir gives the reference counts (checked
against the counts computed from the file). Then `--runs` runs, each in a fresh data dir:

1. start the loader: `talent load FILE --format triples` (the loaders' CLI, run through
   tests/hash_cli.py so that TALENT_EMBEDDING_MODEL=hash:16 selects the TEST-ONLY hash
   pseudo-embedder; the store code is the product's);
2. at a random time in (2 %, 90 %) of the clean load's duration, SIGKILL either the loader
   process (even runs) or the embedded redis-server it started (odd runs; when the server has
   not started yet at that time, it is killed as soon as its pidfile appears);
3. wait for the loader to exit (a loader whose server was killed restarts it and retries,
   or fails) and for the server to be gone (after a killed loader, its watchdog stops it);
   `talent stats` (counts after the kill);
4. re-run the same load to completion, `talent stats` again, compare with the reference;
5. look for orphans: a redis-server whose command line names the run's data dir, or a
   watchdog whose owner was one of the run's processes, still alive 30 s after the last
   command ended (recorded, then terminated).

Writes bench/results/fault_kill9.json atomically after every run; exit code 1 unless every
run matched the reference with no orphan.

    python bench/fault_kill9.py [--runs 20 --triples 100000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "bench") not in sys.path:
    sys.path.append(str(ROOT / "bench"))

import psutil
from benchio import load_average, write_json_atomic  # noqa: E402

log = logging.getLogger("bench.fault_kill9")
RESULTS = ROOT / "bench" / "results"
CLI = [sys.executable, str(ROOT / "tests" / "hash_cli.py"), "talent_core"]
COMMITTED = re.compile(r"committed batch (\d+): (\d+) triples \(cumulative\)")
KEYS = ("entities", "entities_with_embedding", "relations", "triples")
ORPHAN_GRACE_S = 30.0
SERVER_GONE_TIMEOUT_S = 90.0  # the watchdog's SIGTERM grace is 60 s, then SIGKILL


def env_for(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALENT_")}
    env.update(
        TALENT_DATA_DIR=str(data_dir),
        TALENT_STORE="embedded",
        TALENT_EMBEDDING_MODEL="hash:16",
        # the owner mode: the server ends with the loader that started it (a kill -9
        # included), which is what the orphan check holds it to; the detached default
        # (stopped after an idle timeout) is tested in tests/e2e/test_server_cli.py
        TALENT_SERVER_IDLE_TIMEOUT="0",
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        OMP_NUM_THREADS="1",
    )
    return env


class Cli:
    """One CLI subprocess; stderr is read as it comes (committed-batch lines)."""

    def __init__(self, args: list[str], data_dir: Path):
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [*CLI, *args], cwd=ROOT, env=env_for(data_dir), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.stderr: list[str] = []
        self.stdout = ""
        self.committed: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._read_err, daemon=True),
                         threading.Thread(target=self._read_out, daemon=True)]  # fmt: skip
        for t in self._threads:
            t.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.stderr.append(line)
                if m := COMMITTED.search(line):
                    self.committed.append((int(m.group(1)), int(m.group(2))))

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()

    def wait(self, timeout: float) -> int:
        rc = self.proc.wait(timeout)
        for t in self._threads:
            t.join(5)
        return rc

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.t0

    def reported(self) -> tuple[int, int]:
        with self._lock:
            return self.committed[-1] if self.committed else (0, 0)

    def tail(self, n: int = 2500) -> str:
        with self._lock:
            return "".join(self.stderr)[-n:]


def load_args(kg: Path, batch_size: int | None) -> list[str]:
    args = ["load", str(kg), "--format", "triples", "--json", "--no-progress"]
    return args + (["--batch-size", str(batch_size)] if batch_size else [])


def stats(data_dir: Path, spawned: list[int]) -> dict:
    c = Cli(["stats", "--json"], data_dir)
    spawned.append(c.proc.pid)
    rc = c.wait(600)
    if rc != 0:
        raise RuntimeError(f"talent stats failed (rc {rc}):\n{c.tail()}")
    d = json.loads(c.stdout)
    return {k: d[k] for k in KEYS}


def server_processes(data_dir: Path) -> list[psutil.Process]:
    """Live redis-server processes of `data_dir`: the server runs IN its data dir (its
    socket may live in a runtime dir elsewhere, so the command line need not name it)."""
    out = []
    needle = str(data_dir)
    for p in psutil.process_iter(["pid", "cmdline", "status", "cwd"]):
        cmd = p.info.get("cmdline") or []
        if not cmd or "redis-server" not in cmd[0]:
            continue
        cwd = (p.info.get("cwd") or "").removesuffix(" (deleted)")
        if (cwd == needle or any(needle in c for c in cmd)) and \
                p.info.get("status") != psutil.STATUS_ZOMBIE:
            out.append(p)
    return out


def watchdogs_of(owners: set[int]) -> list[psutil.Process]:
    """Live watchdog processes (`_watchdog.py OWNER SERVER`) whose owner is in `owners`."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        cmd = p.info.get("cmdline") or []
        if len(cmd) >= 3 and cmd[-3].endswith("_watchdog.py"):
            with contextlib.suppress(ValueError):
                if int(cmd[-2]) in owners and p.info.get("status") != psutil.STATUS_ZOMBIE:
                    out.append(p)
    return out


def wait_servers_gone(data_dir: Path, timeout: float) -> float | None:
    """Seconds until no server of `data_dir` lives; None if one still does at `timeout`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not server_processes(data_dir):
            return round(time.monotonic() - t0, 3)
        time.sleep(0.05)
    return None


def orphans(data_dir: Path, owners: set[int]) -> list[dict]:
    """Servers / watchdogs of this run still alive after the grace period; then ended
    (by pid: they are this bench's)."""
    deadline = time.monotonic() + ORPHAN_GRACE_S
    while time.monotonic() < deadline:
        left = server_processes(data_dir) + watchdogs_of(owners)
        if not left:
            return []
        time.sleep(0.1)
    found = []
    for p in server_processes(data_dir) + watchdogs_of(owners):
        with contextlib.suppress(psutil.Error):
            found.append({"pid": p.pid, "cmdline": " ".join(p.cmdline())[:300]})
            p.terminate()
            try:
                p.wait(10)
            except psutil.TimeoutExpired:
                p.kill()
    return found


def server_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "falkordb.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def one_run(i: int, target: str, kg: Path, work: Path, reference: dict, t_ref: float,
            rng: random.Random, args: argparse.Namespace) -> dict:  # fmt: skip
    data_dir = work / f"run{i:02d}"
    spawned: list[int] = []
    t_run = time.monotonic()
    kill_at = rng.uniform(0.02, 0.90) * t_ref
    rec: dict = {"run": i, "killed": target, "kill_drawn_at_s": round(kill_at, 3)}
    loader = Cli(load_args(kg, args.batch_size), data_dir)
    spawned.append(loader.proc.pid)
    landed = True
    while loader.seconds < kill_at and loader.proc.poll() is None:
        time.sleep(0.005)
    if target == "loader":
        if loader.proc.poll() is None:
            loader.proc.send_signal(signal.SIGKILL)
            rec["killed_pid"] = loader.proc.pid
        else:
            landed = False
    else:
        pid = None
        while loader.proc.poll() is None and (pid := server_pid(data_dir)) is None:
            time.sleep(0.005)
        rec["server_started_before_drawn_time"] = loader.seconds <= kill_at + 0.01
        if pid is not None and loader.proc.poll() is None:
            try:
                os.kill(pid, signal.SIGKILL)
                rec["killed_pid"] = pid
            except ProcessLookupError:
                landed = False
        else:
            landed = False
    rec["killed_at_s"] = round(loader.seconds, 3)
    rec["kill_landed"] = landed  # False: the loader had finished (or the server had gone)
    rec["reported_committed_at_kill"] = dict(zip(("batch", "triples"), loader.reported(),
                                                 strict=True))  # fmt: skip
    rc = loader.wait(900)
    rec["loader_rc"] = rc
    rec["loader_seconds"] = round(loader.seconds, 3)
    rec["loader_reported_committed"] = loader.reported()[1]
    if target == "server" or rc not in (0, -signal.SIGKILL):
        rec["loader_stderr_tail"] = loader.tail(1500) if rc != 0 else ""
        with contextlib.suppress(json.JSONDecodeError):
            if rc == 0:
                rec["loader_new_triples"] = json.loads(loader.stdout).get("new_triples")
    rec["server_gone_after_s"] = wait_servers_gone(data_dir, SERVER_GONE_TIMEOUT_S)
    if rec["server_gone_after_s"] is None:
        rec["server_left_running_after_kill"] = [p.pid for p in server_processes(data_dir)]
    rec["counts_after_kill"] = stats(data_dir, spawned)
    rerun = Cli(load_args(kg, args.batch_size), data_dir)
    spawned.append(rerun.proc.pid)
    rec["rerun_rc"] = rerun.wait(900)
    rec["rerun_seconds"] = round(rerun.seconds, 3)
    if rec["rerun_rc"] != 0:
        rec["rerun_stderr_tail"] = rerun.tail()
    else:
        with contextlib.suppress(json.JSONDecodeError):
            rec["rerun_new_triples"] = json.loads(rerun.stdout).get("new_triples")
    rec["counts_final"] = stats(data_dir, spawned)
    rec["match"] = rec["counts_final"] == reference and rec["rerun_rc"] == 0
    rec["orphans"] = orphans(data_dir, set(spawned))
    rec["run_seconds"] = round(time.monotonic() - t_run, 2)
    if not args.keep:
        shutil.rmtree(data_dir, ignore_errors=True)
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--triples", type=int, default=100_000)
    ap.add_argument("--batch-size", type=int, default=None,
                    help="rows per write batch (default: TALENT_BATCH_SIZE, 5000)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp", type=Path, default=None, help="parent of the temporary dirs")
    ap.add_argument("--keep", action="store_true", help="keep the temporary data dirs")
    ap.add_argument("--out", type=Path, default=RESULTS / "fault_kill9.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from synthetic_kg import generate
    from tqdm import tqdm

    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="talent-fault-", dir=args.tmp))
    result: dict = {
        "bench": "fault_kill9",
        "issue": 15,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "loader_command": "python tests/hash_cli.py talent_core "
        + " ".join(load_args(Path("KG.tsv"), args.batch_size))
        + "  (= talent load, hash:16 embedder)",
        "load_average_start": load_average(),
    }
    try:
        kg = work / "kg.tsv"
        triples = generate(args.triples, args.seed)
        with kg.open("w", encoding="utf-8") as f:
            f.write("head\trelation\ttail\n")
            for h, r, t in triples:
                f.write(f"{h}\t{r}\t{t}\n")
        ents = {h for h, _, _ in triples} | {t for _, _, t in triples}
        expected = {
            "entities": len(ents),
            "entities_with_embedding": len(ents),
            "relations": len({r for _, r, _ in triples}),
            "triples": len(set(triples)),
        }
        # --- clean reference load ---------------------------------------------------------------
        ref_dir = work / "reference"
        spawned: list[int] = []
        ref = Cli(load_args(kg, args.batch_size), ref_dir)
        spawned.append(ref.proc.pid)
        rc = ref.wait(1800)
        t_ref = ref.seconds
        if rc != 0:
            raise RuntimeError(f"the clean load failed (rc {rc}):\n{ref.tail()}")
        reference = stats(ref_dir, spawned)
        result["reference"] = {
            "seconds": round(t_ref, 2), "counts": reference, "expected_from_file": expected,
            "equal": reference == expected, "orphans": orphans(ref_dir, set(spawned)),
        }  # fmt: skip
        log.info("clean load: %.1f s, %s (expected from the file: %s)", t_ref, reference,
                 expected)  # fmt: skip
        shutil.rmtree(ref_dir, ignore_errors=True)
        runs: list[dict] = []
        result["runs"] = runs
        for i in tqdm(range(args.runs), desc="fault runs", disable=not sys.stderr.isatty()):
            target = "loader" if i % 2 == 0 else "server"
            rec = one_run(i, target, kg, work, reference, t_ref, rng, args)
            runs.append(rec)
            log.info("run %d: kill -9 %s at %.2f s (%d triples reported committed), loader rc "
                     "%s; after kill %s; final %s; match %s; orphans %d; %.1f s", i, target,
                     rec["killed_at_s"], rec["reported_committed_at_kill"]["triples"],
                     rec["loader_rc"], rec["counts_after_kill"]["triples"],
                     rec["counts_final"], rec["match"], len(rec["orphans"]),
                     rec["run_seconds"])  # fmt: skip
            result["summary"] = summarise(runs, reference, expected)
            write_json_atomic(args.out, result)
    finally:
        result["load_average_end"] = load_average()
        if "runs" in result:
            result["summary"] = summarise(
                result["runs"],
                result["reference"]["counts"],
                result["reference"]["expected_from_file"],
            )
        write_json_atomic(args.out, result)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    s = result["summary"]
    log.info(
        "%d runs, %d matched the clean load, %d orphans, %d kills landed mid-load; wrote %s",
        s["runs"],
        s["matches"],
        s["orphans"],
        s["kills_landed"],
        args.out,
    )
    return 0 if s["passed"] else 1


def summarise(runs: list[dict], reference: dict, expected: dict) -> dict:
    by = {t: [r for r in runs if r["killed"] == t] for t in ("loader", "server")}
    return {
        "runs": len(runs),
        "matches": sum(r["match"] for r in runs),
        "orphans": sum(len(r["orphans"]) for r in runs),
        "kills_landed": sum(r["kill_landed"] for r in runs),
        "killed_mid_load": sum(
            r["counts_after_kill"]["triples"] < reference["triples"] for r in runs
        ),  # fmt: skip
        "by_target": {
            t: {
                "runs": len(rs),
                "matches": sum(r["match"] for r in rs),
                "loader_rc": sorted({r["loader_rc"] for r in rs}),
            }
            for t, rs in by.items()
        },  # fmt: skip
        "servers_left_after_kill": sum(r["server_gone_after_s"] is None for r in runs),
        "reference_equals_file": reference == expected,
        "passed": bool(runs)
        and reference == expected
        and all(r["match"] and not r["orphans"] for r in runs),  # fmt: skip
    }


if __name__ == "__main__":
    sys.exit(main())
