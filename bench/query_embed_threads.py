"""Bench: the numpy query embedder's BLAS threads, on an idle machine and beside busy ones.

One question pair per retrieval (the question and its relation text, one forward pass;
`retrieval.relations.encode_question`) for N MetaQA 3-hop dev questions, with the BLAS
thread count fixed at 1, fixed at 2, or chosen per call by `embedding_numpy.free_cores`
(the product's default), while 0, 1 or 2 CPU-bound processes run beside it. Each
measurement runs in a fresh subprocess. Writes bench/results/query_embed_threads.json.

    python bench/query_embed_threads.py [--n 300]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import subprocess
import sys
import time
from pathlib import Path

from benchio import load_average, write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[3])
import talent_core.embedding_numpy as en
from talent_core.embedding import get_embedder
from talent_core.evaluation.latency import percentile
from talent_core.retrieval.relations import encode_question
mode, n = sys.argv[1], int(sys.argv[2])
if mode != "adaptive":
    en.free_cores = lambda: int(mode)
emb = get_embedder(backend="numpy")
qa = open(sys.argv[4], encoding="utf-8").read().splitlines()[:n]
qs = [line.split("\t")[0].replace("[", "").replace("]", "") for line in qa]
rel = [" ".join(q.split()[:-2]) or q for q in qs]  # a shorter second text, as a stripped one
for q, r in list(zip(qs, rel))[:10]:
    encode_question(emb, q, r)
ms = []
for q, r in zip(qs, rel):
    t = time.perf_counter()
    encode_question(emb, q, r)
    ms.append((time.perf_counter() - t) * 1000)
print(json.dumps({"p50": round(percentile(ms, 50), 2),
                  "p95": round(percentile(ms, 95), 2), "n": len(ms)}))
"""


def _spin(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=RESULTS / "query_embed_threads.json")
    args = ap.parse_args()
    qa = args.data / "metaqa" / "3-hop" / "qa_dev.txt"
    if not qa.is_file():
        raise SystemExit(f"{qa}: not found; pass --data")
    out: dict = {"questions": args.n, "load_average_before": load_average(), "runs": []}
    for busy in (0, 1, 2):
        stop = mp.Event()
        procs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(busy)]
        for p in procs:
            p.start()
        time.sleep(1.0)
        try:
            for mode in ("1", "2", "adaptive"):
                r = subprocess.run(
                    [sys.executable, "-c", CHILD, mode, str(args.n), str(ROOT), str(qa)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                row = {"busy_processes": busy, "blas_threads": mode,
                       **json.loads(r.stdout.strip().splitlines()[-1])}  # fmt: skip
                out["runs"].append(row)
                print(json.dumps(row), flush=True)
        finally:
            stop.set()
            for p in procs:
                p.join()
    out["load_average_after"] = load_average()
    write_json_atomic(args.out, out)


if __name__ == "__main__":
    main()
