"""Bench: the same questions through the product's pipeline on the embedded store and on Neo4j.

Both stores hold the same KG loaded by `talent load` (the embedded one in --embedded-dir,
Neo4j the server of `make neo4j-up`). Per question, in turn on each store (interleaved, so
both see the same machine load): the candidate S of `Pipeline.retrieve` with the default
retrieval settings (what `talent retrieve` / `talent eval --mode retrieval` run): its node
ids, S Hit, |S|, the stage timings. Then, with --qa N, a seeded sample of N questions
answered in full mode (`talent eval --mode full`'s Runner: bundled adapters and planner,
ranked decoding) on both stores: Hit@1 and whether the answers are the same.

For every question whose S differs the JSON keeps what differs: the seeds (with their
sources), the links, the nodes only one store has, and whether the expansion was truncated.

    python bench/neo4j_parity.py .talent/exp2/test.txt --format metaqa \
        --embedded-dir .talent/b/metaqa --qa 90 -o bench/results/neo4j_parity_metaqa.json
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time
from pathlib import Path

from benchio import load_average, retrieval_bench_setup, write_json_atomic

ROOT = retrieval_bench_setup(product_threads=True)  # threads as `talent ask` runs them

import numpy as np  # noqa: E402

from talent_core.config import Settings  # noqa: E402
from talent_core.evaluation.datasets import Item  # noqa: E402
from talent_core.evaluation.latency import percentile  # noqa: E402
from talent_core.evaluation.metrics import retrieval_scores  # noqa: E402
from talent_core.evaluation.runner import Runner, score_answer  # noqa: E402
from talent_core.pipeline import Pipeline  # noqa: E402
from talent_core.questions import read_questions  # noqa: E402
from talent_core.retrieval import RetrievalConfig  # noqa: E402

log = logging.getLogger("bench.neo4j_parity")
KINDS = ("embedded", "neo4j")


def pct(vals: list[float]) -> dict[str, float]:
    a = np.asarray(vals, dtype=float)
    return {"p50": round(float(percentile(a, 50)), 2), "p95": round(float(percentile(a, 95)), 2),
            "mean": round(float(a.mean()), 2)}  # fmt: skip


def seeds_of(cand) -> list:
    return [[s.id, round(s.score, 4), sorted(str(x) for x in s.sources)] for s in cand.seeds]


def links_of(cand) -> list:
    return [[lk.mention, lk.id, round(lk.score, 4), lk.how] for lk in cand.links]


def retrieval_parity(pipes: dict, recs: list, warmup: int) -> dict:
    for rec in recs[:warmup]:  # connections, query plans, caches, the embedder
        for kind in KINDS:
            pipes[kind].retrieve(rec.question, rec.topic_entities or None)
    per = {k: {"hit": [], "size": [], "timings": []} for k in KINDS}
    same, diffs = 0, []
    for rec in recs:
        cands = {}
        for kind in KINDS:
            c = cands[kind] = pipes[kind].retrieve(rec.question, rec.topic_entities or None)
            sc = retrieval_scores([n.name for n in c.nodes], rec.answers)
            per[kind]["hit"].append(sc.hit)
            per[kind]["size"].append(len(c.nodes))
            per[kind]["timings"].append(c.timings_ms)
        ids = {k: {n.id for n in cands[k].nodes} for k in KINDS}
        if ids["embedded"] == ids["neo4j"]:
            same += 1
            continue
        e, n = cands["embedded"], cands["neo4j"]
        diffs.append({
            "id": rec.id, "question": rec.question, "gold": rec.answers,
            "hit": {k: per[k]["hit"][-1] for k in KINDS},
            "size": {k: per[k]["size"][-1] for k in KINDS},
            "only_embedded": sorted(ids["embedded"] - ids["neo4j"])[:20],
            "only_neo4j": sorted(ids["neo4j"] - ids["embedded"])[:20],
            "same_seeds": seeds_of(e) == seeds_of(n), "same_anchors": e.anchors == n.anchors,
            "same_links": links_of(e) == links_of(n),
            "seeds": {"embedded": seeds_of(e), "neo4j": seeds_of(n)},
            "links": {"embedded": links_of(e), "neo4j": links_of(n)},
            "truncated": {"embedded": e.truncated, "neo4j": n.truncated},
        })  # fmt: skip
    out: dict = {"questions": len(recs), "identical_S": same,
                 "identical_S_frac": round(same / max(1, len(recs)), 4)}  # fmt: skip
    for kind in KINDS:
        p = per[kind]
        stages = sorted({s for t in p["timings"] for s in t})
        out[kind] = {
            "S_hit": round(float(np.mean(p["hit"])), 4),
            "mean_nodes": round(float(np.mean(p["size"])), 2),
            "latency_ms": {s: pct([t.get(s, 0.0) for t in p["timings"]]) for s in stages},
        }
    out["hit_differs"] = sum(1 for d in diffs if d["hit"]["embedded"] != d["hit"]["neo4j"])
    out["differences"] = diffs
    return out


def qa_parity(pipes: dict, recs: list) -> dict:
    runners = {k: Runner(pipes[k]) for k in KINDS}
    rows = {k: [] for k in KINDS}
    secs = {k: [] for k in KINDS}
    for rec in recs:
        item = Item(id=rec.id, rec=rec, retrieval_gold=rec.answers)
        for kind in KINDS:
            t = time.perf_counter()
            ans = runners[kind].answer(item, {}, "full", None, {"method": "pcst"})
            secs[kind].append(time.perf_counter() - t)
            rows[kind].append(score_answer(rec, ans))
    same = sum(1 for a, b in zip(rows["embedded"], rows["neo4j"], strict=True)
               if a.get("answer") == b.get("answer"))  # fmt: skip
    out: dict = {"questions": len(recs), "same_answer": same}
    for kind in KINDS:
        out[kind] = {"hit@1": round(float(np.mean([r.get("hit@1", 0) for r in rows[kind]])), 4),
                     "ask_seconds": pct(secs[kind])}  # fmt: skip
    out["answers_differ"] = [
        {"id": a["id"], "question": a["question"], "gold": a["gold"],
         "embedded": a.get("answer"), "neo4j": b.get("answer"),
         "hit@1": {"embedded": a.get("hit@1"), "neo4j": b.get("hit@1")}}
        for a, b in zip(rows["embedded"], rows["neo4j"], strict=True)
        if a.get("answer") != b.get("answer")
    ]  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--format", choices=["metaqa", "rog"], required=True)
    ap.add_argument("--embedded-dir", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--hops", type=int, default=None, help="default: RetrievalConfig's")
    ap.add_argument(
        "--hub-scan",
        type=int,
        default=None,
        help="default: RetrievalConfig's (10**9: every edge of a hub read)",
    )
    ap.add_argument("--qa", type=int, default=0, help="questions answered in full mode")
    ap.add_argument("--qa-seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    recs = list(read_questions(args.questions, args.format, limit=args.limit))
    over = {"hops": args.hops, "hub_scan": args.hub_scan}
    cfg = RetrievalConfig(**{k: v for k, v in over.items() if v is not None})
    pipes = {k: Pipeline(settings=Settings(store=k, data_dir=args.embedded_dir), retrieval=cfg,
                         question_format=args.format) for k in KINDS}  # fmt: skip
    stats = {k: pipes[k].stats() for k in KINDS}
    for k in ("entities", "relations", "triples", "entities_with_embedding"):
        if getattr(stats["embedded"], k) != getattr(stats["neo4j"], k):
            raise SystemExit(f"the stores differ: {stats}")
    out: dict = {
        "command": "python bench/neo4j_parity.py " + " ".join(sys.argv[1:]),
        "stores": {k: stats[k].model_dump() for k in KINDS},
        "retrieval_config": cfg.model_dump(), "cpus": os.cpu_count(),
        "load_average_before": load_average(),
    }  # fmt: skip
    t = time.perf_counter()
    out["retrieval"] = retrieval_parity(pipes, recs, args.warmup)
    out["retrieval"]["seconds"] = round(time.perf_counter() - t, 1)
    out["load_average_after_retrieval"] = load_average()
    write_json_atomic(args.out, out)
    r = out["retrieval"]
    print(f"S identical {r['identical_S']}/{r['questions']}; "
          + "; ".join(f"{k}: hit {r[k]['S_hit']} nodes {r[k]['mean_nodes']} total p50/p95 "
                      f"{r[k]['latency_ms']['total']['p50']}/{r[k]['latency_ms']['total']['p95']}"
                      for k in KINDS), flush=True)  # fmt: skip
    if args.qa:
        idx = sorted(random.Random(args.qa_seed).sample(range(len(recs)), min(args.qa, len(recs))))
        t = time.perf_counter()
        out["qa"] = qa_parity(pipes, [recs[i] for i in idx])
        out["qa"]["sample"] = {"seed": args.qa_seed, "indices": idx}
        out["qa"]["seconds"] = round(time.perf_counter() - t, 1)
        out["load_average_after_qa"] = load_average()
        write_json_atomic(args.out, out)
        q = out["qa"]
        print(
            f"QA {q['questions']}: same answer {q['same_answer']}; "
            + "; ".join(f"{k}: Hit@1 {q[k]['hit@1']}" for k in KINDS),
            flush=True,
        )
    for p in pipes.values():
        p.close()


if __name__ == "__main__":
    main()
