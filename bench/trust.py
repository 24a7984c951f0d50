"""Answers an analyst can trust (issue 28), on held-out MetaQA questions through the whole
pipeline (shipped models, default settings): Hit@1 and answer-set F1 per hop as asked
(brackets), with the brackets removed, with one seeded typo inside the [topic]; and
"not in the KG" on questions about made-up entities (names more than two edits from every KG
name, `linking_probe.made_up`), with and without brackets, beside the false-abstention
rate on the in-KG questions.

    TALENT_DATA_DIR=.talent/b/metaqa python bench/trust.py .talent/exp2/test.txt \
        --made-up 100 -o bench/results/trust_heldout.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import load_average, retrieval_bench_setup, write_json_atomic  # noqa: E402

ROOT = retrieval_bench_setup(product_threads=True)  # whole asks, threads as `talent ask`

from linking_probe import variants  # noqa: E402

from talent_core.evaluation.latency import percentile  # noqa: E402
from talent_core.evaluation.metrics import hit_at_1, retrieval_scores  # noqa: E402
from talent_core.pipeline import Pipeline  # noqa: E402

IN_KG = ("brackets", "no_brackets", "typo")
MADE_UP = ("made_up", "made_up_no_brackets")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--made-up", type=int, default=100, help="made-up questions per variant")
    ap.add_argument("--variants", default=",".join(IN_KG + MADE_UP))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    lines = [ln for ln in args.questions.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.startswith("#")]
    per_hop = len(lines) // 3
    pipe = Pipeline()
    pipe.load_models()
    rng = random.Random(args.seed)
    items = [(i // per_hop + 1, ln.split("\t")[1].split("|"), variants(ln, pipe.store, rng))
             for i, ln in enumerate(lines)]
    made_idx = set(random.Random(args.seed).sample(range(len(items)), args.made_up))
    chosen = args.variants.split(",")
    out: dict = {"questions": str(args.questions), "n": len(items), "seed": args.seed,
                 "load_before": load_average(), "variants": {}, "examples": {}}
    if args.out.is_file():  # variants run before (one variant per run fits a session)
        old = json.loads(args.out.read_text())
        out["variants"], out["examples"] = old["variants"], old["examples"]
    try:
        for name in chosen:
            rows = []
            for i, (hop, gold, v) in enumerate(items):
                if name in MADE_UP and i not in made_idx:
                    continue
                q, topics, _ = v[name]
                t = time.perf_counter()
                ans = pipe.ask(q, topics, mode="full")
                rows.append({"hop": hop, "q": q, "abstained": bool(ans.not_in_kg),
                             "hit@1": hit_at_1(ans.answer, gold),
                             "f1": retrieval_scores(ans.answer, gold).f1,
                             "given": len(ans.answer), "ms": (time.perf_counter() - t) * 1000})
            res: dict = {}
            for hop in (1, 2, 3, "all"):
                rs = [r for r in rows if hop == "all" or r["hop"] == hop]
                if not rs:
                    continue
                n = len(rs)
                res[str(hop)] = {"n": n, "abstained": round(sum(r["abstained"] for r in rs) / n, 3)}
                if name in IN_KG:
                    res[str(hop)].update({
                        "hit@1": round(sum(r["hit@1"] for r in rs) / n, 3),
                        "answer_f1": round(sum(r["f1"] for r in rs) / n, 3),
                        "given_mean": round(sum(r["given"] for r in rs) / n, 1)})
                res[str(hop)]["ask_ms_p50"] = round(percentile([r["ms"] for r in rs], 50))
                res[str(hop)]["ask_ms_p95"] = round(percentile([r["ms"] for r in rs], 95))
            out["variants"][name] = res
            out["examples"][name] = [r["q"] for r in rows[:3]]
            print(name, res["all"], flush=True)
            out["load_after"] = load_average()
            write_json_atomic(args.out, out)  # after each variant
    finally:
        pipe.close()


if __name__ == "__main__":
    main()
