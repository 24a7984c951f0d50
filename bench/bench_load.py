"""Bench: bulk loading into a fresh embedded (FalkorDB) store.

1. `../shared/data/metaqa/kb.txt` as `metaqa` with the real embedder (MiniLM): counts
   (expected 133,582 triples, 43,234 entities, 9 relations), total seconds, embedding
   seconds, store seconds, triples/s excluding embeddings, peak RSS of the loader process
   and of the redis-server (sampled; their peak sum too).
   With `--cached-run` also a second load, into a fresh graph, that takes the SAME MiniLM
   vectors from memory (recorded during the first load): real vectors at no embedding
   cost, so its wall clock is the load's rate excluding embeddings (the HNSW index sees
   the real vectors; with overlap, nothing hides behind the embedder).
   With `--no-embed-run` also a load with the test-only hash pseudo-embedder of the
   same dimension (random-like vectors: HNSW's worst case).
2. `../shared/data/webqsp-evidence/dev.jsonl` as `rog` into another graph: counts against
   the counts computed from the file, and a round-trip check that CVT ids (`m.0...`) and
   dotted Freebase relations come back exactly.

Writes bench/results/load_metaqa.json and bench/results/load_webqsp.json. Timings are
measurements, never assertions; the JSON records the machine load so they can be judged.

    python bench/bench_load.py [--data ../shared/data] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Self

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psutil
from benchio import load_average, write_json_atomic

from talent_core.config import Settings
from talent_core.loaders.api import load_path
from talent_core.loaders.embedders import make_embedder
from talent_core.store.base import ExpansionCaps
from talent_core.store.falkordb import FalkorDBStore
from talent_core.store.falkordb_server import EmbeddedServer

log = logging.getLogger("bench.load")
RESULTS = ROOT / "bench" / "results"


def default_data() -> Path:
    for cand in (ROOT.parent / "shared" / "data", Path("/work/shared/data")):
        if (cand / "metaqa" / "kb.txt").is_file():
            return cand
    raise SystemExit("no ../shared/data/metaqa/kb.txt; pass --data")


class RssSampler:
    """Peak RSS of this process, the store's server, and their sum (sampled every 0.1 s)."""

    def __init__(self, server_pid: callable):
        self.server_pid = server_pid
        self.me = psutil.Process()
        self.peak = {"loader_mb": 0.0, "server_mb": 0.0, "total_mb": 0.0}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _rss(self, pid: int | None) -> float:
        if pid is None:
            return 0.0
        try:
            return psutil.Process(pid).memory_info().rss / 2**20
        except psutil.Error:
            return 0.0

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            a = self.me.memory_info().rss / 2**20
            b = self._rss(self.server_pid())
            for k, v in (("loader_mb", a), ("server_mb", b), ("total_mb", a + b)):
                self.peak[k] = max(self.peak[k], round(v, 1))

    def __enter__(self) -> Self:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def machine() -> dict:
    import torch

    return {
        "cpus": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
    }


class RecordingEmbedder:
    """The loader's embedder, keeping every vector it returns (name -> vector)."""

    def __init__(self, inner):
        self.inner = inner
        self.dimension = inner.dimension
        self.table: dict = {}

    def __getattr__(self, name: str):  # batch_size, threads, overlapped, ...
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value) -> None:
        if name == "overlapped":
            setattr(self.inner, name, value)
        else:
            super().__setattr__(name, value)

    def encode(self, texts, progress: bool = False):
        vecs = self.inner.encode(texts, progress=progress)
        self.table.update(zip(texts, vecs, strict=True))
        return vecs


class CachedEmbedder:
    """Vectors recorded by a RecordingEmbedder, looked up (a name it never saw is an error)."""

    def __init__(self, table: dict, dimension: int):
        self.table = table
        self.dimension = dimension

    def encode(self, texts, progress: bool = False):
        import numpy as np

        return np.stack([self.table[t] for t in texts]) if texts else np.zeros(
            (0, self.dimension), dtype=np.float32)  # fmt: skip


def metaqa_expected(kb: Path) -> dict:
    """Distinct triples, entities, relations of kb.txt (computed, not assumed)."""
    triples, ents, rels = set(), set(), set()
    with open(kb, encoding="utf-8") as f:
        for line in f:
            h, r, t = line.rstrip("\n").split("|")
            triples.add((h, r, t))
            ents.update((h, t))
            rels.add(r)
    return {"triples": len(triples), "entities": len(ents), "relations": len(rels)}


def precision_check(kb: Path, settings: Settings, embedder, n: int = 2000) -> dict:
    """Cosine between the loader's (reduced-precision) and fp32 embeddings of n names."""
    import random

    import numpy as np

    with open(kb, encoding="utf-8") as f:
        names = sorted({p for line in f for p in line.rstrip("\n").split("|")[::2]})
    sample = random.Random(0).sample(names, min(n, len(names)))
    fp32 = make_embedder(settings, "fp32", threads=getattr(embedder, "threads", None))
    cos = (np.asarray(embedder.encode(sample)) * np.asarray(fp32.encode(sample))).sum(axis=1)
    return {"names": len(sample), "precision": getattr(embedder, "precision", "?"),
            "cos_to_fp32_min": round(float(cos.min()), 6),
            "cos_to_fp32_mean": round(float(cos.mean()), 6)}  # fmt: skip


def run_metaqa(
    data: Path,
    work: Path,
    settings: Settings,
    embedder,
    graph: str,
    overlap: bool = True,
    bulk: bool = True,
    fresh: bool = True,
) -> dict:
    """Load kb.txt into `graph` (cleared first unless `fresh` is False: a reload)."""
    kb = data / "metaqa" / "kb.txt"
    store = FalkorDBStore(work, graph, batch_size=settings.batch_size)
    if fresh:
        store.clear()
    store.ensure_schema(embedder.dimension)
    before = load_average()
    with RssSampler(lambda: store.server.pid) as rss:
        t = time.perf_counter()
        rep = load_path(kb, "metaqa", store=store, embedder=embedder, settings=settings,
                        overlap=overlap, bulk=bulk, progress=False)  # fmt: skip
        wall = time.perf_counter() - t
    st = store.stats()
    store.close()
    by = rep.store_seconds_by_call
    # bulk path: the vector conversion (vecf32 + HNSW inserts) and the index build after
    # batch 1 are the vector-index work; the rest is GRAPH.BULK and reading
    vindex = by.get("vectors", 0.0) + by.get("schema", 0.0)
    excl = rep.read_seconds + rep.write_seconds
    return {
        "load_average_before": before,
        "load_average_after": load_average(),
        "path": "bulk" if rep.bulk_batches else "merge",
        "bulk_batches": rep.bulk_batches,
        "batches": rep.batches,
        "counts": {"entities": st.entities, "relations": st.relations, "triples": st.triples,
                   "entities_with_embedding": st.entities_with_embedding},
        "wall_seconds": round(wall, 2),
        "seconds": round(rep.seconds, 2),
        "embed_seconds": round(rep.embed_seconds, 2),
        "store_seconds": round(rep.write_seconds, 2),
        "read_seconds": round(rep.read_seconds, 2),
        "store_seconds_by_call": {k: round(v, 2) for k, v in by.items()},
        "triples_per_s": round(rep.triples_per_s),
        "triples_per_s_excl_embed": round(rep.triples_per_s_excl_embed),
        "vector_index_seconds": round(vindex, 2) if rep.bulk_batches else None,
        "triples_per_s_excl_embed_and_vector_index":
            round(rep.loaded / (excl - vindex)) if rep.bulk_batches and excl > vindex else None,
        "names_embedded": rep.new_entities_embedded + rep.new_relations_embedded,
        "names_per_s_embedding": round(
            (rep.new_entities_embedded + rep.new_relations_embedded) / rep.embed_seconds
        ) if rep.embed_seconds else None,
        "peak_rss": rss.peak,
        "report": json.loads(rep.model_dump_json()),
    }  # fmt: skip


def same_vectors(work: Path, a: str, b: str, kb: Path, n: int = 2000) -> dict:
    """Stored vectors of n MetaQA names in graphs a and b (bulk vs MERGE path)."""
    import random

    import numpy as np

    with open(kb, encoding="utf-8") as f:
        names = sorted({p for line in f for p in line.rstrip("\n").split("|")[::2]})
    sample = random.Random(0).sample(names, min(n, len(names)))
    va = FalkorDBStore(work, a).entity_vectors(sample)
    vb = FalkorDBStore(work, b).entity_vectors(sample)
    diff = max(float(np.abs(va[k] - vb[k]).max()) for k in sample)
    return {"names": len(sample), "found": [len(va), len(vb)], "max_abs_diff": diff}


def embed_batch_sweep(kb: Path, settings: Settings, sizes=(64, 128, 256, 512),
                      n: int = 2000, threads: int = 1) -> dict:  # fmt: skip
    """Names per second of the loader's embedder by batch size (one torch thread)."""
    import random

    with open(kb, encoding="utf-8") as f:
        names = sorted({p for line in f for p in line.rstrip("\n").split("|")[::2]})
    sample = random.Random(1).sample(names, min(n, len(names)))
    out = {"names": len(sample), "threads": threads, "load_average_before": load_average()}
    for bs in sizes:
        emb = make_embedder(settings, "fp32", batch_size=bs, threads=threads)
        emb.encode(sample[:64])  # warm-up
        t = time.perf_counter()
        emb.encode(sample)
        out[f"batch_{bs}_names_per_s"] = round(len(sample) / (time.perf_counter() - t))
    out["load_average_after"] = load_average()
    return out


def bulk_compare(data: Path, work: Path, base: Settings, embedder, out_dir: Path,
                 hash_runs: bool = True, sweep: bool = True) -> dict:  # fmt: skip
    """MERGE path vs bulk path on fresh graphs, then a reload, in one run:
    bench/results/load_metaqa_bulk.json."""
    kb = data / "metaqa" / "kb.txt"
    expected = metaqa_expected(kb)
    out: dict = {"machine": machine(), "expected": expected, "settings": {
        "batch_size": base.batch_size, "embedding_model": base.embedding_model,
        "embed_batch_size": getattr(embedder, "batch_size", None),
        "embed_threads": getattr(embedder, "threads", None) or "auto"}}  # fmt: skip
    if sweep:
        out["embed_batch_sweep"] = embed_batch_sweep(kb, base)
        log.warning("sweep: %s", out["embed_batch_sweep"])
    runs = out["runs"] = {}
    for name, emb, bulk in (("minilm_merge", embedder, False), ("minilm_bulk", embedder, True)):
        runs[name] = run_metaqa(data, work, base, emb, f"bench_{name}", bulk=bulk)
        log.warning("%s: %s", name, {k: v for k, v in runs[name].items() if k != "report"})
    runs["minilm_reload"] = run_metaqa(data, work, base, embedder, "bench_minilm_bulk",
                                       bulk=True, fresh=False)  # fmt: skip
    log.warning("reload: %s", runs["minilm_reload"]["wall_seconds"])
    if hash_runs:
        sys.path.insert(0, str(ROOT / "tests"))
        from hash_embedder import HashEmbedder  # the TEST-ONLY pseudo-embedder

        h = HashEmbedder(embedder.dimension)
        for name, bulk in (("hash_merge", False), ("hash_bulk", True)):
            runs[name] = run_metaqa(data, work, base, h, f"bench_{name}", bulk=bulk)
            log.warning("%s: %s", name, runs[name]["wall_seconds"])
    out["bulk_vs_merge_vectors"] = same_vectors(work, "bench_minilm_merge", "bench_minilm_bulk", kb)
    out["ok"] = all(
        r["counts"][k] == expected[k] for r in runs.values() for k in expected
    ) and all(r["counts"]["entities_with_embedding"] == expected["entities"] for r in runs.values())
    m, b, r = runs["minilm_merge"], runs["minilm_bulk"], runs["minilm_reload"]
    out["summary"] = {
        "merge_seconds": m["wall_seconds"], "bulk_seconds": b["wall_seconds"],
        "reload_seconds": r["wall_seconds"],
        "merge_triples_per_s_excl_embed": m["triples_per_s_excl_embed"],
        "bulk_triples_per_s_excl_embed": b["triples_per_s_excl_embed"],
        "bulk_triples_per_s_excl_embed_and_vector_index":
            b["triples_per_s_excl_embed_and_vector_index"],
        "reload_triples_per_s": r["triples_per_s"],
        "merge_embed_seconds": m["embed_seconds"], "bulk_embed_seconds": b["embed_seconds"],
        "peak_rss_mb": {"merge": m["peak_rss"], "bulk": b["peak_rss"], "reload": r["peak_rss"]},
    }  # fmt: skip
    out["machine"]["loadavg_1m_at_end"] = round(os.getloadavg()[0], 2)
    write_json_atomic(out_dir / "load_metaqa_bulk.json", out)
    return out


def run_webqsp(data: Path, work: Path, settings: Settings, embedder) -> dict:
    src = data / "webqsp-evidence" / "dev.jsonl"
    recs = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]
    # keys as stored: surrounding whitespace stripped (one record has "  Adventures by...")
    triples = {tuple(x.strip() for x in t) for r in recs for t in r["graph"]}
    ents = {x for h, _, t in triples for x in (h, t)}
    rels = {r for _, r, _ in triples}
    store = FalkorDBStore(work, "bench_webqsp", batch_size=settings.batch_size)
    store.clear()
    store.ensure_schema(embedder.dimension)
    s2 = settings.model_copy(update={"data_dir": work / "rog-side"})
    rep = load_path(src, "rog", store=store, embedder=embedder, settings=s2)
    st = store.stats()
    cvts = sorted(e for e in ents if e.startswith("m."))
    got = {e.id: e.name for e in store.entities_by_id(cvts)}
    cvt_ok = sum(1 for c in cvts if got.get(c) == c)
    dotted = sorted(r for r in rels if "." in r)
    rel_back = store.existing_relations(dotted)
    # sampled triples come back from the neighbourhood of their head
    import random

    rng = random.Random(0)
    sample = rng.sample(sorted(triples), min(200, len(triples)))
    edge_ok = 0
    everything = ExpansionCaps(fanout=10_000, max_nodes=100_000, max_edges=100_000)
    for h, r, t in sample:
        sub = store.neighbourhood([h], 1, everything)
        edge_ok += any(e.src == h and e.rel == r and e.dst == t for e in sub.edges)
    store.close()
    qfile = Path(rep.side_output_file) if rep.side_output_file else None
    return {
        "expected": {"triples": len(triples), "entities": len(ents), "relations": len(rels),
                     "questions": len(recs)},
        "counts": {"entities": st.entities, "relations": st.relations, "triples": st.triples,
                   "questions_kept": sum(1 for _ in open(qfile)) if qfile else 0},
        "rows_read": rep.rows_read,
        "duplicates_in_batch": rep.duplicates,
        "seconds": round(rep.seconds, 2),
        "cvt_nodes": len(cvts),
        "cvt_round_trip_ok": cvt_ok,
        "dotted_relations": len(dotted),
        "dotted_relations_round_trip_ok": len(rel_back),
        "sampled_triples": len(sample),
        "sampled_triples_found": edge_ok,
        "ok": st.triples == len(triples) and st.entities == len(ents)
        and st.relations == len(rels) and cvt_ok == len(cvts)
        and len(rel_back) == len(dotted) and edge_ok == len(sample),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--keep", type=Path, default=None, help="data dir to keep (default: temp)")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--no-embed-run", action="store_true",
                    help="also load with the hash pseudo-embedder (store + loader rate)")
    ap.add_argument("--cached-run", action="store_true",
                    help="also load with the first run's MiniLM vectors from memory")
    ap.add_argument("--skip-webqsp", action="store_true")
    ap.add_argument("--embed-threads", type=int, default=None, help="default: loaders/README")
    ap.add_argument("--embed-precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--no-overlap", action="store_true", help="write and embed in turn")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--bulk-compare", action="store_true",
                    help="MERGE vs bulk path and a reload -> load_metaqa_bulk.json (only)")
    ap.add_argument("--no-hash-runs", action="store_true",
                    help="--bulk-compare without the hash pseudo-embedder runs")
    ap.add_argument("--no-sweep", action="store_true",
                    help="--bulk-compare without the embedding batch-size sweep")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")

    data = args.data or default_data()
    work = args.keep or Path(tempfile.mkdtemp(prefix="talent-bench-"))
    base = Settings(data_dir=work, store="embedded")
    if args.batch_size:
        base = base.model_copy(update={"batch_size": args.batch_size})
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        embedder = make_embedder(base, args.embed_precision, threads=args.embed_threads)
        model_seconds = time.perf_counter() - t
        if args.bulk_compare:
            res = bulk_compare(data, work, base, embedder, args.out,
                               hash_runs=not args.no_hash_runs, sweep=not args.no_sweep)
            print(json.dumps(res["summary"], indent=2))
            return
        expected = metaqa_expected(data / "metaqa" / "kb.txt")
        out = {"machine": machine(), "settings": {
            "batch_size": base.batch_size, "embedding_model": base.embedding_model,
            "embed_batch_size": getattr(embedder, "batch_size", None),
            "embed_threads": getattr(embedder, "threads", None) or "auto",
            "embed_precision": args.embed_precision, "overlap": not args.no_overlap,
        }, "expected": expected, "model_load_seconds": round(model_seconds, 2)}  # fmt: skip
        if args.embed_precision != "fp32":
            out["precision_check"] = precision_check(data / "metaqa" / "kb.txt", base, embedder)
        rec = RecordingEmbedder(embedder) if args.cached_run else embedder
        out["minilm"] = run_metaqa(
            data, work, base, rec, "bench_metaqa", overlap=not args.no_overlap
        )
        c = out["minilm"]["counts"]
        out["ok"] = all(c[k] == expected[k] for k in expected)
        if args.cached_run:
            cached = CachedEmbedder(rec.table, embedder.dimension)
            # its own data dir: a server holding only this graph, as for a first load
            r = out["minilm_cached_vectors"] = run_metaqa(
                data, work / "cached", base, cached, "bench_metaqa", overlap=not args.no_overlap
            )
            EmbeddedServer.for_dir(work / "cached").stop()
            r["triples_per_s_wall"] = round(r["report"]["loaded"] / r["wall_seconds"])
            out["ok"] = out["ok"] and all(r["counts"][k] == expected[k] for k in expected)
        if args.no_embed_run:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            from hash_embedder import HashEmbedder  # the TEST-ONLY pseudo-embedder

            out["hash_embedder"] = run_metaqa(
                data, work, base, HashEmbedder(embedder.dimension), "bench_metaqa_hash"
            )
        out["machine"]["loadavg_1m_at_end"] = round(os.getloadavg()[0], 2)
        (args.out / "load_metaqa.json").write_text(json.dumps(out, indent=2) + "\n")
        print(json.dumps({k: v for k, v in out["minilm"].items() if k != "report"}, indent=2))
        if not args.skip_webqsp:
            w = run_webqsp(data, work, base, embedder)
            (args.out / "load_webqsp.json").write_text(json.dumps(w, indent=2) + "\n")
            print(json.dumps(w, indent=2))
    finally:
        EmbeddedServer.for_dir(work).stop()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
