"""Bench: a large synthetic load (default 10M triples) into a fresh embedded store, through
`talent load`'s code path (loaders.api.load_path; bulk path, GRAPH.BULK), to see whether
it fits this machine: time, peak RSS (loader + server), disk, and where it breaks if not.

The KG comes from `bench/synthetic_kg.py` (MetaQA format; made if missing). Entity vectors
are the TEST-ONLY hash pseudo-embeddings (384-d, MiniLM's dimension): embedding ~1.7M
synthetic names with MiniLM would take ~50 min on 2 cores at the measured ~600 names/s and
is added separately (`minilm_embed_estimate_s`); the store work is the same either way.
A guard stops the load when the machine's available memory falls under `--min-free-gb`,
or after `--max-minutes`, and records how far it got; `timeline` samples committed triples,
RSS and disk every ~30 s (the rate at which it slows is where a larger load breaks).

    python bench/bench_load_synth.py [--triples 10000000] [--min-free-gb 1.5] [--max-minutes 45]

Writes bench/results/load_synth.json. Timings are measurements, never assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench", ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import psutil
from bench_load import RssSampler
from benchio import load_average, write_json_atomic

from talent_core.config import Settings
from talent_core.loaders.api import load_path
from talent_core.loaders.options import LoadProgress
from talent_core.store.falkordb import FalkorDBStore
from talent_core.store.falkordb_server import EmbeddedServer

NAMES_PER_S_MINILM = 600  # bench/results/load_metaqa_bulk.json, fp32, 2 threads, quiet


def du_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


def _decoded(x):
    """A RESP reply with bytes keys/values as str (maps and flat key-value lists alike)."""
    if isinstance(x, bytes):
        return x.decode()
    if isinstance(x, dict):
        return {_decoded(k): _decoded(v) for k, v in x.items()}
    if isinstance(x, list) and len(x) % 2 == 0 and all(isinstance(k, bytes) for k in x[::2]):
        return {_decoded(k): _decoded(v) for k, v in zip(x[::2], x[1::2], strict=True)}
    return x


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triples", type=int, default=10_000_000)
    ap.add_argument("--kg", type=Path, default=None, help="default: .talent/bench/synth-N")
    ap.add_argument("--work", type=Path, default=ROOT / ".talent" / "bench" / "load-synth")
    ap.add_argument("--min-free-gb", type=float, default=1.5)
    ap.add_argument("--max-minutes", type=float, default=0.0, help="0: no time limit")
    ap.add_argument("--keep", action="store_true", help="keep the loaded store")
    ap.add_argument("--no-restart", action="store_true",
                    help="skip the timed restart after the load (HNSW rebuild: minutes)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "load_synth.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    from hash_embedder import HashEmbedder  # the TEST-ONLY pseudo-embedder

    kg = args.kg or ROOT / ".talent" / "bench" / f"synth-{args.triples}"
    kb = kg / "kb.txt"
    out: dict = {"triples_requested": args.triples, "kb": str(kb),
                 "load_average_before": load_average(),
                 "memory_total_gb": round(psutil.virtual_memory().total / 2**30, 1),
                 "disk_free_gb_before": round(shutil.disk_usage(ROOT).free / 2**30, 1)}
    if not kb.exists():
        import subprocess

        t = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "bench" / "synthetic_kg.py"), "--triples",
                        str(args.triples), "--out", str(kg)], check=True)  # fmt: skip
        out["generate_seconds"] = round(time.perf_counter() - t, 1)
    out["kb_mb"] = round(kb.stat().st_size / 2**20, 1)

    EmbeddedServer.for_dir(args.work).stop()
    shutil.rmtree(args.work, ignore_errors=True)
    settings = Settings(data_dir=args.work, store="embedded")
    store = FalkorDBStore(args.work, "synth")
    embedder = HashEmbedder(384)
    committed = {"triples": 0, "at": 0.0}
    stop = threading.Event()
    broke: dict = {}
    t0 = time.perf_counter()

    timeline: list[dict] = []

    def on_commit(p: LoadProgress) -> None:
        committed.update(triples=p.triples_committed, at=round(time.perf_counter() - t0, 1))
        if stop.is_set():
            raise MemoryError(broke["why"])

    def server_memory() -> dict | None:
        """The server's own view: live allocations (used) vs resident (rss), AOF state."""
        try:
            c = store.server._client(timeout=5.0)
            m, p = c.info("memory"), c.info("persistence")
        except Exception:  # noqa: BLE001 - a sample, not a check
            return None
        with contextlib.suppress(Exception):  # entities so far: memory follows them
            r = c.execute_command("GRAPH.RO_QUERY", "synth", "MATCH (n:Entity) RETURN count(n)")
            m["entities"] = int(r[1][0][0])
        return {"entities": m.get("entities"), "used_mb": round(m["used_memory"] / 2**20),
                "rss_mb": round(m["used_memory_rss"] / 2**20),
                "aof_rewrite": p.get("aof_rewrite_in_progress"),
                "aof_mb": round(p.get("aof_current_size", 0) / 2**20)}  # fmt: skip

    def sample() -> None:
        timeline.append({"s": round(time.perf_counter() - t0), "triples": committed["triples"],
                         "rss_mb": dict(rss.peak) if rss else None,
                         "server_memory": server_memory(),
                         "disk_mb": du_mb(args.work)})  # fmt: skip

    def guard() -> None:
        last = time.perf_counter()
        while not stop.wait(1.0):
            free = psutil.virtual_memory().available / 2**30
            elapsed = time.perf_counter() - t0
            why = None
            if free < args.min_free_gb:
                why = f"available memory {free:.2f} GB < {args.min_free_gb} GB"
            elif args.max_minutes and elapsed > 60 * args.max_minutes:
                why = f"time limit: {args.max_minutes:g} min"
            if time.perf_counter() - last >= 30:
                sample()
                last = time.perf_counter()
            if why:
                broke.update(why=why, triples_committed=committed["triples"],
                             seconds=round(elapsed, 1))  # fmt: skip
                stop.set()

    rss = None
    threading.Thread(target=guard, daemon=True).start()
    try:
        with RssSampler(lambda: store.server.pid) as rss:
            try:
                rep = load_path(kb, "metaqa", store=store, embedder=embedder, settings=settings,
                                bulk=True, progress=True, on_commit=on_commit)  # fmt: skip
                out["report"] = rep.model_dump(mode="json")
            except Exception as e:  # the guard's stop (maybe wrapped by the loader)
                if not broke:
                    raise
                out["broke"] = {**broke, "error": str(e)}
            out["disk_mb_at_stop"] = du_mb(args.work)
        wall = time.perf_counter() - t0
        stop.set()
        sample()
        out["timeline"] = timeline
        with contextlib.suppress(Exception):  # FalkorDB's breakdown of the graph's memory
            c = store.server._client(timeout=120.0)
            out["graph_memory_usage_mb"] = _decoded(
                c.execute_command("GRAPH.MEMORY", "USAGE", "synth"))
        out["wall_seconds"] = round(wall, 1)
        out["peak_rss"] = rss.peak
        if "broke" not in out:
            st = store.stats()
            out["counts"] = st.model_dump()
            t = time.perf_counter()
            store.server.stop()
            out["stop_seconds"] = round(time.perf_counter() - t, 1)
            out["disk_mb"] = du_mb(args.work)
            if not args.no_restart:
                t = time.perf_counter()
                store.server.ensure_running()
                out["restart_seconds"] = round(time.perf_counter() - t, 1)
            ents = st.entities
            out["triples_per_s_excl_embed"] = round(st.triples / wall)
            out["minilm_embed_estimate_s"] = round(ents / NAMES_PER_S_MINILM)
        out["load_average_after"] = load_average()
    finally:
        store.close()
        EmbeddedServer.for_dir(args.work).stop()
        if not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)
    write_json_atomic(args.out, out)
    print({k: v for k, v in out.items() if k != "report"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
