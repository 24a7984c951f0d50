"""The stance task as it ships (no ExplaGraphs adapters: the frozen base model answers) on
100 ExplaGraphs rows kept apart: a seeded sample (seed 31) of the data rows after the first
60 (those went into the issue 8 report). Writes bench/results/explagraphs_frozen.json with
the rows' ids and file lines, so that no training split uses them.

    OMP_NUM_THREADS=1 python bench/explagraphs_frozen.py [--n 100] [--modes full,no-retriever]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import time
from pathlib import Path

from talent_core.evaluation.stance import evaluate_stance
from talent_core.llm.explagraphs import read_explagraphs
from talent_core.pipeline import Pipeline
from talent_core.store.memory import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "explagraphs" / "train_dev_sample.tsv"
OUT = ROOT / "bench" / "results" / "explagraphs_frozen.json"
SEED = 31
SKIP = 60  # the first 60 rows: the issue 8 report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--modes", default="full,no-retriever")
    args = ap.parse_args()
    records = read_explagraphs(DATA)
    picked = sorted(random.Random(SEED).sample(range(SKIP, len(records)), args.n))
    rows = [records[i] for i in picked]
    pipe = Pipeline(store=MemoryStore())
    out: dict = {
        "what": "stance task (talent_core.stance) as shipped: no ExplaGraphs adapters, so the "
                "frozen base model answers (retriever and generator), each row's explanation "
                "graph given as S, ranked over the two labels",
        "command": "OMP_NUM_THREADS=1 python bench/explagraphs_frozen.py",
        "data": str(DATA.relative_to(ROOT.parent)),
        "rows": {"rule": f"random.Random({SEED}).sample(data rows {SKIP + 1}..{len(records)}, "
                         f"{args.n}) (0-based row index >= {SKIP})",
                 "ids": [r.id for r in rows], "sources": [r.source.split(":")[-1] for r in rows]},
        "base_model": pipe.base_model or pipe.settings.base_model,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "uptime_before": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "modes": {},
    }
    try:
        for mode in args.modes.split(","):
            t = time.time()
            summary, per_row = evaluate_stance(pipe, rows, mode)  # type: ignore[arg-type]
            summary["wall_s"] = round(time.time() - t, 1)
            summary["per_row"] = [{k: r[k] for k in ("id", "gold", "label", "scores",
                                                     "evidence", "latency_ms")}
                                  for r in per_row]
            out["modes"][mode] = summary
    finally:
        pipe.close()
    out["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({m: {k: s[k] for k in ("n", "accuracy", "balanced_accuracy",
                                             "majority_baseline", "latency_ms")}
                      for m, s in out["modes"].items()}))


if __name__ == "__main__":
    main()
