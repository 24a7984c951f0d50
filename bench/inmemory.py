"""In-memory retrieval baseline: the whole KG as numpy CSR, the same seeds / neighbourhood /
prizes / PCST code as the store path, no database.

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
import os
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # see bench_retrieval
    os.environ.setdefault(_v, "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from talent_core.metrics import answer_key, macro_average, retrieval_scores
from talent_core.models import Entity, Subgraph

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
    # undirected CSR: for node i, indptr[i]:indptr[i+1] index nbr / eid
    indptr: np.ndarray = field(init=False)
    nbr: np.ndarray = field(init=False)
    eid: np.ndarray = field(init=False)
    by_name: dict[str, list[int]] = field(init=False)
    node_emb: np.ndarray | None = None
    rel_emb: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.names)
        e = np.arange(len(self.src), dtype=np.int64)
        a = np.concatenate([self.src, self.dst]).astype(np.int64)
        b = np.concatenate([self.dst, self.src]).astype(np.int64)
        ee = np.concatenate([e, e])
        order = np.lexsort((ee, a))
        self.nbr = b[order].astype(np.int32)
        self.eid = ee[order].astype(np.int64)
        counts = np.bincount(a, minlength=n)
        self.indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=self.indptr[1:])
        self.by_name = {}
        for i, nm in enumerate(self.names):
            self.by_name.setdefault(answer_key(nm), []).append(i)

    @property
    def n_nodes(self) -> int:
        return len(self.names)

    @property
    def n_edges(self) -> int:
        return len(self.src)

    def degree(self, i: int) -> int:
        return int(self.indptr[i + 1] - self.indptr[i])


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


# --- a GraphStore-like facade over the CSR (what retrieve() reads) --------------------------


class InMemoryGraph:
    """The read side of the GraphStore Protocol over the in-memory KG (numpy only)."""

    dialect = "memory"

    def __init__(self, kg: KG):
        self.kg = kg
        self._rel_index = {r: i for i, r in enumerate(kg.rel_names)}
        self._row_cache: dict[int, list[tuple[bool, str, str, str]]] = {}

    def _entity(self, i: int) -> Entity:
        nm = self.kg.names[i]
        return Entity(id=nm, name=nm)

    def _idx(self, ids: Sequence[str]) -> list[int]:
        out = []
        for x in ids:
            hits = self.kg.by_name.get(answer_key(x))
            if hits:
                # ids are the exact names; normalised lookup then exact filter
                exact = [h for h in hits if self.kg.names[h] == x]
                out.extend(exact or hits[:1])
        return out

    def top_entities(self, vector, k: int):
        from talent_core.models import ScoredEntity

        sims = self.kg.node_emb @ np.asarray(vector, dtype=np.float32)
        k = min(k, sims.size)
        top = np.argpartition(-sims, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
        top = top[np.argsort(-sims[top], kind="stable")]
        return [ScoredEntity(entity=self._entity(int(i)), score=float(sims[i])) for i in top]

    def entities_by_name(self, names: Sequence[str]) -> list[Entity]:
        out, seen = [], set()
        for nm in names:
            for i in self.kg.by_name.get(answer_key(nm), []):
                if i not in seen:
                    seen.add(i)
                    out.append(self._entity(i))
        return out

    def entities_by_id(self, ids: Sequence[str]) -> list[Entity]:
        return [self._entity(i) for i in self._idx(ids)]

    def search_names(self, text: str, k: int) -> list[Entity]:
        return []  # no fulltext index in memory

    def _rows(self, i: int) -> list[tuple[bool, str, str, str]]:
        """Node i's incident edges as (stored direction is i -> m, rel, m id, m name), in the
        stores' key order (m id, rel, direction): what their 1-hop query returns."""
        rows = self._row_cache.get(i)
        if rows is None:
            kg = self.kg
            lo, hi = kg.indptr[i], kg.indptr[i + 1]
            rows = []
            for m, e in zip(kg.nbr[lo:hi].tolist(), kg.eid[lo:hi].tolist(), strict=True):
                out = bool(kg.src[e] == i and kg.dst[e] == m)
                rows.append((kg.names[m], kg.rel_names[kg.rel[e]], out, kg.names[m]))
            rows.sort()
            rows = [(out, rel, mid, mname) for mid, rel, out, mname in rows]
            self._row_cache[i] = rows
        return rows

    def _fetch_hop(self, frontier: list[str], limit: int):
        for fid in frontier:
            idx = self._idx([fid])
            if not idx:
                continue
            for out, rel, mid, mname in self._rows(idx[0])[:limit]:
                yield (fid, out, rel, mid, mname)

    def neighbourhood(
        self,
        seed_ids: Sequence[str],
        hops: int = 2,
        fanout: int = 50,
        max_nodes: int = 2000,
        max_edges: int = 5000,
    ) -> Subgraph:
        """The stores' own expansion code (`talent_core.store.expand`) over the CSR."""
        from talent_core.store.expand import expand, validate_caps

        validate_caps(hops, fanout, max_nodes, max_edges)
        seeds = self.entities_by_id(seed_ids)
        if not seeds:
            return Subgraph()
        return expand(seeds, self._fetch_hop, hops, fanout, max_nodes, max_edges)

    def entity_similarity(self, ids: Sequence[str], vector) -> dict[str, float]:
        idx = self._idx(ids)
        sims = self.kg.node_emb[idx] @ np.asarray(vector, dtype=np.float32)
        return {self.kg.names[i]: float(s) for i, s in zip(idx, sims, strict=True)}

    def relation_similarity(self, names: Sequence[str], vector) -> dict[str, float]:
        idx = [self._rel_index[n] for n in names if n in self._rel_index]
        sims = self.kg.rel_emb[idx] @ np.asarray(vector, dtype=np.float32)
        return {self.kg.rel_names[i]: float(s) for i, s in zip(idx, sims, strict=True)}


# --- questions -------------------------------------------------------------------------------

_BRACKET = re.compile(r"\[([^\]]+)\]")


@dataclass(frozen=True)
class Question:
    qid: str
    text: str  # brackets removed
    topic: list[str]
    answers: list[str]


def metaqa_questions(hop: int, n: int, seed: int = 0) -> list[Question]:
    path = DATA / "metaqa" / f"{hop}-hop" / "qa_dev.txt"
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            q, _, a = line.rstrip("\n").partition("\t")
            rows.append(
                Question(
                    qid=f"metaqa-{hop}hop-dev-{i}",
                    text=_BRACKET.sub(r"\1", q),
                    topic=_BRACKET.findall(q),
                    answers=[x for x in a.split("|") if x],
                )
            )
    rnd = random.Random(seed)
    return rnd.sample(rows, min(n, len(rows)))


def rog_questions(records: Sequence[dict]) -> list[Question]:
    return [
        Question(
            qid=r["id"],
            text=r["question"],
            topic=[x.strip() for x in r["q_entity"]],
            answers=[x.strip() for x in r["answer"]],
        )
        for r in records
    ]


# --- the no-graph baseline: vector top-k entities ---------------------------------------------


def vector_topk_names(kg: KG, qvec: np.ndarray, k: int) -> list[str]:
    sims = kg.node_emb @ qvec
    k = max(0, min(k, sims.size))
    if k == 0:
        return []
    top = np.argpartition(-sims, k - 1)[:k]
    return [kg.names[i] for i in top]


# --- evaluation ------------------------------------------------------------------------------


def evaluate(
    graph: InMemoryGraph,
    questions: Sequence[Question],
    encodings: Sequence,
    cfg,
    embedder,
    *,
    baseline: bool = True,
) -> dict:
    from talent_core.retrieval import retrieve

    rows, base_rows, timings = [], [], []
    truncated = 0
    for q, enc in zip(questions, encodings, strict=True):
        v = enc.vector
        cand = retrieve(q.text, graph, embedder, cfg, topic_entities=q.topic, encoding=enc)
        names = [n.name for n in cand.nodes]
        rows.append(retrieval_scores(names, q.answers))
        timings.append(cand.timings_ms)
        truncated += cand.truncated
        if baseline:
            size = len({answer_key(x) for x in names})
            base_rows.append(retrieval_scores(vector_topk_names(graph.kg, v, size), q.answers))
    out = {"candidate": macro_average(rows), "truncated_frac": truncated / max(len(rows), 1)}
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
            "p50": float(np.percentile(vals, 50)),
            "p95": float(np.percentile(vals, 95)),
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
    if args.dataset == "metaqa":
        kg = attach_embeddings(load_metaqa_kg(), emb, "metaqa")
        splits = {f"{h}-hop": (h, metaqa_questions(h, args.n, args.seed)) for h in args.hops}
    else:
        recs = load_rog_records()
        kg = attach_embeddings(load_rog_kg(recs), emb, "webqsp")
        splits = {"dev": (2, rog_questions(recs)[: args.n])}
    print(f"KG: {kg.n_nodes} entities, {kg.n_edges} triples ({time.perf_counter() - t0:.1f}s)")
    graph = InMemoryGraph(kg)
    extra = {}
    for kv in args.set:
        key, _, val = kv.partition("=")
        extra[key] = json.loads(val) if val[:1] in "0123456789-[{tf" else val

    results: dict = {"dataset": args.dataset, "kg": {"entities": kg.n_nodes, "triples": kg.n_edges}}
    for split, (hop, qs) in splits.items():
        encs = [question_encoding(emb, q.text, q.topic) for q in qs]
        expand = args.expand_hops or hop
        for rule in args.prizes:
            for k in args.k:
                cfg = RetrievalConfig(k_nodes=k, k_edges=k, hops=expand, prizes=rule, **extra)
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
