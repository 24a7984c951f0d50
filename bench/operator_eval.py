"""Operators measured: first-answer accuracy per operator on questions with KG gold.

    TALENT_DATA_DIR=.talent/b/metaqa python bench/operator_eval.py \
        bench/operator_questions.tsv -o bench/results/operators_metaqa.json
    TALENT_DATA_DIR=.talent/b/webqsp python bench/operator_eval.py \
        bench/operator_questions_webqsp.tsv -o bench/results/operators_webqsp.json
    python bench/operator_eval.py --recognition .talent/exp2/test.txt \
        ../shared/data/webqsp-evidence/dev.jsonl   # plain questions read as operators

Each question (bench/operator_questions.py) is asked through `Pipeline.ask` as `talent
ask` asks it (the shipped planner, ranked decoding, the bundled adapters). Reported per
split and operator: how many the recogniser read as that operator, the first answer's
accuracy against the gold (a number or yes/no exactly, an entity by `answer_key`, any of a
tie), the whole set's F1 for filters, the operator stage's and the whole ask's latency
(p50 / p95), and the machine's load. `--recognition`: how many plain questions of MetaQA
or WebQSP files the recogniser reads as an operator (pure, no store); `--plain-effect
FILE.jsonl`: those of a RoG file asked with the operator and without it, Hit@1 of each.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import load_average, retrieval_bench_setup, write_json_atomic  # noqa: E402

retrieval_bench_setup(product_threads=True)

from talent_core.operators import recognise  # noqa: E402
from talent_core.text import answer_key  # noqa: E402


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))], 1)


def f1(got: list[str], gold: list[str]) -> float:
    a, b = {answer_key(x) for x in got}, {answer_key(x) for x in gold}
    hit = len(a & b)
    return 0.0 if not hit else 2 * hit / (len(a) + len(b))


def recognition(paths: list[str]) -> dict:
    """Plain questions the recogniser reads as an operator, per file."""
    out = {}
    for p in paths:
        if p.endswith(".jsonl"):
            with open(p, encoding="utf-8") as f:
                qs = [json.loads(line)["question"] for line in f]
        else:
            with open(p, encoding="utf-8") as f:
                qs = [line.split("\t")[0] for line in f if line.strip()]
        read = [(q, r.op) for q in qs if (r := recognise(q)) is not None]
        by = defaultdict(int)
        for _, op in read:
            by[op] += 1
        out[p] = {"questions": len(qs), "read_as_operator": len(read), "by_op": dict(by),
                  "examples": read[:40]}
    return out


def plain_effect(path: str) -> dict:
    """The RoG records of ``path`` that the recogniser reads as an operator, each asked with
    the operator and with it off (the plain answer): Hit@1 of both against their gold."""
    import talent_core.pipeline as pipeline_module
    from talent_core.pipeline import Pipeline

    with open(path, encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    recs = [r for r in recs if recognise(r["question"]) is not None]
    pipe = Pipeline()
    rows = []
    for r in recs:
        gold = {answer_key(a) for a in r["answer"]}
        topics = r.get("q_entity") or None
        with_op = pipe.ask(r["question"], topics)
        pipeline_module.recognise = lambda q: None
        try:
            plain = pipe.ask(r["question"], topics)
        finally:
            pipeline_module.recognise = recognise
        row = {"id": r["id"], "question": r["question"], "gold": r["answer"][:5],
               "read_as": recognise(r["question"]).op,
               "operator": with_op.answer[:5], "plain": plain.answer[:5],
               "notice": with_op.operation.notice if with_op.operation else None,
               "hit_operator": bool(with_op.answer) and answer_key(with_op.answer[0]) in gold,
               "hit_plain": bool(plain.answer) and answer_key(plain.answer[0]) in gold}
        rows.append(row)
        print(row, flush=True)
    n = len(rows) or 1
    return {"file": path, "questions": len(rows),
            "hit1_operator": round(sum(x["hit_operator"] for x in rows) / n, 3),
            "hit1_plain": round(sum(x["hit_plain"] for x in rows) / n, 3), "records": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--out", type=Path)
    ap.add_argument("--split", default=None, help="only this split (dev / held-out)")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--op", default=None, help="only this operator's questions")
    ap.add_argument("--recognition", action="store_true")
    ap.add_argument("--plain-effect", action="store_true",
                    help="RoG JSONL: the questions read as an operator, with it and without")
    args = ap.parse_args()
    if args.plain_effect:
        result = plain_effect(args.files[0])
        print({k: v for k, v in result.items() if k != "records"})
        if args.out:
            write_json_atomic(args.out, result)
        return
    if args.recognition:
        result = recognition(args.files)
        print(json.dumps({k: {x: v[x] for x in ("questions", "read_as_operator", "by_op")}
                          for k, v in result.items()}, indent=1))
        if args.out:
            write_json_atomic(args.out, result)
        return
    from talent_core.pipeline import Pipeline

    with open(args.files[0], encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if args.split:
        rows = [r for r in rows if r["split"] == args.split]
    if args.op:
        rows = [r for r in rows if r["op"] == args.op]
    if args.limit:
        rows = rows[: args.limit]
    load_before = load_average()
    pipe = Pipeline()
    pipe.ask(rows[0]["question"])  # warm: models loaded, first-call costs paid
    records = []
    for i, r in enumerate(rows):
        gold = r["gold"].split("|")
        t = time.perf_counter()
        ans = pipe.ask(r["question"])
        total = (time.perf_counter() - t) * 1000
        op = ans.operation
        first = ans.answer[0] if ans.answer else None
        records.append({
            "id": r["id"], "split": r["split"], "op": r["op"], "question": r["question"],
            "gold": gold, "answer": ans.answer[:20], "read_as": op.op if op else None,
            "right": first is not None and answer_key(first) in {answer_key(g) for g in gold},
            "f1": round(f1(ans.answer, gold), 4), "text": op.text if op else None,
            "notice": op.notice if op else None, "relation": op.relation if op else None,
            "path": (op.path if op else None) or ans.answer_path,
            "operator_ms": round(ans.timings_ms.get("operator", 0.0), 1),
            "total_ms": round(total, 1)})
        print(f"[{i + 1}/{len(rows)}] {r['op']:11} {'ok ' if records[-1]['right'] else 'BAD'} "
              f"{r['question']} -> {ans.answer[:3]} (gold {gold[:3]})", flush=True)
    summary: dict = {}
    for split in sorted({x["split"] for x in records}) + ["all"]:
        part = [x for x in records if split in ("all", x["split"])]
        by_op: dict = {}
        for op in sorted({x["op"] for x in part}):
            xs = [x for x in part if x["op"] == op]
            by_op[op] = {
                "n": len(xs), "recognised": sum(x["read_as"] == op for x in xs),
                "first_answer_accuracy": round(sum(x["right"] for x in xs) / len(xs), 3),
                "mean_f1": round(statistics.mean(x["f1"] for x in xs), 3),
                "operator_ms_p50_p95": [pct([x["operator_ms"] for x in xs], 0.5),
                                        pct([x["operator_ms"] for x in xs], 0.95)],
                "total_ms_p50_p95": [pct([x["total_ms"] for x in xs], 0.5),
                                     pct([x["total_ms"] for x in xs], 0.95)]}
        summary[split] = by_op
    result = {"file": args.files[0], "data_dir": str(pipe.settings.data_dir),
              "store": pipe.store.dialect, "planner": pipe.planner.kind if pipe.planner else None,
              "machine": platform.node(), "load_before": load_before,
              "load_after": load_average(), "summary": summary, "records": records}
    print(json.dumps(summary, indent=1))
    if args.out:
        write_json_atomic(args.out, result)


if __name__ == "__main__":
    main()
