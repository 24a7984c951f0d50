"""Bench: retrieval latency on a synthetic KG of >= 2M triples (embedded FalkorDB store vs
the same retrieve() over the in-memory store).

The KG and its 1/2/3-hop questions come from `bench/synthetic_kg.py` (MetaQA format; made
here if `.talent/bench/synth` lacks them). Entity vectors are the TEST-ONLY hash
pseudo-embeddings (`tests/hash_embedder.py`, 384-d, the MiniLM dimension): embedding
~350k synthetic names with MiniLM would take most of an hour on 2 cores and buys nothing
for latency (the vector index holds 384-d vectors either way; names like "Actor 123" carry
no meaning). Questions and relation texts use the real MiniLM embedder, so the relation
paths the default rule follows are the ones a real question picks. Hit figures on this KG
mean little (its 3-hop template is really four hops); latency is the point.

    python bench/bench_retrieval_synth.py [--n 100] [--hops 1 2 3]

Writes bench/results/retrieval_synth.json (per-stage p50/p95, store and in-memory, ratio).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from benchio import retrieval_bench_setup

ROOT = retrieval_bench_setup()  # thread settings before numpy; repository on sys.path

import bench_retrieval as br
import inmemory as im
import numpy as np

from talent_core.questions import FORMAT_STOPWORDS, QARecord, read_questions

SYNTH = ROOT / ".talent" / "bench" / "synth"
GRAPH = "synth"


def ensure_synth(triples: int) -> None:
    if (SYNTH / "kb.txt").exists() and (SYNTH / "qa_3hop.txt").exists():
        return
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "synthetic_kg.py"), "--triples", str(triples),
         "--out", str(SYNTH)],
        check=True,
    )  # fmt: skip


def synth_questions(hop: int, n: int) -> list[QARecord]:
    """The first n synthetic questions (MetaQA format), read by the product's reader."""
    return list(read_questions(SYNTH / f"qa_{hop}hop.txt", "metaqa", limit=n))


def hash_vectors(names: list[str], dim: int) -> np.ndarray:
    cache = im.CACHE / f"synth-hash{dim}-{im._text_hash(names, 'hash')}.npy"
    if cache.exists():
        return np.load(cache)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from hash_embedder import HashEmbedder  # the TEST-ONLY pseudo-embedder

    vecs = HashEmbedder(dim).encode(names)
    im.CACHE.mkdir(parents=True, exist_ok=True)
    np.save(cache, vecs)
    return vecs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triples", type=int, default=2_000_000)
    ap.add_argument("--hops", type=int, nargs="*", default=[1, 2, 3])
    ap.add_argument("--n", type=int, default=100, help="questions per hop template")
    ap.add_argument("--prizes", nargs="*", default=["default", "paper"])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--reload", action="store_true")
    br.add_no_cap_flag(ap)
    ap.add_argument("--out", type=Path, default=br.RESULTS / "retrieval_synth.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from talent_core.embedding import get_embedder
    from talent_core.retrieval import RetrievalConfig, question_encoding
    from talent_core.retrieval.relations import RelationScorer

    ensure_synth(args.triples)
    t0 = time.perf_counter()
    kg = im.load_metaqa_kg(SYNTH / "kb.txt")
    from talent_core.config import Settings

    # the product's query embedder (TALENT_QUERY_EMBEDDER; the same vectors either way)
    emb = get_embedder(backend=Settings().query_embedder)
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    kg.node_emb = hash_vectors(kg.names, emb.dimension)
    kg.rel_emb = im.embed_cached(kg.rel_names, emb, "synth-relations")
    print(f"synthetic KG: {kg.n_nodes} entities, {kg.n_edges} triples "
          f"({time.perf_counter() - t0:.0f}s)", flush=True)  # fmt: skip

    store = br.open_store(GRAPH)
    load = br.ensure_loaded(store, kg, force=args.reload)
    print(f"store: {store.stats()} load={load}", flush=True)
    mem = im.memory_store(kg)
    RelationScorer(emb).vectors(kg.rel_names)

    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.update(
        {
            "dataset": "synthetic (bench/synthetic_kg.py)",
            "kg": {"entities": kg.n_nodes, "triples": kg.n_edges, "relations": len(kg.rel_names)},
            "entity_vectors": "hash pseudo-embeddings, 384-d (latency only)",
            "load": load,
            "machine": {"cpus": os.cpu_count()},
        }
    )
    for hop in args.hops:
        qs = synth_questions(hop, args.n)
        encs = [question_encoding(emb, q.question, q.topic_entities) for q in qs]
        for rule in args.prizes:
            cfg = RetrievalConfig(k_nodes=args.k, k_edges=args.k, beam=args.k, hops=hop,
                                  prizes=rule, stopwords=list(FORMAT_STOPWORDS["metaqa"]))
            from talent_core.retrieval import retrieve

            for q in qs[:5]:  # warm-up
                retrieve(q.question, store, emb, cfg, q.topic_entities)
            la = os.getloadavg()[0]
            t1 = time.perf_counter()
            r, sets = br.run(store, qs, encs, cfg, emb, baseline=False, timed=True)
            m, msets = br.run(mem, qs, encs, cfg, emb, baseline=False, timed=True)
            r["config"] = cfg.model_dump()
            r["load_avg_1m"] = round((la + os.getloadavg()[0]) / 2, 2)
            br.add_inmemory_comparison(r, sets, m, msets, br.STAGES)
            if args.no_cap_compare:
                br.add_no_cap_comparison(r, sets, store, qs, encs, cfg, emb)
            results.setdefault("splits", {}).setdefault(f"{hop}-hop", {})[rule] = r
            lat, mlat = r["latency_ms"]["total"], m["latency_ms"]["total"]
            print(
                f"synth {hop}-hop {rule:8s} k={args.k} |S|={r['candidate']['size']:.1f} "
                f"hit={r['candidate']['hit']:.3f} store p50={lat['p50']:.1f} "
                f"p95={lat['p95']:.1f} ms | in-memory p50={mlat['p50']:.1f} "
                f"p95={mlat['p95']:.1f} ms | same S {r['inmemory']['identical_S_frac']:.2f} "
                f"load={r['load_avg_1m']} ({time.perf_counter() - t1:.0f}s)",
                flush=True,
            )
            args.out.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.out.with_suffix(".tmp")
            tmp.write_text(json.dumps(results, indent=1))
            tmp.replace(args.out)
    store.close()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
