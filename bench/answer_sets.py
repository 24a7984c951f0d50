"""Answer-set quality of the full pipeline on a MetaQA question file, per hop: Hit@1, answer
F1 (set F1 over normalised names), mean answers given vs gold, whole-ask latency; under
both answer-set rules (`TALENT_ANSWER_SET`: path = every end of the planned path, margin =
the generator's margin) from the same candidates.

    TALENT_DATA_DIR=.talent/b/metaqa python bench/answer_sets.py .talent/exp2/val.txt \
        --per-hop 30 -o bench/results/answer_sets_val.json

``--busy N`` runs N CPU-bound processes beside the asks (the latency on a shared machine).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import load_average, retrieval_bench_setup, write_json_atomic  # noqa: E402

retrieval_bench_setup(product_threads=True)  # whole asks, threads as `talent ask`

from talent_core.config import get_settings  # noqa: E402
from talent_core.evaluation.latency import percentile  # noqa: E402
from talent_core.evaluation.metrics import hit_at_1, retrieval_scores  # noqa: E402
from talent_core.pipeline import Pipeline  # noqa: E402
from talent_core.questions import read_questions  # noqa: E402


def per_hop(path: Path, n: int | None) -> list[tuple[int, object]]:
    """(hop, record): the file's questions in order, hop = its block of 100 (metaqa_split's
    test/val files list hop 1, then 2, then 3); the first ``n`` of each hop."""
    recs = list(read_questions(path, "metaqa"))
    size = len(recs) // 3
    out = []
    for i, rec in enumerate(recs):
        hop = i // size + 1
        if n is None or i % size < n:
            out.append((hop, rec))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--per-hop", type=int)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--rules", default="path,margin", help="comma list of path, margin")
    ap.add_argument("--busy", type=int, default=0,
                    help="run N CPU-bound processes beside the asks (a shared machine)")
    args = ap.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(args.busy)]
    try:
        run(args)
    finally:
        for b in burners:
            b.kill()


def torch_threads_configured() -> int:
    """torch's thread count, the most a language-model call uses (`llm.threads`)."""
    import torch

    return torch.get_num_threads()


def run(args: argparse.Namespace) -> None:
    items = per_hop(args.questions, args.per_hop)
    out: dict = {"questions": str(args.questions), "per_hop": args.per_hop,
                 "busy_processes": args.busy, "load_before": load_average(),
                 "torch_threads_configured": torch_threads_configured(), "rules": {}}
    for rule in args.rules.split(","):
        settings = get_settings().model_copy(update={"answer_set": rule})
        pipe = Pipeline(settings=settings)
        pipe.load_models()
        rows = []
        try:
            for hop, rec in items:
                t = time.perf_counter()
                ans = pipe.ask(rec.question, rec.topic_entities or None, mode="full")
                wall = (time.perf_counter() - t) * 1000
                rows.append({"hop": hop, "id": rec.id, "hit@1": hit_at_1(ans.answer, rec.answers),
                             "f1": retrieval_scores(ans.answer, rec.answers).f1,
                             "given": len(ans.answer), "gold": len(rec.answers), "ms": wall,
                             "path": ans.answer_path})
        finally:
            pipe.close()
        res = {}
        for hop in (1, 2, 3, "all"):
            rs = [r for r in rows if hop == "all" or r["hop"] == hop]
            n = len(rs)
            res[str(hop)] = {
                "n": n, "hit@1": round(sum(r["hit@1"] for r in rs) / n, 3),
                "answer_f1": round(sum(r["f1"] for r in rs) / n, 3),
                "given_mean": round(sum(r["given"] for r in rs) / n, 1),
                "gold_mean": round(sum(r["gold"] for r in rs) / n, 1),
                "ask_ms_p50": round(percentile([r["ms"] for r in rs], 50)),
                "ask_ms_p95": round(percentile([r["ms"] for r in rs], 95)),
            }
        out["rules"][rule] = {"by_hop": res, "rows": rows}
        print(rule, {h: (v["hit@1"], v["answer_f1"], v["given_mean"]) for h, v in res.items()})
    out["load_after"] = load_average()
    write_json_atomic(args.out, out)


if __name__ == "__main__":
    main()
