"""Summarise `talent eval --rows` runs (the WebQSP-evidence dev questions, or MetaQA held-out
with --per-hop) under different planners (issues 29, 45): QA Hit@1, answer F1, candidate S
Hit and mean nodes, per-stage p50/p95, and the paired wins/losses; writes one JSON.

    talent eval .talent/b/webqsp/questions/webqsp-evidence-dev.jsonl --format rog \
        --mode full --offset O --limit 100 --rows planner.O.jsonl   [--planner none]
    python bench/webqsp_planner.py --run planner=planner.*.jsonl --run none=none.*.jsonl \
        --out bench/results/webqsp_planner.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
from pathlib import Path


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1) if xs else 0.0


def summary(rows: list[dict]) -> dict:
    n = len(rows)
    mean = lambda xs: round(statistics.fmean(xs), 4) if xs else 0.0  # noqa: E731
    stages = sorted({k for r in rows for k in r.get("timings_ms", {})})
    planned = [r for r in rows if r.get("plan")]
    # the gold answer is among the ranked candidates and a planned path reaches it
    gold_on_plan = [any(len(c) >= 5 and c[2] and c[4] > 0 for c in r.get("answer_ranked", []))
                    for r in planned]
    misses = {"gold_not_a_candidate": 0, "gold_a_candidate_off_plan": 0, "gold_on_plan": 0}
    for r in rows:
        if "hit@1" not in r or r["hit@1"]:
            continue
        ranked = [c for c in r.get("answer_ranked", []) if len(c) >= 3]
        if any(len(c) >= 5 and c[2] and c[4] > 0 for c in ranked):
            misses["gold_on_plan"] += 1
        elif any(c[2] for c in ranked):
            misses["gold_a_candidate_off_plan"] += 1
        else:
            misses["gold_not_a_candidate"] += 1
    return {
        "questions": n,
        "hit@1": mean([r.get("hit@1", 0.0) for r in rows]),
        "answer_f1": mean([r.get("answer_f1", 0.0) for r in rows]),
        "candidate_hit": mean([r["candidate"]["hit"] for r in rows]),
        "candidate_nodes": mean([r["candidate"]["size"] for r in rows]),
        "selected_hit": mean([r["selected"]["hit"] for r in rows if r.get("selected")]),
        "abstained": sum("hit@1" not in r for r in rows),  # topic not in the KG: counted 0
        "with_plan": len(planned),
        "gold_on_a_planned_path": mean([float(x) for x in gold_on_plan]),
        "misses": misses,
        "timings_ms": {k: {"p50": pct([r["timings_ms"][k] for r in rows
                                       if k in r["timings_ms"]], 0.5),
                           "p95": pct([r["timings_ms"][k] for r in rows
                                       if k in r["timings_ms"]], 0.95)} for k in stages},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True,
                    help="NAME=GLOB of row files (repeatable)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--note", default="")
    ap.add_argument("--per-hop", type=int, default=0, metavar="N",
                    help="MetaQA held-out files: every N lines one hop (1, 2, 3); adds "
                         "Hit@1 and answer F1 per hop (ids 'file:line')")
    a = ap.parse_args()
    runs: dict[str, dict[str, dict]] = {}
    for spec in a.run:
        name, pattern = spec.split("=", 1)
        rows = {}
        for f in sorted(glob.glob(pattern)):
            for line in Path(f).read_text(encoding="utf-8").splitlines():
                if line.strip():
                    r = json.loads(line)
                    rows[r["id"]] = r
        runs[name] = rows
    out: dict = {"runs": {k: summary(list(v.values())) for k, v in runs.items()}}
    if a.per_hop:
        for k, rows in runs.items():
            hops: dict[int, list[dict]] = {}
            for rid, r in rows.items():
                line = int(str(rid).rsplit(":", 1)[-1])
                hops.setdefault((line - 1) // a.per_hop + 1, []).append(r)
            out["runs"][k]["by_hop"] = {
                f"{h}-hop": {"questions": len(rs),
                             "hit@1": round(statistics.fmean(r.get("hit@1", 0.0) for r in rs), 4),
                             "answer_f1": round(statistics.fmean(r.get("answer_f1", 0.0)
                                                                 for r in rs), 4)}
                for h, rs in sorted(hops.items())}
    names = list(runs)
    if len(names) == 2:
        a_rows, b_rows = runs[names[0]], runs[names[1]]
        common = sorted(set(a_rows) & set(b_rows))
        hit = lambda r: r.get("hit@1", 0.0)  # noqa: E731
        out["paired"] = {
            "questions": len(common),
            f"{names[0]}_hit@1": round(statistics.fmean(hit(a_rows[i]) for i in common), 4)
            if common else 0.0,
            f"{names[1]}_hit@1": round(statistics.fmean(hit(b_rows[i]) for i in common), 4)
            if common else 0.0,
            f"{names[0]}_wins": sum(hit(a_rows[i]) > hit(b_rows[i]) for i in common),
            f"{names[1]}_wins": sum(hit(b_rows[i]) > hit(a_rows[i]) for i in common),
            "answers_differ": sum(a_rows[i].get("answer") != b_rows[i].get("answer")
                                  for i in common),
        }
    out["note"] = a.note
    out["uptime"] = os.popen("uptime").read().strip()
    print(json.dumps(out, indent=1))
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
