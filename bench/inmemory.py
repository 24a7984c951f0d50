"""In-memory retrieval baseline: the whole KG in `talent_core.store.memory.MemoryStore`, the
same seeds / neighbourhood / prizes / PCST code as the store path, no database.

Used (1) as the latency baseline the store is compared with (`ratio = store / in-memory`) and
(2) as the design playground for the prize rules (`python bench/inmemory.py --help`).

Embeddings of every entity name and relation text are computed once with the project
embedder and cached under `.talent/cache/` (gitignored), keyed by a hash of the texts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import retrieval_bench_setup  # noqa: E402  (thread settings before numpy)

retrieval_bench_setup()

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from talent_core.evaluation.latency import percentile
from talent_core.evaluation.metrics import macro_average, retrieval_scores
from talent_core.models import Edge
from talent_core.questions import FORMAT_STOPWORDS, QARecord, read_questions
from talent_core.store.memory import MemoryStore
from talent_core.text import answer_key

log = logging.getLogger("bench.inmemory")

DATA = ROOT.parent / "shared" / "data"
CACHE = ROOT / ".talent" / "cache"


# --- the KG in memory ------------------------------------------------------------------------


@dataclass
class KG:
    names: list[str]  # entity i's name (= its id for MetaQA / RoG)
    rel_names: list[str]
    src: np.ndarray  # (E,) int32
    dst: np.ndarray
    rel: np.ndarray  # (E,) int32 index into rel_names
    node_emb: np.ndarray | None = None
    rel_emb: np.ndarray | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.names)

    @property
    def n_edges(self) -> int:
        return len(self.src)


def fill(store, kg: KG, batch: int = 5000) -> None:
    """Write the KG (names as ids, its vectors) into `store` through the store API: into an
    empty embedded FalkorDB graph with its bulk session (GRAPH.BULK, as `talent load` does),
    else with the MERGE statements."""
    make = getattr(store, "bulk_session", None)
    session = make(int(kg.node_emb.shape[1]), kg.n_nodes + 1) if make else None
    if session is not None and _bulk_fill(session, kg):
        return
    rows = list(zip(kg.names, kg.names, kg.node_emb.tolist(), strict=True))
    for i in range(0, len(rows), batch):
        store.upsert_entities(rows[i : i + batch])
    store.upsert_relations(list(zip(kg.rel_names, kg.rel_emb.tolist(), strict=True)))
    edges = [
        Edge(src=kg.names[s], rel=kg.rel_names[r], dst=kg.names[d])
        for s, r, d in zip(kg.src.tolist(), kg.rel.tolist(), kg.dst.tolist(), strict=True)
    ]
    for i in range(0, len(edges), batch):
        store.upsert_triples(edges[i : i + batch])


def _bulk_fill(session, kg: KG, nodes: int = 50_000, edges: int = 200_000) -> bool:
    """Entities (and the relations, first) in chunks, then the edges: True when the bulk
    session wrote everything."""
    from tqdm.auto import tqdm

    names = kg.names
    relations = list(zip(kg.rel_names, kg.rel_emb, strict=True))
    bar = tqdm(total=kg.n_nodes + kg.n_edges, desc="bulk fill", unit="row", mininterval=2)
    for i in range(0, kg.n_nodes, nodes):
        rows = [(n, n, v) for n, v in zip(names[i : i + nodes], kg.node_emb[i : i + nodes],
                                          strict=True)]
        if not session.write(rows, relations if i == 0 else [], []):
            return False
        bar.update(len(rows))
    src, rel, dst = kg.src.tolist(), kg.rel.tolist(), kg.dst.tolist()
    for i in range(0, kg.n_edges, edges):
        chunk = [Edge(src=names[s], rel=kg.rel_names[r], dst=names[d]) for s, r, d in
                 zip(src[i : i + edges], rel[i : i + edges], dst[i : i + edges], strict=True)]
        if not session.write([], [], chunk):
            return False
        bar.update(len(chunk))
    bar.close()
    return True


def memory_store(kg: KG) -> MemoryStore:
    store = MemoryStore()
    fill(store, kg)
    return store


def kg_from_triples(triples: Sequence[tuple[str, str, str]]) -> KG:
    ids: dict[str, int] = {}
    rels: dict[str, int] = {}
    seen: set[tuple[int, int, int]] = set()
    src, dst, rel = [], [], []
    for h, r, t in triples:
        # as the loaders do (the stores reject keys with surrounding whitespace)
        h, r, t = h.strip(), r.strip(), t.strip()
        if not (h and r and t):
            continue
        hi = ids.setdefault(h, len(ids))
        ti = ids.setdefault(t, len(ids))
        ri = rels.setdefault(r, len(rels))
        if (hi, ri, ti) in seen:
            continue
        seen.add((hi, ri, ti))
        src.append(hi)
        dst.append(ti)
        rel.append(ri)
    return KG(
        names=list(ids),
        rel_names=list(rels),
        src=np.array(src, dtype=np.int32),
        dst=np.array(dst, dtype=np.int32),
        rel=np.array(rel, dtype=np.int32),
    )


def load_metaqa_kg(path: Path = DATA / "metaqa" / "kb.txt") -> KG:
    triples = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) == 3 and all(parts):
                triples.append((parts[0], parts[1], parts[2]))
    return kg_from_triples(triples)


def load_rog_records(path: Path = DATA / "webqsp-evidence" / "dev.jsonl") -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_rog_kg(records: Sequence[dict]) -> KG:
    return kg_from_triples([tuple(t) for r in records for t in r["graph"]])


def _text_hash(texts: Sequence[str], model: str) -> str:
    h = hashlib.sha1(model.encode())
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def embed_cached(texts: Sequence[str], embedder, tag: str) -> np.ndarray:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{tag}-{_text_hash(texts, embedder.model_name)}.npy"
    if path.exists():
        return np.load(path)
    t0 = time.perf_counter()
    vecs = embedder.encode(list(texts), progress=len(texts) > 1000)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vecs)
    tmp.replace(path)
    log.info("embedded %d texts for %s in %.1fs", len(texts), tag, time.perf_counter() - t0)
    return vecs


def attach_embeddings(kg: KG, embedder, tag: str) -> KG:
    kg.node_emb = embed_cached(kg.names, embedder, f"{tag}-entities")
    kg.rel_emb = embed_cached(kg.rel_names, embedder, f"{tag}-relations")
    return kg


# --- questions -------------------------------------------------------------------------------

def metaqa_questions(hop: int, n: int, seed: int = 0) -> list[QARecord]:
    """A seeded sample of the MetaQA dev split, read by the product's question reader."""
    rows = list(read_questions(DATA / "metaqa" / f"{hop}-hop" / "qa_dev.txt", "metaqa"))
    rnd = random.Random(seed)
    return rnd.sample(rows, min(n, len(rows)))


def rog_questions(records: Sequence[dict]) -> list[QARecord]:
    return [
        QARecord(
            id=r["id"],
            question=r["question"],
            topic_entities=[x.strip() for x in r["q_entity"]],
            answers=[x.strip() for x in r["answer"]],
        )
        for r in records
    ]


# --- evaluation ------------------------------------------------------------------------------


def evaluate(
    graph: MemoryStore,
    questions: Sequence[QARecord],
    encodings: Sequence,
    cfg,
    embedder,
    *,
    baseline: bool = True,
) -> dict:
    from talent_core.evaluation.runner import score_answer
    from talent_core.evaluation.summary import summarise
    from talent_core.models import Answer
    from talent_core.retrieval import retrieve

    rows, base_rows, timings = [], [], []
    for q, enc in zip(questions, encodings, strict=True):
        v = enc.vector
        cand = retrieve(q.question, graph, embedder, cfg, q.topic_entities, encoding=enc)
        rows.append(score_answer(q, Answer(question=q.question, candidate=cand,
                                           timings_ms=cand.timings_ms)))
        timings.append(cand.timings_ms)
        if baseline:
            size = len({answer_key(n.name) for n in cand.nodes})
            hits = graph.top_entities(v, size) if size else []
            base_rows.append(retrieval_scores([h.entity.name for h in hits], q.answers))
    summary = summarise(rows)
    out = {"candidate": summary["candidate"],
           "truncated_frac": summary["truncated"] / max(len(rows), 1)}
    if baseline:
        out["vector_topk_same_size"] = macro_average(base_rows)
    out["timings_ms"] = _percentiles(timings)
    return out


def _percentiles(timings: Sequence[dict[str, float]]) -> dict[str, dict[str, float]]:
    keys = sorted({k for t in timings for k in t})
    out = {}
    for k in keys:
        vals = np.array([t[k] for t in timings if k in t])
        out[k] = {
            "p50": float(percentile(vals, 50)),  # type: ignore[arg-type]
            "p95": float(percentile(vals, 95)),  # type: ignore[arg-type]
            "mean": float(vals.mean()),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=["metaqa", "webqsp"], default="metaqa")
    ap.add_argument("--hops", type=int, nargs="*", default=[1, 2, 3], help="MetaQA splits")
    ap.add_argument("--n", type=int, default=300, help="questions per split")
    ap.add_argument("--seed", type=int, default=0, help="sample seed (0: the reported sample)")
    ap.add_argument("--k", type=int, nargs="*", default=[3, 5, 10])
    ap.add_argument("--prizes", nargs="*", default=["paper", "default"])
    ap.add_argument("--expand-hops", type=int, default=0, help="0 = the split's hop count")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--set", nargs="*", default=[], help="extra RetrievalConfig key=value")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    from talent_core.embedding import get_embedder
    from talent_core.retrieval import RetrievalConfig, question_encoding

    emb = get_embedder()
    t0 = time.perf_counter()
    fmt = "metaqa" if args.dataset == "metaqa" else "rog"  # the question format
    if args.dataset == "metaqa":
        kg = attach_embeddings(load_metaqa_kg(), emb, "metaqa")
        splits = {f"{h}-hop": (h, metaqa_questions(h, args.n, args.seed)) for h in args.hops}
    else:
        recs = load_rog_records()
        kg = attach_embeddings(load_rog_kg(recs), emb, "webqsp")
        splits = {"dev": (2, rog_questions(recs)[: args.n])}
    print(f"KG: {kg.n_nodes} entities, {kg.n_edges} triples ({time.perf_counter() - t0:.1f}s)")
    graph = memory_store(kg)
    extra = {}
    for kv in args.set:
        key, _, val = kv.partition("=")
        extra[key] = json.loads(val) if val[:1] in "0123456789-[{tf" else val

    results: dict = {"dataset": args.dataset, "kg": {"entities": kg.n_nodes, "triples": kg.n_edges}}
    for split, (hop, qs) in splits.items():
        encs = [question_encoding(emb, q.question, q.topic_entities) for q in qs]
        expand = args.expand_hops or hop
        for rule in args.prizes:
            for k in args.k:
                cfg = RetrievalConfig(k_nodes=k, k_edges=k, beam=k, hops=expand, prizes=rule,
                                      stopwords=list(FORMAT_STOPWORDS[fmt]), **extra)
                t1 = time.perf_counter()
                r = evaluate(graph, qs, encs, cfg, emb, baseline=not args.no_baseline)
                r["config"] = cfg.model_dump()
                results.setdefault(split, {}).setdefault(rule, {})[f"k={k}"] = r
                c = r["candidate"]
                b = r.get("vector_topk_same_size", {})
                print(
                    f"{split:6s} {rule:8s} k={k:<2d} hops={expand} n={int(c['n'])} "
                    f"hit={c['hit']:.3f} rec={c['recall']:.3f} prec={c['precision']:.3f} "
                    f"f1={c['f1']:.3f} |S|={c['size']:.1f} trunc={r['truncated_frac']:.2f} "
                    f"| vec hit={b.get('hit', float('nan')):.3f} "
                    f"p95={r['timings_ms'].get('total', {}).get('p95', 0):.1f}ms "
                    f"({time.perf_counter() - t1:.0f}s)",
                    flush=True,
                )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
