"""Bench: vector index sanity on MetaQA.

For a seeded random sample of 1,000 MetaQA entity names, embed the name with the project
embedder and query the store's entity vector index through `GraphStore.top_entities` (the
code path retrieval uses). A hit: the entity itself is ranked first, "identical names
aside": entities ranked above it whose names are the same text up to case and spacing
(MiniLM is uncased, so `Heat` the film and `heat` the tag have one embedding) do not count
against it. The strict figure (itself exactly first) is reported too.

Needs MetaQA loaded with the real embedder in the graph given by --data-dir / --graph
(`bench/bench_load.py --keep DIR` leaves it in graph `bench_metaqa`); with --load, loads it
first into a fresh graph. Writes bench/results/vector_sanity.json. Goal: >= 99 %.

    python bench/bench_vector_sanity.py --data-dir DIR [--graph bench_metaqa] [--load]
    NEO4J_URI=bolt://... python bench/bench_vector_sanity.py --store neo4j --load
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from talent_core.config import Settings
from talent_core.loaders.api import load_path
from talent_core.loaders.embedders import make_embedder
from talent_core.store import open_store

RESULTS = ROOT / "bench" / "results"


def norm(s: str) -> str:
    return " ".join(s.lower().split())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="shared data dir")
    ap.add_argument("--data-dir", type=Path, default=None, help="store data dir")
    ap.add_argument("--graph", default="bench_metaqa")
    ap.add_argument("--store", choices=["embedded", "neo4j"], default="embedded",
                    help="neo4j: NEO4J_URI/NEO4J_USER/NEO4J_PASSWORD from the environment")
    ap.add_argument("--load", action="store_true", help="load MetaQA first (fresh graph)")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS / "vector_sanity.json")
    args = ap.parse_args()

    data = args.data
    if data is None:
        for cand in (ROOT.parent / "shared" / "data", Path("/work/shared/data")):
            if (cand / "metaqa" / "kb.txt").is_file():
                data = cand
                break
    if data is None:
        raise SystemExit("no ../shared/data/metaqa/kb.txt; pass --data")
    kb = data / "metaqa" / "kb.txt"
    work = args.data_dir or Path(tempfile.mkdtemp(prefix="talent-vsanity-"))
    settings = Settings(data_dir=work, graph_name=args.graph, store=args.store)
    embedder = make_embedder(settings)
    store = open_store(settings)
    try:
        if args.load:
            store.clear()
            load_path(kb, "metaqa", store=store, embedder=embedder, settings=settings)
        st = store.stats()
        if st.entities_with_embedding == 0:
            raise SystemExit(f"graph {args.graph!r} in {work} is empty: pass --load")

        with open(kb, encoding="utf-8") as f:
            names = sorted({p for line in f for p in line.rstrip("\n").split("|")[::2]})
        sample = random.Random(args.seed).sample(names, args.n)
        vecs = embedder.encode(sample)
        hits = strict = 0
        misses = []
        t = time.perf_counter()
        for name, vec in zip(sample, vecs, strict=True):
            top = store.top_entities(vec, args.k)
            ids = [s.entity.id for s in top]
            if ids and ids[0] == name:
                strict += 1
                hits += 1
                continue
            rank = ids.index(name) if name in ids else None
            above = top[:rank] if rank is not None else top
            if rank is not None and all(norm(s.entity.name) == norm(name) for s in above):
                hits += 1
            else:
                misses.append({"name": name, "rank": rank,
                               "top": [(s.entity.name, round(s.score, 4)) for s in top[:3]]})
        query_seconds = time.perf_counter() - t
        out = {
            "store": st.store,
            "entities": st.entities,
            "sample": args.n,
            "seed": args.seed,
            "k": args.k,
            "hit_rate": hits / args.n,
            "strict_top1_rate": strict / args.n,
            "goal": 0.99,
            "ok": hits / args.n >= 0.99,
            "query_ms_mean": round(1000 * query_seconds / args.n, 2),
            "embedding_model": settings.embedding_model,
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "misses": misses[:50],
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        print(json.dumps({k: v for k, v in out.items() if k != "misses"}, indent=2))
    finally:
        store.close()
        if args.store == "embedded":
            from talent_core.store.falkordb_server import EmbeddedServer

            EmbeddedServer.for_dir(work).stop()
        if args.data_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
