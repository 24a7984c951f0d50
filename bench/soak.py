"""Soak: concurrent retrieval clients on the embedded store while a loader writes (issue 15).

A fresh temporary data dir; its embedded FalkorDB server (unix socket only, started by this
process) is preloaded with a synthetic movie KG (`bench/synthetic_kg.py`, written as a TSV of
triples and loaded through `loaders.api.load_path`). Then, for `--seconds`:

* `--clients` threads, each with its own store connection and `Pipeline`, call
  `Pipeline.retrieve` on random questions naming one preloaded entity ([brackets]);
* a loader subprocess (its own process, as `talent load` next to a running UI) loads parts
  of more triples into the same store, one `load_path` per part, until the time is up (the
  part in progress is finished). A fifth of each part repeats preloaded triples (MERGE must
  keep them single).

Embeddings come from the TEST-ONLY hash pseudo-embedder (tests/hash_embedder.py) for loads
and questions alike, so the soak measures the store and the retrieval code, not MiniLM.

Recorded (bench/results/soak.json): requests, errors (messages, first tracebacks), latency
p50/p95/p99/max, questions whose named entity was not among the seeds, the loader's rows
and seconds, the final `stats()` against the exact expected counts (preload ∪ loaded parts),
orphan server processes after the stop, and the load average at start and end. Errors and
count mismatches are reported, never hidden; the exit code is 1 when either occurred.

    python bench/soak.py [--seconds 60 --clients 16 --preload 100000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# tests/ last: its `loaders` test package must not shadow the product's `loaders`
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))
if str(ROOT / "bench") not in sys.path:
    sys.path.append(str(ROOT / "bench"))

from benchio import load_average, write_json_atomic  # noqa: E402

from talent_core.evaluation.latency import percentile as _percentile  # noqa: E402

log = logging.getLogger("bench.soak")
RESULTS = ROOT / "bench" / "results"
GRAPH = "talent"

QUESTION_TEMPLATES = (
    "who directed [{}]",
    "what movies did [{}] star in",
    "what genre is [{}]",
    "which films share actors with [{}]",
    "[{}]",
)


# --- helpers ---------------------------------------------------------------------------------
def write_tsv(path: Path, triples: list[tuple[str, str, str]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.write("head\trelation\ttail\n")
        for h, r, t in triples:
            f.write(f"{h}\t{r}\t{t}\n")


def expected_counts(triples: set[tuple[str, str, str]]) -> dict[str, int]:
    entities = {h for h, _, _ in triples} | {t for _, _, t in triples}
    return {
        "entities": len(entities),
        "entities_with_embedding": len(entities),
        "relations": len({r for _, r, _ in triples}),
        "triples": len(triples),
    }


def percentile(ms: list[float], q: float) -> float | None:
    """`talent_core.evaluation.latency.percentile` (the reports' definition), 2 places."""
    p = _percentile(ms, q)
    return None if p is None else round(p, 2)


def server_processes(data_dir: Path) -> list[dict]:
    """redis-server processes serving `data_dir` (their command line names it)."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "name", "cmdline", "status"]):
        cmd = p.info.get("cmdline") or []
        if any(str(data_dir) in c for c in cmd) and "redis-server" in " ".join(cmd[:1]):
            if p.info.get("status") != psutil.STATUS_ZOMBIE:
                found.append({"pid": p.info["pid"], "cmdline": " ".join(cmd)[:200]})
    return found


# --- the loader subprocess -------------------------------------------------------------------
def loader_worker(args: argparse.Namespace) -> int:
    """`soak.py --loader-worker`: load the part files in order until the deadline; one JSON
    line per finished part on stdout."""
    from hash_embedder import HashEmbedder

    from talent_core.config import Settings
    from talent_core.loaders.api import load_path
    from talent_core.store.falkordb import FalkorDBStore

    settings = Settings(data_dir=args.data_dir, graph_name=GRAPH, store="embedded")
    store = FalkorDBStore(Path(args.data_dir), GRAPH)
    embedder = HashEmbedder(args.dim)
    t0 = time.perf_counter()
    try:
        # when every part is loaded before the deadline, start again from the first: the
        # re-loads are MERGEs of existing triples (idempotent writes, still under the lock)
        cycle = 0
        while time.time() < args.deadline and args.parts:
            for part in args.parts:
                if time.time() >= args.deadline:
                    break
                t = time.perf_counter()
                rep = load_path(part, "triples", store=store, embedder=embedder,
                                settings=settings, progress=False)  # fmt: skip
                print(json.dumps({"part": part, "cycle": cycle, "rows_read": rep.rows_read,
                                  "loaded": rep.loaded, "new_triples": rep.new_triples,
                                  "rejected": rep.rejected,
                                  "seconds": round(time.perf_counter() - t, 3)}),
                      flush=True)  # fmt: skip
            cycle += 1
    finally:
        store.close()
    print(json.dumps({"done": True, "seconds": round(time.perf_counter() - t0, 3)}), flush=True)
    return 0


# --- the clients -----------------------------------------------------------------------------
class Client(threading.Thread):
    def __init__(self, idx: int, data_dir: Path, dim: int, names: list[str], deadline: float,
                 stats: ClientStats, seed: int):  # fmt: skip
        super().__init__(name=f"client-{idx}", daemon=True)
        self.idx, self.data_dir, self.dim, self.names = idx, data_dir, dim, names
        self.deadline, self.stats, self.rng = deadline, stats, random.Random(seed)

    def run(self) -> None:
        from hash_embedder import HashEmbedder

        from talent_core.config import Settings
        from talent_core.pipeline import Pipeline
        from talent_core.store.falkordb import FalkorDBStore

        try:
            settings = Settings(data_dir=self.data_dir, graph_name=GRAPH, adapters="none")
            store = FalkorDBStore(self.data_dir, GRAPH)
            pipe = Pipeline(settings=settings, store=store, embedder=HashEmbedder(self.dim),
                            adapters="none")  # fmt: skip
        except Exception as e:  # noqa: BLE001 - a setup failure is an error to report
            self.stats.error(e)
            return
        try:
            while time.monotonic() < self.deadline:
                name = self.rng.choice(self.names)
                q = self.rng.choice(QUESTION_TEMPLATES).format(name)
                t = time.perf_counter()
                try:
                    c = pipe.retrieve(q)
                except Exception as e:  # noqa: BLE001 - every failure is counted
                    self.stats.error(e)
                    continue
                ms = (time.perf_counter() - t) * 1000
                self.stats.ok(ms, seed_found=any(s.name == name for s in c.seeds),
                              empty=not c.nodes)  # fmt: skip
        finally:
            pipe.close()


class ClientStats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.errors: Counter[str] = Counter()
        self.tracebacks: list[str] = []
        self.seed_missing = 0
        self.empty = 0

    def ok(self, ms: float, seed_found: bool, empty: bool) -> None:
        with self.lock:
            self.latencies.append(ms)
            self.seed_missing += not seed_found
            self.empty += empty

    def error(self, e: BaseException) -> None:
        msg = f"{type(e).__name__}: {e}"[:500]
        with self.lock:
            self.errors[msg] += 1
            if len(self.tracebacks) < 5:
                self.tracebacks.append(traceback.format_exc()[-3000:])

    @property
    def requests(self) -> int:
        with self.lock:
            return len(self.latencies) + sum(self.errors.values())


# --- main ------------------------------------------------------------------------------------
def soak(args: argparse.Namespace) -> dict:
    from hash_embedder import HashEmbedder
    from synthetic_kg import generate
    from tqdm import tqdm

    from talent_core.config import Settings
    from talent_core.loaders.api import load_path
    from talent_core.store.falkordb import FalkorDBStore
    from talent_core.store.falkordb_server import EmbeddedServer

    load_start = load_average()
    log.info("load average at start: %s", load_start.get("uptime"))
    work = Path(tempfile.mkdtemp(prefix="talent-soak-", dir=args.tmp))
    data_dir = work / "d"
    result: dict = {
        "bench": "soak",
        "issue": 15,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "params": {
            k: str(v) if isinstance(v, Path) else v
            for k, v in vars(args).items()
            if k not in ("loader_worker", "data_dir", "deadline", "parts")
        },
        "embedder": f"hash:{args.dim} (TEST-ONLY pseudo-embedder, tests/hash_embedder.py)",
        "store": "embedded FalkorDB, unix socket in a fresh temporary data dir",
        "load_average_start": load_start,
    }
    try:
        rng = random.Random(args.seed)
        total = args.preload + args.load_triples
        log.info("generating a synthetic KG of %d triples", total)
        triples = generate(total, args.seed)
        preload, extra = triples[: args.preload], triples[args.preload :]
        parts: list[Path] = []
        part_sets: list[set] = []
        new_per_part = max(1, int(args.part_triples * 0.8))
        for i, start in enumerate(range(0, len(extra), new_per_part)):
            rows = extra[start : start + new_per_part]
            rows += rng.sample(preload, min(len(preload), args.part_triples - len(rows)))
            rng.shuffle(rows)
            p = work / f"part{i:03d}.tsv"
            write_tsv(p, rows)
            parts.append(p)
            part_sets.append(set(rows))
        pre_path = work / "preload.tsv"
        write_tsv(pre_path, preload)

        # --- preload (this process starts and owns the server) -------------------------------
        settings = Settings(data_dir=data_dir, graph_name=GRAPH, store="embedded")
        store = FalkorDBStore(data_dir, GRAPH)
        t = time.perf_counter()
        rep = load_path(pre_path, "triples", store=store, embedder=HashEmbedder(args.dim),
                        settings=settings, progress=sys.stderr.isatty())  # fmt: skip
        pre_stats = store.stats()
        result["preload"] = {
            "triples_in_file": len(preload),
            "loaded": rep.loaded,
            "seconds": round(time.perf_counter() - t, 2),
            "stats": pre_stats.model_dump(exclude={"store"}),
            "expected": expected_counts(set(preload)),
        }
        log.info("preloaded %d triples in %.1f s: %s", rep.loaded, time.perf_counter() - t,
                 pre_stats)  # fmt: skip
        server = EmbeddedServer.for_dir(data_dir)
        result["server_pid"] = server.pid
        names = sorted({h for h, _, _ in preload} | {t for _, _, t in preload})

        # --- soak ------------------------------------------------------------------------------
        cstats = ClientStats()
        t0 = time.monotonic()
        deadline = t0 + args.seconds
        loader = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--loader-worker",
             "--data-dir", str(data_dir), "--dim", str(args.dim),
             "--deadline", str(time.time() + args.seconds), "--parts", *map(str, parts)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )  # fmt: skip
        loader_t0 = time.perf_counter()
        loader_err: list[str] = []
        threading.Thread(target=lambda: loader_err.extend(loader.stderr), daemon=True).start()
        clients = [Client(i, data_dir, args.dim, names, deadline, cstats, args.seed * 1000 + i)
                   for i in range(args.clients)]  # fmt: skip
        for c in clients:
            c.start()
        next_log = t0 + 10
        with tqdm(total=args.seconds, unit="s", disable=not sys.stderr.isatty(),
                  desc="soak") as bar:  # fmt: skip
            while (now := time.monotonic()) < deadline:
                time.sleep(min(1.0, max(0.0, deadline - now)))
                bar.n = min(args.seconds, round(time.monotonic() - t0))
                bar.set_postfix(requests=cstats.requests, errors=sum(cstats.errors.values()))
                if not sys.stderr.isatty() and time.monotonic() >= next_log:
                    next_log += 10
                    log.info("%.0f s: %d requests, %d errors", time.monotonic() - t0,
                             cstats.requests, sum(cstats.errors.values()))  # fmt: skip
        for c in clients:
            c.join(timeout=300)
        wall = time.monotonic() - t0
        hung = [c.name for c in clients if c.is_alive()]
        out, _ = loader.communicate(timeout=900)
        loader_s = time.perf_counter() - loader_t0
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        done = [d for d in lines if "part" in d]
        finished = [d for d in lines if d.get("done")]
        loaded_sets = [part_sets[parts.index(Path(d["part"]))] for d in done]

        # --- final counts ----------------------------------------------------------------------
        final = store.stats()
        want = expected_counts(set(preload).union(*loaded_sets))
        got = final.model_dump(exclude={"store"})
        lat = sorted(cstats.latencies)
        n_err = sum(cstats.errors.values())
        result.update(
            {
                "seconds": args.seconds,
                "wall_seconds": round(wall, 2),
                "clients": args.clients,
                "requests": cstats.requests,
                "ok": len(lat),
                "errors": n_err,
                "error_messages": dict(cstats.errors),
                "error_tracebacks": cstats.tracebacks,
                "hung_clients": hung,
                "throughput_rps": round(len(lat) / wall, 2) if wall else None,
                "latency_ms": {
                    "p50": percentile(lat, 50),
                    "p95": percentile(lat, 95),
                    "p99": percentile(lat, 99),
                    "max": round(lat[-1], 2) if lat else None,
                    "mean": round(sum(lat) / len(lat), 2) if lat else None,
                },
                "named_entity_not_in_seeds": cstats.seed_missing,
                "empty_candidates": cstats.empty,
                "loader": {
                    "process": "subprocess (bench/soak.py --loader-worker, loaders.api.load_path)",
                    "returncode": loader.returncode,
                    "parts_loaded": len(done),
                    "distinct_parts_loaded": len({d["part"] for d in done}),
                    "parts_available": len(parts),
                    "cycles_started": max((d["cycle"] for d in done), default=-1) + 1,
                    "rows_read": sum(d["rows_read"] for d in done),
                    "triples_sent": sum(d["loaded"] for d in done),
                    "new_triples": sum(d["new_triples"] or 0 for d in done),
                    "rejected": sum(d["rejected"] for d in done),
                    # from its start to its last finished part (the part running at the
                    # deadline is finished); wall_seconds: until this process saw it exit
                    "seconds": finished[0]["seconds"] if finished else None,
                    "wall_seconds": round(loader_s, 2),
                    "load_seconds": round(sum(d["seconds"] for d in done), 2),
                    "rows_per_s": round(
                        sum(d["rows_read"] for d in done) / sum(d["seconds"] for d in done), 1
                    )
                    if done
                    else None,
                    "stderr_tail": "".join(loader_err)[-2000:] if loader.returncode else "",
                },
                "final_stats": got,
                "expected_stats": want,
                "counts_exact": got == want,
            }
        )
        store.close()
        server.stop()
        time.sleep(0.5)
        result["orphan_servers_after_stop"] = server_processes(data_dir)
        result["load_average_end"] = load_average()
        result["passed"] = (n_err == 0 and got == want and not hung and loader.returncode == 0
                            and not result["orphan_servers_after_stop"])  # fmt: skip
        return result
    finally:
        with contextlib.suppress(Exception):
            EmbeddedServer.for_dir(data_dir).stop()
        if args.keep:
            log.info("kept %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--preload", type=int, default=100_000, help="triples loaded before")
    ap.add_argument("--load-triples", type=int, default=400_000,
                    help="new triples available to the loader during the soak")  # fmt: skip
    ap.add_argument("--part-triples", type=int, default=10_000,
                    help="rows per loader part (4/5 new triples, 1/5 preloaded ones)")  # fmt: skip
    ap.add_argument("--dim", type=int, default=32, help="hash embedder dimension")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp", type=Path, default=None, help="parent of the temporary data dir")
    ap.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    ap.add_argument("--out", type=Path, default=RESULTS / "soak.json")
    # internal: the loader subprocess
    ap.add_argument("--loader-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--parts", nargs="*", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.loader_worker:
        return loader_worker(args)
    if args.clients < 1 or args.seconds <= 0:
        ap.error("--clients and --seconds must be positive")
    res = soak(args)
    write_json_atomic(args.out, res)
    log.info("requests %d, errors %d, p50 %s ms, p95 %s ms, max %s ms; counts exact: %s "
             "(%s vs expected %s); wrote %s", res["requests"], res["errors"],
             res["latency_ms"]["p50"], res["latency_ms"]["p95"], res["latency_ms"]["max"],
             res["counts_exact"], res["final_stats"], res["expected_stats"], args.out)  # fmt: skip
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
