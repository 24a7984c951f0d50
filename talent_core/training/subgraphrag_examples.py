"""SubgraphRAG scorer training's examples (`training.subgraphrag` trains on them): each
question's anchors, neighbourhood and seeds exactly as `retrieve` finds them (same
`RetrievalConfig`: hops, fan-out caps, seed settings), the features of
`subgraphrag.store_features` (the store's vectors, kept once per entity in a shared table)
and the pseudo-labels of `subgraphrag.pseudo_labels`; and their cache, tables and examples
in one npz (DIR/cache/examples.npz)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from talent_core.embedding import Embedder
from talent_core.errors import ScorerError
from talent_core.questions import QARecord
from talent_core.retrieval.candidate import question_encoding
from talent_core.retrieval.config import RetrievalConfig
from talent_core.retrieval.neighbourhood import neighbourhood, region_of
from talent_core.retrieval.seeds import add_vector_seeds, text_seeds
from talent_core.retrieval.subgraphrag import NON_TEXT, pseudo_labels, structure_features
from talent_core.store.base import GraphReader
from talent_core.text import answer_key

log = logging.getLogger(__name__)


class ScorerTrainConfig(BaseModel):
    """Knobs of `talent train subgraphrag` (paper: Adam lr 1e-3, DDE 2 + 2, hidden = d)."""

    epochs: int = Field(30, ge=1, description="most epochs")
    patience: int = Field(5, ge=1, description="stop after this many epochs without a better "
                          "validation answer recall@100 (paper: 10)")
    lr: float = Field(1e-3, gt=0, description="Adam learning rate (paper: 1e-3)")
    rounds: int = Field(2, ge=0, le=8, description="DDE forward rounds (paper: 2)")
    reverse_rounds: int = Field(2, ge=0, le=8, description="DDE reverse rounds (paper: 2)")
    topic_pe: bool = Field(True, description="the topic one-hot in the entity features "
                           "(paper: on)")
    undirected_rounds: int = Field(0, ge=0, le=8, description="DDE rounds over the triples "
                                   "taken both ways, after the directed ones (paper: 0; a "
                                   "KG storing each fact from one side, as MetaQA: 3)")
    hidden: int | None = Field(None, ge=1, description="MLP hidden size (default: the "
                               "embedding dimension, as the paper)")
    seed: int = Field(42, description="random seed (init, order, validation split)")
    max_minutes: float | None = Field(None, gt=0, description="stop before an epoch that "
                                      "would end after this many minutes of training")
    select_k: int = Field(100, ge=1, description="the validation answer recall at this K "
                          "(ties: triple recall) selects the checkpoint")
    val_share: float = Field(0.1, gt=0, lt=1, description="without --val: the share of "
                             "training questions held out for validation")

    def identity(self) -> dict[str, Any]:
        """What a resumed run must agree on (undirected_rounds only when set, so that the
        states of runs without it stay resumable)."""
        out = self.model_dump(exclude={"epochs", "patience", "max_minutes"})
        if not out["undirected_rounds"]:
            del out["undirected_rounds"]
        return out


# --- examples ------------------------------------------------------------------------------


@dataclass
class Example:
    """One question's training / validation arrays (entity and relation ids index the
    shared tables)."""

    id: str
    question: np.ndarray  # (d,) float32
    entities: np.ndarray  # (N,) int64 rows of the entity table
    non_text: np.ndarray  # (N,) bool
    structure: np.ndarray  # (N, S) float32
    head: np.ndarray  # (E,) int64, local
    rel: np.ndarray  # (E,) int64 rows of the relation table
    tail: np.ndarray  # (E,) int64, local
    labels: np.ndarray  # (E,) bool
    answers: np.ndarray  # (A,) int64 local entities that are gold answers
    groups: np.ndarray  # (A,) int64 which gold name each answer entity matches
    n_gold: int  # distinct gold answer names
    kind: str = "none"  # pseudo-label kind: directed | undirected | none
    truncated: bool = False

    @property
    def trainable(self) -> bool:
        return bool(self.labels.any())


@dataclass
class Tables:
    """Entity / relation vectors shared by every example (each fetched from the store once)."""

    dim: int
    entity_index: dict[str, int] = field(default_factory=dict)
    entity_rows: list[np.ndarray] = field(default_factory=list)
    relation_index: dict[str, int] = field(default_factory=dict)
    relation_rows: list[np.ndarray] = field(default_factory=list)

    def entities(self, store: GraphReader, ids: Sequence[str]) -> np.ndarray:
        """Rows of `ids` (-1: no stored vector), fetching the new ones."""
        return self._rows(ids, self.entity_index, self.entity_rows, store.entity_vectors,
                          missing_zeros=False)

    def relations(self, store: GraphReader, names: Sequence[str]) -> np.ndarray:
        """Rows of `names` (no stored vector: a zero row, warned), fetching the new ones."""
        return self._rows(names, self.relation_index, self.relation_rows,
                          store.relation_vectors, missing_zeros=True)

    def _rows(self, keys: Sequence[str], index: dict[str, int], rows: list[np.ndarray],
              fetch: Callable[[list[str]], dict[str, Any]], missing_zeros: bool) -> np.ndarray:
        new = [k for k in dict.fromkeys(keys) if k not in index]
        if new:
            got = fetch(new)
            for k in new:
                v = got.get(k)
                if v is None and not missing_zeros:
                    index[k] = -1
                    continue
                if v is None:
                    log.warning("relation %r has no stored vector: zeros", k)
                    v = np.zeros(self.dim, dtype=np.float32)
                self._check(v)
                index[k] = len(rows)
                rows.append(np.asarray(v, dtype=np.float32))
        return np.array([index[k] for k in keys], dtype=np.int64)

    def _check(self, v: np.ndarray) -> None:
        if v.size != self.dim:
            raise ScorerError(f"the store's vectors are {v.size}-d but the embedder's "
                              f"{self.dim}-d: use the embedder the KG was loaded with")

    def _matrix(self, rows: list[np.ndarray]) -> np.ndarray:
        return np.stack(rows) if rows else np.zeros((1, self.dim), np.float32)

    def entity_matrix(self) -> np.ndarray:
        """(M, d); one zero row when empty (text-less entities index row 0, then masked)."""
        return self._matrix(self.entity_rows)

    def relation_matrix(self) -> np.ndarray:
        return self._matrix(self.relation_rows)


def seed_question(question: str, topics: Sequence[str], store: GraphReader,
                  embedder: Embedder, cfg: RetrievalConfig):
    """(SeedSet, QuestionEncoding) exactly as `candidate.retrieve` finds them."""
    seeds = text_seeds(question, store, topics or None, name_match=cfg.name_match,
                       fulltext_k=cfg.fulltext_k, anchors_from_fulltext=cfg.vector_anchors,
                       stopwords=cfg.stopwords)
    enc = question_encoding(embedder, question,
                            [s.name for s in seeds.anchors()] + list(topics or []))
    add_vector_seeds(seeds, store, enc.vector, cfg.k_seed, cfg.vector_anchors)
    return seeds, enc


def build_example(rec: QARecord, store: GraphReader, embedder: Embedder, cfg: RetrievalConfig,
                  tables: Tables, train: ScorerTrainConfig) -> Example:
    seeds, enc = seed_question(rec.question, rec.topic_entities, store, embedder, cfg)
    anchors = seeds.anchors()
    sub = neighbourhood(store, [a.id for a in anchors], cfg.hops, cfg.caps())
    g = region_of(sub, anchors)
    q = np.asarray(enc.vector, dtype=np.float32).ravel()
    if q.size != tables.dim:
        raise ScorerError(f"question vectors are {q.size}-d, expected {tables.dim}")
    rows = tables.entities(store, g.ids)
    non_text = (rows < 0) | np.array([bool(NON_TEXT.match(n)) for n in g.names], dtype=bool)
    rel = tables.relations(store, g.relations)[g.rel] if len(g.rel) else g.rel
    gold = list(dict.fromkeys(k for k in (answer_key(a) for a in
                                          [*rec.answers, *rec.answer_entities]) if k))
    gid = {k: i for i, k in enumerate(gold)}
    hits = [(j, gid[k]) for j, k in enumerate(answer_key(n) for n in g.names) if k in gid]
    answers = np.array([j for j, _ in hits], dtype=np.int64)
    labels, kind = pseudo_labels(g.head, g.tail, g.n, np.flatnonzero(g.topic).tolist(),
                                 answers.tolist())
    return Example(
        id=rec.id, question=q, entities=np.maximum(rows, 0), non_text=non_text,
        structure=structure_features(g, train.rounds, train.reverse_rounds, train.topic_pe,
                                     train.undirected_rounds),
        head=g.head, rel=rel, tail=g.tail, labels=labels, answers=answers,
        groups=np.array([k for _, k in hits], dtype=np.int64), n_gold=len(gold), kind=kind,
        truncated=g.truncated,
    )


def build_examples(records: Sequence[QARecord], store: GraphReader, embedder: Embedder,
                   cfg: RetrievalConfig, tables: Tables, train: ScorerTrainConfig,
                   desc: str = "examples", progress: bool = True) -> list[Example]:
    return [build_example(r, store, embedder, cfg, tables, train)
            for r in tqdm(records, desc=desc, unit="q", disable=not progress)]


# --- the cache: tables + examples in one npz ----------------------------------------------

_ARRAYS = ("entities", "non_text", "structure", "head", "rel", "tail", "labels", "answers",
           "groups")


def save_cache(path: Path, key: str, tables: Tables, splits: dict[str, list[Example]]) -> None:
    data: dict[str, np.ndarray] = {"entity_table": tables.entity_matrix(),
                                   "relation_table": tables.relation_matrix()}
    meta: dict[str, Any] = {"key": key, "dim": tables.dim, "splits": {}}
    for name, exs in splits.items():
        meta["splits"][name] = [{"id": e.id, "n_gold": e.n_gold, "kind": e.kind,
                                 "truncated": e.truncated} for e in exs]
        data[f"{name}.question"] = (np.stack([e.question for e in exs]) if exs
                                    else np.zeros((0, tables.dim), np.float32))
        for a in _ARRAYS:
            parts = [getattr(e, a) for e in exs]
            data[f"{name}.{a}.len"] = np.array([len(p) for p in parts], dtype=np.int64)
            data[f"{name}.{a}"] = (np.concatenate(parts) if parts else np.zeros(0))
    data["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **data)
    tmp.replace(path)


Loaded = tuple[np.ndarray, np.ndarray, dict[str, list[Example]]]


def load_cache(path: Path, key: str) -> Loaded | None:
    """(entity table, relation table, splits) if `path` holds the cache for `key`."""
    if not path.is_file():
        return None
    with np.load(path) as z:
        meta = json.loads(bytes(z["meta"]).decode("utf-8"))
        if meta.get("key") != key:
            log.info("example cache %s is for other data or settings: rebuilding", path)
            return None
        splits: dict[str, list[Example]] = {}
        for name, rows in meta["splits"].items():
            cols = {}
            for a in _ARRAYS:
                flat, lens = z[f"{name}.{a}"], z[f"{name}.{a}.len"]
                cols[a] = np.split(flat, np.cumsum(lens)[:-1]) if len(lens) else []
            qs = z[f"{name}.question"]
            splits[name] = [
                Example(id=r["id"], question=qs[i], n_gold=r["n_gold"], kind=r["kind"],
                        truncated=r["truncated"], **{a: cols[a][i] for a in _ARRAYS})
                for i, r in enumerate(rows)
            ]
        return z["entity_table"], z["relation_table"], splits
