"""Planner probe (issue 29; no language model): how often the top planned path reaches a
gold answer, and the ends it has, for the planners `talent ask` can use, on the product's
anchors (retrieval as `talent eval`: a record's topic entities are given).

    TALENT_DATA_DIR=.talent/b/webqsp python bench/webqsp_plan_probe.py \\
        .talent/b/webqsp/questions/webqsp-evidence-dev.jsonl --format rog \\
        --planner bundled --planner zero-shot --out bench/results/webqsp_plan_probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from talent_core.evaluation.datasets import read_items
from talent_core.evaluation.metrics import name_set
from talent_core.pipeline import Pipeline


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--format", default="rog")
    ap.add_argument("--planner", action="append", required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    items = read_items([a.questions], a.format)[: a.limit]
    out: dict = {"questions": len(items), "file": str(a.questions), "runs": {}}
    for spec in a.planner:
        pipe = Pipeline(planner=spec)
        hits, sizes, kinds, ms, per_id = [], [], {}, [], {}
        t0 = time.time()
        for it in items:
            cand = pipe.retrieve(it.rec.question, it.rec.topic_entities or None)
            t = time.perf_counter()
            plan = pipe.plan(cand)
            ms.append((time.perf_counter() - t) * 1000)
            kinds[plan.kind] = kinds.get(plan.kind, 0) + 1
            top = plan.ends.get(next(iter(plan.ends), ""), set()) if plan.paths else set()
            nm = [e.name for e in pipe.store.entities_by_id(sorted(top))]
            hits.append(float(bool(name_set(nm) & name_set(it.rec.answers))))
            per_id[it.rec.id] = hits[-1]
            sizes.append(len(top))
        ms.sort()
        out["runs"][spec] = {
            "top_path_hit": round(statistics.fmean(hits), 4),
            "top_path_ends_median": statistics.median(sizes),
            "planned_by": kinds,
            "plan_ms": {"p50": round(ms[len(ms) // 2], 1), "p95": round(ms[int(.95 * len(ms))], 1)},
            "seconds": round(time.time() - t0, 1),
            "per_question": per_id,
        }
        print(spec, {k: v for k, v in out["runs"][spec].items() if k != "per_question"}, flush=True)
        pipe.close()
    out["uptime"] = os.getloadavg()
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
