"""The planner alone, no language model: how often the plan's top path reaches a gold
answer, on a loaded store (issue 45's quick figure; the QA figures come from `talent eval`).

    TALENT_DATA_DIR=.talent/b/metaqa python bench/matcher_plan_eval.py .talent/exp2/test.txt \
        --planner DIR --metaqa ../shared/data/metaqa -o bench/results/X.json
    TALENT_DATA_DIR=.talent/b/webqsp python bench/matcher_plan_eval.py \
        .talent/b/webqsp/questions/webqsp-evidence-dev.jsonl --format rog --planner DIR

Per question: the retrieval's anchors, then one plan (timed alone; S not joined). top_hit:
the top path's ends hold a gold answer; top_f1: the F1 of the top path's ends as the
answer set; plan_hit: some planned path's ends hold one; path_acc (MetaQA with --metaqa):
the top path is the question type's path. Per hop for MetaQA (the question type's length).
Plan latency: the first pass (each new path text embedded once, as a fresh process meets
them) and with --warm-pass a second pass over the same questions.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from talent_core.evaluation.latency import percentile
from talent_core.models import path_text
from talent_core.pipeline import Pipeline
from talent_core.questions import read_questions
from talent_core.text import answer_key
from talent_core.training.matcher import metaqa_qtypes, metaqa_type_path


def line_qtypes(questions: Path, metaqa: Path) -> dict[int, str | None]:
    """The MetaQA question type of each line of a question file (by its line index)."""
    types = metaqa_qtypes(metaqa)
    return {i: types.get(line.strip())
            for i, line in enumerate(questions.read_text(encoding="utf-8").splitlines())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--format", default=None)
    ap.add_argument("--planner", default="bundled")
    ap.add_argument("--metaqa", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("-o", "--out", type=Path, default=None)
    ap.add_argument("--warm-pass", action="store_true",
                    help="plan every question a second time and report that pass's latency "
                         "too (the path texts then embedded, as in a long-running process)")
    a = ap.parse_args()
    qtypes = line_qtypes(a.questions, a.metaqa) if a.metaqa else {}
    p = Pipeline(planner=a.planner)
    rows = []
    for i, rec in enumerate(read_questions(a.questions, a.format, a.limit)):
        cand, _ = p.retrieve_planned(rec.question, rec.topic_entities, plan_join=0)
        t = time.perf_counter()
        plan = p.plan(cand)
        ms = (time.perf_counter() - t) * 1000
        gold = {answer_key(x) for x in [*rec.answers, *rec.answer_entities]}
        ends_of = plan.ends
        ids = sorted({n for e in ends_of.values() for n in e})
        names = {e.id: answer_key(e.name) for e in p.store.entities_by_id(ids)} if ids else {}
        top = plan.paths[0] if plan.paths else None
        top_ends = {names.get(n, "") for n in ends_of.get(top.text, set())} if top else set()
        inter = len(top_ends & gold)
        f1 = 2 * inter / (len(top_ends) + len(gold)) if inter else 0.0
        qtype = qtypes.get(i)
        row = {"id": rec.id, "ms": round(ms, 1), "top": top.text if top else None,
               "confidence": plan.confidence, "top_hit": bool(inter), "top_f1": round(f1, 4),
               "plan_hit": any({names.get(n, "") for n in e} & gold for e in ends_of.values()),
               "anchors": len(cand.anchors)}
        if qtype:
            row["hop"] = len(metaqa_type_path(qtype))
            row["path_acc"] = top is not None and top.text == path_text(metaqa_type_path(qtype))
        rows.append(row)
        if (i + 1) % 50 == 0:
            print(i + 1, round(float(np.mean([r["top_hit"] for r in rows])), 3), flush=True)
    groups = defaultdict(list)
    for r in rows:
        groups["all"].append(r)
        if "hop" in r:
            groups[f"{r['hop']}-hop"].append(r)
    summary = {}
    for g, rs in groups.items():
        keys = ["top_hit", "top_f1", "plan_hit", *(["path_acc"] if "path_acc" in rs[0] else [])]
        summary[g] = {"questions": len(rs),
                      **{k: round(float(np.mean([r[k] for r in rs])), 4) for k in keys}}
    ms = [r["ms"] for r in rows]
    summary["plan_ms"] = {"p50": round(percentile(ms, 50), 1), "p95": round(percentile(ms, 95), 1)}
    if a.warm_pass:
        warm = []
        for rec in read_questions(a.questions, a.format, a.limit):
            cand, _ = p.retrieve_planned(rec.question, rec.topic_entities, plan_join=0)
            t = time.perf_counter()
            p.plan(cand)
            warm.append((time.perf_counter() - t) * 1000)
        summary["plan_ms_warm"] = {"p50": round(percentile(warm, 50), 1),
                                   "p95": round(percentile(warm, 95), 1)}
    summary["uptime"] = os.popen("uptime").read().strip()
    out = {"planner": a.planner, "questions": str(a.questions), "summary": summary, "rows": rows}
    print(json.dumps(summary, indent=1))
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
