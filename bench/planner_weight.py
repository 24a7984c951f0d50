"""Tune the relation-path planner's answer weight w on validation rows and write it into the
planner's file.

    talent eval VAL.txt --mode full --decode ranked --planner DIR --rows val_rows.jsonl
    python bench/planner_weight.py val_rows.jsonl [more_rows.jsonl] --planner DIR \
        [--out bench/results/planner_weight.json] [--write]

Each row's `answer_ranked` holds, per candidate answer, [name, score, is gold, model score,
path prior]; for every w of the grid the candidates are re-scored as model + w log(prior +
eps) and Hit@1 is counted. The best w (ties: the smaller) is reported, and with --write
stored as `answer_weight` in DIR/planner.json (with the grid it was chosen on).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

GRID = (0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0)


def hit_at_1(rows: list[dict], w: float, eps: float) -> float:
    hits = 0
    for r in rows:
        cands = [c for c in r.get("answer_ranked", []) if len(c) >= 5]
        if not cands:
            continue
        best = max(cands, key=lambda c: c[3] + w * math.log(c[4] + eps))
        hits += int(best[2])
    return hits / max(1, len(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="+", type=Path)
    ap.add_argument("--planner", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    meta_path = a.planner / "planner.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    eps = float(meta.get("eps", 1e-3))
    result = {}
    for path in a.rows:
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]
        missing = sum(1 for r in rows if not any(len(c) >= 5 for c in r.get("answer_ranked", [])))
        result[path.name] = {"questions": len(rows), "without_plan": missing,
                             "hit@1": {str(w): round(hit_at_1(rows, w, eps), 4) for w in GRID}}
    # the mean over the given row files (e.g. full and no-retriever)
    mean = {w: sum(v["hit@1"][str(w)] for v in result.values()) / len(result) for w in GRID}
    best = max(GRID, key=lambda w: (round(mean[w], 6), -w))
    out = {"eps": eps, "grid": list(GRID), "files": result,
           "mean_hit@1": {str(w): round(v, 4) for w, v in mean.items()}, "chosen": best}
    print(json.dumps(out, indent=1))
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if a.write:
        meta["answer_weight"] = best
        meta["answer_weight_tuning"] = {"files": sorted(result), "mean_hit@1": out["mean_hit@1"]}
        tmp = meta_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        tmp.replace(meta_path)


if __name__ == "__main__":
    main()
