"""Issue 31: the shipped graph-prompt generator on the held-out MetaQA questions, with the
default planner and with `--planner none` (and, optionally, the text generator the same way).

Each question runs `talent eval --mode full`'s body (`evaluation.runner.Runner.answer`, then
`score_answer`) once per variant, on one pipeline per variant built as `talent eval` builds
it (bundled adapters, default retrieval settings). Two things differ from running `talent
eval` once per variant, both for a CPU budget: the questions go in hop-interleaved order
(1st of each hop, 2nd of each hop, ...) so that a run stopped early leaves a balanced
prefix, and every row is appended to ``OUT/rows-VARIANT.jsonl`` as soon as it is scored, so
that a rerun resumes where it stopped. ``--summary`` writes the JSON: Hit@1 overall and by
hop, latency per question (the rows' stage timings), the machine load at the start and the
end of each run.

    TALENT_DATA_DIR=.talent/b/metaqa python bench/graph_prompt_shipped_eval.py \
        .talent/exp2/test.txt --out runs/gg/eval --variant gp-planner --variant gp-none
    python bench/graph_prompt_shipped_eval.py .talent/exp2/test.txt --out runs/gg/eval \
        --summary bench/results/graph_prompt_shipped.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from benchio import load_average, write_json_atomic  # noqa: E402
from tqdm import tqdm  # noqa: E402

# name -> (generator type, planner): the CLI's --generator-type and --planner
VARIANTS = {
    "gp-planner": ("graph-prompt", "bundled"),
    "gp-none": ("graph-prompt", "none"),
    "text-planner": ("text", "bundled"),
    "text-none": ("text", "none"),
}


def interleaved(n: int, per_hop: int) -> list[int]:
    """File indices, 1st question of each hop first (the file holds ``per_hop`` per hop,
    hop by hop, as bench/metaqa_split.py writes it)."""
    hops = (n + per_hop - 1) // per_hop
    return [h * per_hop + i for i in range(per_hop) for h in range(hops) if h * per_hop + i < n]


def _done(path: Path) -> dict[int, dict]:
    """Rows already written, by file index (an unfinished last line is ignored)."""
    out: dict[int, dict] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            out[row["index"]] = row
    return out


def share_selections(pipe: Any, shared: dict[str, Any]) -> None:
    """The pipeline's LLM retriever answers from ``shared`` when another variant's pipeline
    already selected on the same question and the same S (the same bundled retriever: the
    same V-hat); the planner's joins usually make S differ, so this saves only where they
    add nothing. A shared selection marks the row (``retriever_shared``): its retriever
    latency is not a measurement."""
    retriever = pipe.models[0]
    own = retriever.select

    def select(question, candidate, lookup=None, decode="free"):
        key = json.dumps([question, decode, sorted(n.id for n in candidate.nodes),
                          sorted((e.src, e.rel, e.dst) for e in candidate.edges)])
        if key in shared:
            shared["_hit"] = True
            return shared[key]
        shared[key] = own(question, candidate, lookup=lookup, decode=decode)
        return shared[key]

    retriever.select = select


def run(questions: Path, out: Path, variants: list[str], per_hop: int, limit: int | None
        ) -> None:
    from talent_core.evaluation.datasets import Item
    from talent_core.evaluation.runner import Runner, score_answer
    from talent_core.pipeline import Pipeline
    from talent_core.questions import read_questions

    records = list(read_questions(questions, "metaqa"))
    order = interleaved(len(records), per_hop)[:limit]
    out.mkdir(parents=True, exist_ok=True)
    runners, done, files = {}, {}, {}
    shared: dict[str, Any] = {}
    for v in variants:
        gtype, planner = VARIANTS[v]
        pipe = Pipeline(question_format="metaqa", generator_type=gtype, planner=planner)
        share_selections(pipe, shared)
        runners[v] = Runner(pipe)
        files[v] = out / f"rows-{v}.jsonl"
        done[v] = _done(files[v])
    loads = out / "loads.jsonl"
    with loads.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"event": "start", "variants": variants, "at": time.time(),
                            **load_average()}) + "\n")
    for idx in tqdm(order, desc="eval (full)", unit="q"):
        rec = records[idx]
        for v in variants:
            if idx in done[v]:
                continue
            runner = runners[v]
            item = Item(id=rec.id, rec=rec, retrieval_gold=rec.answers)
            method = {"method": runner.pipe.retrieval.method}
            row = score_answer(rec, runner.answer(item, {}, "full", None, method))
            row.update(index=idx, hop=idx // per_hop + 1, variant=v,
                       generator=runner.pipe.generator_type,
                       retriever_shared=shared.pop("_hit", False))
            with files[v].open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, default=str) + "\n")
    with loads.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"event": "end", "variants": variants, "at": time.time(),
                            **load_average()}) + "\n")
    for r in runners.values():
        r.pipe.close()


def summary(out: Path, dest: Path, extra: dict) -> dict:
    from talent_core.evaluation.summary import summarise

    result: dict = {"variants": {}, **extra}
    for v in VARIANTS:
        rows = list(_done(out / f"rows-{v}.jsonl").values())
        if not rows:
            continue
        s = summarise(rows)
        by_hop = {}
        for h in sorted({r["hop"] for r in rows}):
            hr = [r["hit@1"] for r in rows if r["hop"] == h and "hit@1" in r]
            by_hop[str(h)] = {"n": len(hr), "hit1": round(sum(hr) / max(1, len(hr)), 4)}
        gtype, planner = VARIANTS[v]
        result["variants"][v] = {
            "generator_type": gtype, "planner": planner, "n": s["n"],
            "hit1": round(s.get("hit@1", 0.0), 4), "by_hop": by_hop,
            "answer_f1": round(s.get("answer_f1") or 0.0, 4),
            "candidate_hit": round(s.get("candidate", {}).get("hit", 0.0), 4),
            "candidate_size": round(s.get("candidate", {}).get("size", 0.0), 1),
            "latency_ms": s.get("timings", {}),  # per question: mean / p50 / p95 by stage
        }
        shared = sum(bool(r.get("retriever_shared")) for r in rows)
        if shared:  # the latency of the rows that ran their own retriever
            own = [r for r in rows if not r.get("retriever_shared")]
            result["variants"][v].update(retriever_shared=shared, latency_ms_own_retriever={
                "n": len(own), **summarise(own).get("timings", {})})
    loads = out / "loads.jsonl"
    if loads.is_file():
        result["load"] = [json.loads(x) for x in loads.read_text().splitlines() if x.strip()]
    write_json_atomic(dest, result)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="rows directory")
    ap.add_argument("--variant", action="append", choices=sorted(VARIANTS), default=[])
    ap.add_argument("--per-hop", type=int, default=100)
    ap.add_argument("--limit", type=int, default=None, help="first N of the interleaved order")
    ap.add_argument("--summary", type=Path, default=None, help="write the summary JSON here")
    ap.add_argument("--extra", type=Path, default=None,
                    help="a JSON file merged into the summary (commands, training, notes)")
    args = ap.parse_args()
    if args.variant:
        run(args.questions, args.out, args.variant, args.per_hop, args.limit)
    if args.summary:
        extra = json.loads(args.extra.read_text()) if args.extra else {}
        print(json.dumps(summary(args.out, args.summary, extra)["variants"], indent=1))


if __name__ == "__main__":
    main()
