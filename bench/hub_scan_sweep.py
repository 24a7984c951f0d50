"""Bench: the hub cap (RetrievalConfig.hub_scan) swept on the stores that bench_retrieval.py
and bench_retrieval_synth.py loaded (MetaQA and the 2M-triple synthetic KG, 3 hops,
default rule, k 10): latency p50/p95 and Hit per value, and how often S is identical to the
uncapped store's S (hub_scan 1e9: every incident edge is read and sorted).

    python bench/hub_scan_sweep.py [--values 100 250 500 1000 1000000000] [--n 100]

Writes bench/results/hub_scan_sweep.json. Timings are measurements, never assertions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchio import retrieval_bench_setup

ROOT = retrieval_bench_setup()  # one BLAS thread, before numpy; repository on sys.path


import bench_retrieval as br
import bench_retrieval_synth as bs
import inmemory as im
from benchio import load_average, write_json_atomic

from talent_core.questions import FORMAT_STOPWORDS


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=int, nargs="*", default=[100, 250, 500, 1000, br.UNCAPPED])
    ap.add_argument("--n", type=int, default=100, help="3-hop questions per KG")
    ap.add_argument("--out", type=Path, default=br.RESULTS / "hub_scan_sweep.json")
    args = ap.parse_args(argv)

    from talent_core.config import Settings
    from talent_core.embedding import get_embedder
    from talent_core.retrieval import RetrievalConfig, question_encoding, retrieve

    emb = get_embedder(backend=Settings().query_embedder)
    out: dict = {"load_average_before": load_average(), "values": args.values, "kgs": {}}
    for kg, graph, qs in (
        ("metaqa", "metaqa", im.metaqa_questions(3, args.n)),
        ("synthetic-2M", bs.GRAPH, bs.synth_questions(3, args.n)),
    ):
        store = br.open_store(graph)
        if store.stats().triples == 0:
            print(f"{kg}: store {graph} is empty (run its bench first); skipped")
            continue
        encs = [question_encoding(emb, q.question, q.topic_entities) for q in qs]
        base = RetrievalConfig(hops=3, stopwords=list(FORMAT_STOPWORDS["metaqa"]))
        for q in qs[:5]:
            retrieve(q.question, store, emb, base, q.topic_entities)
        runs = {}
        for v in args.values:
            r, sets = br.run(store, qs, encs, base.model_copy(update={"hub_scan": v}), emb,
                             baseline=False, timed=True)  # fmt: skip
            runs[v] = (r, sets)
        ref = runs[max(args.values)][1]
        res = {}
        for v, (r, sets) in runs.items():
            lat = r["latency_ms"]
            res[str(v)] = {
                "hit": r["candidate"]["hit"], "recall": r["candidate"]["recall"],
                "size": r["candidate"]["size"],
                "total_ms": lat["total"], "neighbourhood_ms": lat["neighbourhood"],
                "identical_S_to_uncapped": br.identical_frac(sets, ref),
            }  # fmt: skip
            print(f"{kg} hub_scan={v}: p50={lat['total']['p50']:.1f} "
                  f"p95={lat['total']['p95']:.1f} ms hit={r['candidate']['hit']:.3f} "
                  f"same S as uncapped {res[str(v)]['identical_S_to_uncapped']:.2f}", flush=True)
        out["kgs"][kg] = res
        store.close()
    out["load_average_after"] = load_average()
    write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
