"""Bench: FalkorDB HNSW parameters (M, efConstruction, efRuntime) against store start time
and vector self-retrieval, on a copy of a loaded embedded store.

FalkorDB does not persist its HNSW indexes: every server start rebuilds them from the
stored vectors, synchronously, before the server answers. So the entity vector index's
build cost IS the store's start time (MetaQA: ~95 % of it), and the same cost is paid per
bulk-load batch. For each setting, on a throwaway copy of the store's AOF: re-create the
entity vector index with it, compact, restart the server `--starts` times (start seconds,
and the index construction seconds from the server log), then query the index with the
STORED vectors of `--sample` random entities (top 10: is the entity itself there?) and time
those queries. The setting the product ships is in cypher/falkordb/schema.cypher.

    python bench/hnsw_params_probe.py [--data-dir .talent/metaqa] [--graph talent]

Writes bench/results/hnsw_params.json. Timings are measurements, never assertions.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np
from benchio import load_average, write_json_atomic

SETTINGS = [(16, 64, 100), (16, 32, 200), (12, 40, 100), (12, 32, 200), (12, 28, 200),
            (10, 28, 200), (8, 32, 200), (16, 24, 100)]  # fmt: skip
QUERY = ("CALL db.idx.vector.queryNodes('Entity', 'embedding', 10, vecf32($v)) "
         "YIELD node RETURN node.id")  # fmt: skip
_TS = re.compile(r"(\d\d):(\d\d):(\d\d\.\d+)")


def _seconds(line: str) -> float:
    h, m, s = _TS.search(line).groups()
    return int(h) * 3600 + int(m) * 60 + float(s)


def index_build_seconds(log: Path) -> float | None:
    """Seconds between the last 'Constructing indexes' and 'Done decoding graph' lines."""
    lines = log.read_text(errors="replace").splitlines()
    a = [x for x in lines if "Constructing indexes" in x]
    b = [x for x in lines if "Done decoding graph" in x]
    return round(_seconds(b[-1]) - _seconds(a[-1]), 2) if a and b else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=ROOT / ".talent" / "metaqa")
    ap.add_argument("--graph", default="talent")
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--starts", type=int, default=2)
    ap.add_argument("--settings", nargs="*", default=None, metavar="M,EFC,EFR",
                    help="settings to try (default: the sweep in this file)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "hnsw_params.json")
    args = ap.parse_args(argv)

    import falkordb

    from talent_core.store.falkordb_server import EmbeddedServer

    aof = args.data_dir / "appendonlydir"
    if not aof.is_dir():
        raise SystemExit(f"{aof}: no loaded embedded store there (pass --data-dir)")
    work = Path(tempfile.mkdtemp(prefix="talent-hnsw-"))
    out: dict = {"store": str(args.data_dir), "graph": args.graph, "sample": args.sample,
                 "load_average_before": load_average(), "settings": {}}  # fmt: skip
    srv = EmbeddedServer(work / "d", start_timeout=1200)
    try:
        (work / "d").mkdir(mode=0o700)
        shutil.copytree(aof, work / "d" / "appendonlydir")
        srv.idle_timeout = 0  # owner mode: this process stops it
        srv.ensure_running()

        def graph():
            return falkordb.FalkorDB(unix_socket_path=str(srv.socket_path)).select_graph(
                args.graph
            )

        g = graph()
        rows = g.query("MATCH (e:Entity) WHERE e.embedding IS NOT NULL "
                       "RETURN e.id, e.embedding").result_set  # fmt: skip
        rng = np.random.default_rng(0)
        pick = [rows[i] for i in rng.choice(len(rows), min(args.sample, len(rows)), replace=False)]
        out["entities_with_vectors"] = len(rows)
        dim = len(rows[0][1])
        todo = [tuple(map(int, x.split(","))) for x in args.settings] if args.settings else SETTINGS
        for m, efc, efr in todo:
            g.query("DROP VECTOR INDEX FOR (e:Entity) ON (e.embedding)")
            g.query(f"CREATE VECTOR INDEX FOR (e:Entity) ON (e.embedding) OPTIONS {{dimension: "
                    f"{dim}, similarityFunction: 'cosine', M: {m}, efConstruction: {efc}, "
                    f"efRuntime: {efr}}}")  # fmt: skip
            deadline = time.monotonic() + 1200
            while True:  # the index answers once it is built
                try:
                    g.query(QUERY, {"v": pick[0][1]})
                    break
                except Exception as e:  # noqa: BLE001 - "index is not operational yet"
                    if time.monotonic() > deadline:
                        raise SystemExit(f"the vector index never answered: {e}") from None
                    time.sleep(0.5)
            srv.rewrite_aof()
            starts, builds = [], []
            for _ in range(args.starts):
                srv.stop()
                t = time.perf_counter()
                srv.ensure_running()
                starts.append(round(time.perf_counter() - t, 2))
                builds.append(index_build_seconds(work / "d" / "falkordb.log"))
            g = graph()
            hit, t = 0, time.perf_counter()
            for eid, vec in pick:
                hit += any(r[0] == eid for r in g.query(QUERY, {"v": vec}).result_set)
            ms = (time.perf_counter() - t) / len(pick) * 1000
            key = f"M{m}_efc{efc}_efr{efr}"
            out["settings"][key] = {
                "M": m, "efConstruction": efc, "efRuntime": efr,
                "start_s": starts, "start_s_median": round(statistics.median(starts), 2),
                "index_build_s": builds, "self_hit_at_10": round(hit / len(pick), 4),
                "query_ms_mean": round(ms, 2),
            }  # fmt: skip
            print(key, out["settings"][key], flush=True)
    finally:
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    out["load_average_after"] = load_average()
    write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
