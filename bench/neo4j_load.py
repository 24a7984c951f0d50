"""Bench: MetaQA and WebQSP-evidence loads into Neo4j beside the embedded store, one run.

Neo4j is the server `make neo4j-up` started (its `.talent/neo4j.env`, or NEO4J_URI /
NEO4J_PASSWORD in the environment); Community has one user database, so every Neo4j run
clears it first (`Neo4jStore.clear`) and the last load (WebQSP) is what it holds after.
The embedded store gets a fresh temp data dir per run. Runs, in this order:

1. MetaQA `kb.txt` end to end with MiniLM: embedded (bulk path), then Neo4j (MERGE path);
   the vectors of the first are recorded.
2. The same with the recorded vectors from memory (the load excluding embedding): embedded,
   Neo4j, then a Neo4j reload of the same file (idempotent: nothing new to write).
3. WebQSP-evidence `dev.jsonl` as `rog` end to end on both, with the round-trip checks of
   bench_load.run_webqsp (CVT ids, dotted relations, 200 sampled triples).

Peak RSS: the loader process and the store's server (redis-server / the Neo4j JVM).
Writes bench/results/neo4j_load.json; timings are measurements, never assertions.

    python bench/neo4j_load.py [--data ../shared/data] [--skip-webqsp]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from bench_load import (  # noqa: E402
    CachedEmbedder,
    RecordingEmbedder,
    RssSampler,
    default_data,
    machine,
    metaqa_expected,
)
from benchio import load_average, write_json_atomic  # noqa: E402

from talent_core.config import Settings  # noqa: E402
from talent_core.loaders.api import load_path  # noqa: E402
from talent_core.loaders.embedders import make_embedder  # noqa: E402
from talent_core.store.base import ExpansionCaps  # noqa: E402
from talent_core.store.falkordb import FalkorDBStore  # noqa: E402
from talent_core.store.falkordb_server import EmbeddedServer  # noqa: E402
from talent_core.store.neo4j import Neo4jStore  # noqa: E402

log = logging.getLogger("bench.neo4j_load")
RESULTS = ROOT / "bench" / "results"
NEO4J_PID = ROOT / ".talent" / "neo4j" / "neo4j.pid"


def neo4j_pid() -> int | None:
    """The launcher JVM's pid (`make neo4j-up`), for its RSS; None for another server."""
    try:
        return int(NEO4J_PID.read_text().strip())
    except (OSError, ValueError):
        return None


def open_store(kind: str, work: Path, graph: str, settings: Settings):
    if kind == "neo4j":
        return Neo4jStore.from_settings(settings.model_copy(update={"store": "neo4j"}))
    return FalkorDBStore(work, graph, batch_size=settings.batch_size)


def server_pid(kind: str, store) -> int | None:
    return neo4j_pid() if kind == "neo4j" else store.server.pid


def timed_load(kind: str, src: Path, fmt: str, work: Path, graph: str, settings: Settings,
               embedder, fresh: bool = True) -> dict:  # fmt: skip
    """One load of `src` into a (cleared unless not `fresh`) store: wall, the report's
    split, counts, peak RSS, the machine load before and after."""
    store = open_store(kind, work, graph, settings)
    t_clear = time.perf_counter()
    if fresh:
        store.clear()
    clear_s = time.perf_counter() - t_clear
    store.ensure_schema(embedder.dimension)
    before = load_average()
    s2 = settings.model_copy(update={"data_dir": work / "side"})
    with RssSampler(lambda: server_pid(kind, store)) as rss:
        t = time.perf_counter()
        rep = load_path(src, fmt, store=store, embedder=embedder, settings=s2, progress=False)
        wall = time.perf_counter() - t
    st = store.stats()
    out = {
        "store": kind, "location": store.location, "load_average_before": before,
        "load_average_after": load_average(), "path": "bulk" if rep.bulk_batches else "merge",
        "batches": rep.batches, "clear_seconds": round(clear_s, 2) if fresh else None,
        "counts": {"entities": st.entities, "relations": st.relations, "triples": st.triples,
                   "entities_with_embedding": st.entities_with_embedding},
        "wall_seconds": round(wall, 2), "embed_seconds": round(rep.embed_seconds, 2),
        "store_seconds": round(rep.write_seconds, 2), "read_seconds": round(rep.read_seconds, 2),
        "store_seconds_by_call": {k: round(v, 2) for k, v in rep.store_seconds_by_call.items()},
        "triples_per_s_wall": round(rep.loaded / wall) if wall else None,
        "triples_per_s_excl_embed": round(rep.triples_per_s_excl_embed),
        "new_triples": rep.new_triples, "rows_read": rep.rows_read,
        "new_entities_embedded": rep.new_entities_embedded, "peak_rss": rss.peak,
        "side_output_file": rep.side_output_file,
    }  # fmt: skip
    out["_store"] = store
    return out


def webqsp_checks(store, src: Path) -> dict:
    """bench_load.run_webqsp's expected counts and round trips, on any store."""
    recs = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]
    triples = {tuple(x.strip() for x in t) for r in recs for t in r["graph"]}
    ents = {x for h, _, t in triples for x in (h, t)}
    rels = {r for _, r, _ in triples}
    st = store.stats()
    cvts = sorted(e for e in ents if e.startswith("m."))
    got = {e.id: e.name for e in store.entities_by_id(cvts)}
    dotted = sorted(r for r in rels if "." in r)
    rel_back = store.existing_relations(dotted)
    sample = random.Random(0).sample(sorted(triples), min(200, len(triples)))
    everything = ExpansionCaps(fanout=10_000, max_nodes=100_000, max_edges=100_000)
    edge_ok = 0
    for h, r, t in sample:
        sub = store.neighbourhood([h], 1, everything)
        edge_ok += any(e.src == h and e.rel == r and e.dst == t for e in sub.edges)
    cvt_ok = sum(1 for c in cvts if got.get(c) == c)
    return {
        "expected": {"triples": len(triples), "entities": len(ents), "relations": len(rels)},
        "cvt_nodes": len(cvts), "cvt_round_trip_ok": cvt_ok,
        "dotted_relations": len(dotted), "dotted_relations_round_trip_ok": len(rel_back),
        "sampled_triples": len(sample), "sampled_triples_found": edge_ok,
        "ok": st.triples == len(triples) and st.entities == len(ents)
        and st.relations == len(rels) and cvt_ok == len(cvts)
        and len(rel_back) == len(dotted) and edge_ok == len(sample),
    }  # fmt: skip


def finish(run: dict) -> dict:
    store = run.pop("_store")
    store.close()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--skip-webqsp", action="store_true")
    ap.add_argument("--skip-metaqa", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS / "neo4j_load.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    data = args.data or default_data()
    base = Settings(store="embedded")
    if not base.neo4j_uri:
        raise SystemExit("no NEO4J_URI: `make neo4j-up` (writes .talent/neo4j.env) first")
    work = Path(tempfile.mkdtemp(prefix="talent-neo4j-bench-"))
    out: dict = {"machine": machine(), "neo4j": {"uri": base.neo4j_uri,
                 "database": base.neo4j_database, "heap": os.environ.get("NEO4J_HEAP", "1g")},
                 "settings": {"batch_size": base.batch_size,
                              "embedding_model": base.embedding_model}}  # fmt: skip
    runs = out["runs"] = {}

    def record(name: str, run: dict) -> None:
        runs[name] = finish(run)
        log.warning("%s: %s", name, {k: runs[name][k] for k in
                    ("wall_seconds", "embed_seconds", "store_seconds", "counts")})  # fmt: skip
        write_json_atomic(args.out, out)  # after each run: a stopped bench keeps what it has

    try:
        t = time.perf_counter()
        embedder = make_embedder(base, "fp32")
        out["model_load_seconds"] = round(time.perf_counter() - t, 2)
        if not args.skip_metaqa:
            kb = data / "metaqa" / "kb.txt"
            expected = out["metaqa_expected"] = metaqa_expected(kb)
            rec = RecordingEmbedder(embedder)
            record(
                "metaqa_embedded_minilm",
                timed_load("embedded", kb, "metaqa", work / "e1", "m", base, rec),
            )
            record(
                "metaqa_neo4j_minilm",
                timed_load("neo4j", kb, "metaqa", work / "n", "m", base, embedder),
            )
            cached = CachedEmbedder(rec.table, embedder.dimension)
            record(
                "metaqa_embedded_cached",
                timed_load("embedded", kb, "metaqa", work / "e2", "m", base, cached),
            )
            EmbeddedServer.for_dir(work / "e1").stop()
            record(
                "metaqa_neo4j_cached",
                timed_load("neo4j", kb, "metaqa", work / "n", "m", base, cached),
            )
            record(
                "metaqa_neo4j_reload",
                timed_load("neo4j", kb, "metaqa", work / "n", "m", base, cached, fresh=False),
            )
            EmbeddedServer.for_dir(work / "e2").stop()
            out["metaqa_ok"] = all(r["counts"][k] == expected[k] for n, r in runs.items()
                                   if n.startswith("metaqa") for k in expected)  # fmt: skip
        if not args.skip_webqsp:
            src = data / "webqsp-evidence" / "dev.jsonl"
            for kind in ("embedded", "neo4j"):
                run = timed_load(kind, src, "rog", work / f"w{kind}", "w", base, embedder)
                run["checks"] = webqsp_checks(run["_store"], src)
                record(f"webqsp_{kind}", run)
            EmbeddedServer.for_dir(work / "wembedded").stop()
        out["machine"]["loadavg_1m_at_end"] = round(os.getloadavg()[0], 2)
        out["command"] = "python bench/neo4j_load.py " + " ".join(sys.argv[1:])
        write_json_atomic(args.out, out)
        print(json.dumps({n: {k: r[k] for k in ("wall_seconds", "embed_seconds", "store_seconds",
                          "triples_per_s_wall")} for n, r in runs.items()}, indent=2))  # fmt: skip
    finally:
        for d in ("e1", "e2", "wembedded"):
            EmbeddedServer.for_dir(work / d).stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
