"""Bench: what starting the embedded store costs, and what a user command pays.

On a loaded store (default: the MetaQA store of `TALENT_DATA_DIR`, graph `talent`), `--runs`
times over: stop the server, then time
  * `start_s`: the server's start until it answers (FalkorDB loads its RDB/AOF and rebuilds
    the vector indexes before it answers: that is most of it);
  * `first_query_s`: then one vector top-k query through the store (the index is ready);
and, with the server left running (as it is between user commands: it stays up detached,
TALENT_SERVER_IDLE_TIMEOUT), the wall time of `talent retrieve QUESTION` in a fresh process,
`--runs` times (`command_with_server_up_s`), and once more after a stop
(`command_cold_s`: a user command that pays the start).

    TALENT_DATA_DIR=.talent/metaqa python bench/bench_start.py [--runs 3]

Writes bench/results/store_start.json. Timings are measurements, never assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from benchio import load_average, write_json_atomic

QUESTION = "what movies did [Tom Hanks] star in"


def talent(*args: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "talent_core", *args], check=True,
                   capture_output=True, env=os.environ.copy())  # fmt: skip
    return round(time.perf_counter() - t, 2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--graph", default=None, help="default: TALENT_GRAPH_NAME")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "store_start.json")
    args = ap.parse_args(argv)

    from talent_core.config import Settings
    from talent_core.embedding import get_embedder
    from talent_core.store.falkordb import FalkorDBStore
    from talent_core.store.falkordb_server import EmbeddedServer

    settings = Settings()
    data_dir = Path(settings.data_dir)
    graph = args.graph or settings.graph_name
    vec = get_embedder(settings.embedding_model).encode_one("Tom Hanks")
    server = EmbeddedServer.for_dir(data_dir)
    out: dict = {"data_dir": str(data_dir), "graph": graph, "load_average_before": load_average()}
    starts, firsts = [], []
    for _ in range(args.runs):
        server.shutdown()  # whoever started it: a detached server would make the start free
        t = time.perf_counter()
        server.ensure_running()
        starts.append(round(time.perf_counter() - t, 2))
        store = FalkorDBStore(data_dir, graph)
        t = time.perf_counter()
        store.top_entities(vec, 5)
        firsts.append(round(time.perf_counter() - t, 3))
        out["stats"] = store.stats().model_dump()
        store.close()
    out["start_s"] = starts
    out["first_query_s"] = firsts
    out["start_s_median"] = statistics.median(starts)
    out["command_with_server_up_s"] = [talent("retrieve", QUESTION) for _ in range(args.runs)]
    server.stop()
    out["command_cold_s"] = talent("retrieve", QUESTION)
    out["load_average_after"] = load_average()
    write_json_atomic(args.out, out)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
