"""Bench: candidate retrieval (retrieve()) against the embedded FalkorDB store.

For MetaQA (whole KG) and WebQSP-evidence (all 400 records merged into one KG):

* quality tables: Hit / Recall / Precision / F1 / mean |S| for k_v = k_e in {3, 5, 10}, both
  prize rules (`paper`, `default`), per MetaQA hop split (>= 300 dev questions each,
  expansion depth = the split's hop count unless --expand-hops), and the no-graph baseline:
  the store's vector top-|S| entities for the same question;
* latency p50/p95 per stage (embed, seeds, neighbourhood, pcst, total) through the store,
  and the SAME retrieve() over the in-memory store (talent_core/store/memory.py: the same
  store contract and expansion code, no database) as the baseline, with the ratio
  store/in-memory, and how often both gave the identical S.

The store is loaded once into `.talent/bench-retrieval` (gitignored) through the store API,
with the same MiniLM vectors the in-memory baseline uses (cached under `.talent/cache`);
`talent load` produces the same graph (ids = names, raw relation names embedded).
Timings are measurements, never assertions; the JSON records the machine load average.

    python bench/bench_retrieval.py --dataset metaqa [--hops 1 2 3] [--n 300]
    python bench/bench_retrieval.py --dataset webqsp
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

from benchio import retrieval_bench_setup

ROOT = retrieval_bench_setup()  # thread settings before numpy; repository on sys.path

import inmemory as im
import numpy as np

from talent_core.evaluation.latency import percentile
from talent_core.evaluation.metrics import macro_average, retrieval_scores
from talent_core.questions import FORMAT_STOPWORDS
from talent_core.text import answer_key

log = logging.getLogger("bench.retrieval")
RESULTS = ROOT / "bench" / "results"
DATA_DIR = ROOT / ".talent" / "bench-retrieval"
STAGES = ("embed", "seeds", "neighbourhood", "pcst", "total")


def open_store(graph: str):
    from talent_core.store.falkordb import FalkorDBStore

    return FalkorDBStore(DATA_DIR, graph)


def ensure_loaded(store, kg: im.KG, force: bool = False) -> dict:
    """Load the in-memory KG (names as ids, cached vectors) unless the store already holds it."""
    st = store.stats()
    if not force and st.triples == kg.n_edges and st.entities == kg.n_nodes:
        return {"loaded": False, "seconds": 0.0}
    t0 = time.perf_counter()
    store.clear()
    store.ensure_schema(int(kg.node_emb.shape[1]))
    im.fill(store, kg)
    st = store.stats()
    if st.triples != kg.n_edges or st.entities != kg.n_nodes:
        raise SystemExit(f"store holds {st} after loading {kg.n_nodes} / {kg.n_edges}")
    return {"loaded": True, "seconds": round(time.perf_counter() - t0, 1)}


def percentiles(timings: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    out = {}
    for k in STAGES:
        vals = np.array([t.get(k, 0.0) for t in timings])
        out[k] = {
            "p50": round(float(percentile(vals, 50)), 2),  # type: ignore[arg-type]
            "p95": round(float(percentile(vals, 95)), 2),  # type: ignore[arg-type]
            "mean": round(float(vals.mean()), 2),
        }
    return out


def run(store, questions, encodings, cfg, embedder, *, baseline: bool, timed: bool):
    """`timed`: embed each question inside retrieve() (the latency runs); otherwise reuse
    the precomputed encodings (quality only: their embed stage reads 0)."""
    from talent_core.retrieval import retrieve

    rows, base, timings, node_sets = [], [], [], []
    trunc = 0
    for q, enc in zip(questions, encodings, strict=True):
        cand = retrieve(q.question, store, embedder, cfg, q.topic_entities,
                        encoding=None if timed else enc)
        names = [n.name for n in cand.nodes]
        rows.append(retrieval_scores(names, q.answers))
        timings.append(cand.timings_ms)
        node_sets.append(frozenset(n.id for n in cand.nodes))
        trunc += cand.truncated
        if baseline:
            size = len({answer_key(x) for x in names})
            hits = store.top_entities(enc.vector, size) if size else []
            base.append(retrieval_scores([h.entity.name for h in hits], q.answers))
    out = {"candidate": macro_average(rows), "truncated_frac": trunc / max(1, len(rows))}
    if timed:
        out["latency_ms"] = percentiles(timings)
        # the store's share: everything but the question embedding (same cost both ways)
        out["latency_ms"]["total_minus_embed"] = percentiles(
            [{"total": t["total"] - t.get("embed", 0.0)} for t in timings]
        )["total"]
    if baseline:
        out["vector_topk_same_size"] = macro_average(base)
    return out, node_sets


UNCAPPED = 10**9  # hub_scan that reads every incident edge (the store before the hub cap)


def identical_frac(sets: list, other: list) -> float:
    """Fraction of questions whose S (node-id sets) is the same in both runs."""
    return float(np.mean([a == b for a, b in zip(sets, other, strict=True)]))


def add_no_cap_flag(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--no-cap-compare", action="store_true",
                    help="also time the store without its hub cap (every edge read), same run")


def add_no_cap_comparison(r: dict, sets: list, store, questions, encodings, cfg, embedder
                          ) -> None:
    """Put the same questions through the store without its hub cap beside the run `r`
    (before/after of the cap, one run): scores, latencies, the fraction with identical S;
    prints its line."""
    nc, ncsets = run(store, questions, encodings, cfg.model_copy(update={"hub_scan": UNCAPPED}),
                     embedder, baseline=False, timed=True)  # fmt: skip
    r["no_hub_cap"] = {"candidate": nc["candidate"], "latency_ms": nc["latency_ms"],
                       "identical_S_frac": identical_frac(sets, ncsets)}  # fmt: skip
    nl = nc["latency_ms"]["total"]
    print(f"  without hub cap: p50={nl['p50']:.1f} p95={nl['p95']:.1f} ms "
          f"hit={nc['candidate']['hit']:.3f} identical S "
          f"{r['no_hub_cap']['identical_S_frac']:.3f}", flush=True)


def add_inmemory_comparison(r: dict, sets: list, m: dict, msets: list, stages) -> None:
    """Put the in-memory run `m` beside the store run `r`: its scores and latencies, the
    fraction of questions with the identical S, and store/in-memory latency ratios."""
    r["inmemory"] = {
        "candidate": m["candidate"],
        "latency_ms": m["latency_ms"],
        "identical_S_frac": identical_frac(sets, msets),
    }
    r["ratio_store_over_inmemory"] = {
        s: {
            p: round(r["latency_ms"][s][p] / max(m["latency_ms"][s][p], 1e-3), 2)
            for p in ("p50", "p95")
        }
        for s in stages
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=["metaqa", "webqsp"], default="metaqa")
    ap.add_argument("--hops", type=int, nargs="*", default=[1, 2, 3])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--k", type=int, nargs="*", default=[3, 5, 10])
    ap.add_argument("--prizes", nargs="*", default=["paper", "default"])
    ap.add_argument("--expand-hops", type=int, default=0, help="0: the split's hop count")
    ap.add_argument("--inmemory-k", type=int, default=10, help="k of the in-memory comparison")
    ap.add_argument("--reload", action="store_true")
    add_no_cap_flag(ap)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")

    from talent_core.config import Settings
    from talent_core.embedding import get_embedder
    from talent_core.retrieval import RetrievalConfig, question_encoding
    from talent_core.retrieval.relations import RelationScorer

    # the product's query embedder (TALENT_QUERY_EMBEDDER; the same vectors either way)
    emb = get_embedder(backend=Settings().query_embedder)
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    words = list(FORMAT_STOPWORDS["metaqa" if args.dataset == "metaqa" else "rog"])
    if args.dataset == "metaqa":
        kg = im.attach_embeddings(im.load_metaqa_kg(), emb, "metaqa")
        splits = {f"{h}-hop": (h, im.metaqa_questions(h, args.n)) for h in args.hops}
    else:
        recs = im.load_rog_records()
        kg = im.attach_embeddings(im.load_rog_kg(recs), emb, "webqsp")
        splits = {"dev": (2, im.rog_questions(recs)[: args.n])}
    store = open_store(args.dataset)
    load = ensure_loaded(store, kg, force=args.reload)
    mem = im.memory_store(kg)
    # every relation text embedded once up front (a long-lived process has them cached)
    RelationScorer(emb).vectors(kg.rel_names)

    out_path = args.out or RESULTS / f"retrieval_{args.dataset}.json"
    results = json.loads(out_path.read_text()) if out_path.exists() else {}
    results.update(
        {
            "dataset": args.dataset,
            "store": "falkordb (embedded)",
            "kg": {"entities": kg.n_nodes, "triples": kg.n_edges, "relations": len(kg.rel_names)},
            "load": load,
            "machine": {"cpus": os.cpu_count()},
        }
    )
    for split, (hop, qs) in splits.items():
        encs = [question_encoding(emb, q.question, q.topic_entities) for q in qs]
        expand = args.expand_hops or hop
        # warm-up: caches, connections, the FalkorDB query plans
        for q, enc in list(zip(qs, encs, strict=True))[:10]:
            from talent_core.retrieval import retrieve

            retrieve(q.question, store, emb, RetrievalConfig(hops=expand, stopwords=words),
                     q.topic_entities, encoding=enc)
        split_res = results.setdefault("splits", {}).setdefault(split, {})
        split_res["questions"] = len(qs)
        split_res["expand_hops"] = expand
        for rule in args.prizes:
            for k in args.k:
                cfg = RetrievalConfig(k_nodes=k, k_edges=k, beam=k, hops=expand, prizes=rule,
                                      stopwords=words)
                load_before = os.getloadavg()[0]
                t0 = time.perf_counter()
                timed = k == args.inmemory_k
                r, sets = run(store, qs, encs, cfg, emb, baseline=True, timed=timed)
                r["config"] = cfg.model_dump()
                r["load_avg_1m"] = round((load_before + os.getloadavg()[0]) / 2, 2)
                if timed:
                    m, msets = run(mem, qs, encs, cfg, emb, baseline=False, timed=True)
                    add_inmemory_comparison(r, sets, m, msets, (*STAGES, "total_minus_embed"))
                    if args.no_cap_compare:
                        add_no_cap_comparison(r, sets, store, qs, encs, cfg, emb)
                split_res.setdefault(rule, {})[f"k={k}"] = r
                c, b = r["candidate"], r["vector_topk_same_size"]
                lat = r.get("latency_ms", {}).get("total", {"p50": 0.0, "p95": 0.0})
                ratio = r.get("ratio_store_over_inmemory", {}).get("total", {})
                print(
                    f"{args.dataset} {split:6s} {rule:8s} k={k:<2d} hops={expand} "
                    f"hit={c['hit']:.3f} R={c['recall']:.3f} P={c['precision']:.3f} "
                    f"F1={c['f1']:.3f} |S|={c['size']:.1f} | vec hit={b['hit']:.3f} "
                    f"| p50={lat['p50']:.1f} p95={lat['p95']:.1f} ms ratio={ratio} "
                    f"load={r['load_avg_1m']} ({time.perf_counter() - t0:.0f}s)",
                    flush=True,
                )
        out_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1))
        tmp.replace(out_path)
    print(f"wrote {out_path}")
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
