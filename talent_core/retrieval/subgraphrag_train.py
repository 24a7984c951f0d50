"""Training SubgraphRAG's triple scorer (`talent train subgraphrag`), on CPU in minutes.

    QUESTIONS (MetaQA / RoG) -> seeds -> neighbourhood (store) -> features + pseudo-labels
    (built once, cached in DIR/cache) -> BCE + Adam, one question per step -> DIR/scorer.*

* Examples: each question's anchors, neighbourhood and seeds exactly as `retrieve` finds
  them (same `RetrievalConfig`: hops, fan-out caps, seed settings), the features of
  `subgraphrag.store_features` (the store's vectors, kept once per entity in a shared
  table) and the pseudo-labels of `subgraphrag.pseudo_labels`. Questions without a
  positive triple are kept for validation metrics but never trained on (the paper's
  `skip_no_path`).
* Loss: `binary_cross_entropy_with_logits` over all triples of one question, mean; Adam.
* Selection: after every epoch the validation questions (`--val`, else a seeded
  `val_share` of the training questions) are scored; the best epoch by answer recall at
  K = 100 (ties: triple recall at 100) is written to DIR as `scorer.safetensors` +
  `scorer.json`; training stops after `patience` epochs without improvement, at `epochs`,
  or before an epoch that would overrun `max_minutes`.
* Metrics at K in (50, 100, 200), means over validation questions:
  `ans_recall@K`   the paper's: answers among the kept triples' entities / answers in the
                   neighbourhood (questions with an answer in it);
  `triple_recall@K` pseudo-positive triples among the top K / positives (questions with one);
  `gold_recall@K`, `hit@K`: gold answers (normalised names) among the kept entities / all
                   gold answers, and whether any is there (every question).
* Resumable: `DIR/train_state.pt` (model, optimiser, epoch, best, RNG states, history) is
  written after every epoch; a rerun with the same data and configuration continues from
  it, another configuration is refused (`--no-resume` starts over). The example cache is
  reused when the question files, store, embedder and retrieval settings are the same.
"""

from __future__ import annotations

import hashlib
import json
import logging
import resource
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from pydantic import BaseModel, Field

from talent_core.cli_options import model_options, with_options
from talent_core.embedding import Embedder
from talent_core.questions import QARecord
from talent_core.retrieval.config import RetrievalConfig
from talent_core.retrieval.neighbourhood import neighbourhood, region_of
from talent_core.retrieval.subgraphrag import (
    NON_TEXT,
    ScorerError,
    TripleScorer,
    canonical_embedder,
    pseudo_labels,
    save_scorer,
    structure_features,
    top_k,
)
from talent_core.store.base import GraphReader
from talent_core.text import answer_key

log = logging.getLogger(__name__)

KS = (50, 100, 200)
CACHE_VERSION = 1
STATE_FILE = "train_state.pt"
# the RetrievalConfig fields that shape a training example (the others are other methods')
RETRIEVAL_FIELDS = ("hops", "fanout", "max_nodes", "max_edges", "k_seed", "vector_anchors",
                    "name_match", "fulltext_k")


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
        """What a resumed run must agree on."""
        return self.model_dump(exclude={"epochs", "patience", "max_minutes"})


class ResumeMismatch(ValueError):
    """DIR holds a training state of another configuration or data."""


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
        new = [i for i in dict.fromkeys(ids) if i not in self.entity_index]
        if new:
            got = store.entity_vectors(new)
            for i in new:
                v = got.get(i)
                if v is None:
                    self.entity_index[i] = -1
                else:
                    self._check(v)
                    self.entity_index[i] = len(self.entity_rows)
                    self.entity_rows.append(np.asarray(v, dtype=np.float32))
        return np.array([self.entity_index[i] for i in ids], dtype=np.int64)

    def relations(self, store: GraphReader, names: Sequence[str]) -> np.ndarray:
        new = [r for r in dict.fromkeys(names) if r not in self.relation_index]
        if new:
            got = store.relation_vectors(new)
            for r in new:
                v = got.get(r)
                if v is None:
                    log.warning("relation %r has no stored vector: zeros", r)
                    v = np.zeros(self.dim, dtype=np.float32)
                self._check(v)
                self.relation_index[r] = len(self.relation_rows)
                self.relation_rows.append(np.asarray(v, dtype=np.float32))
        return np.array([self.relation_index[r] for r in names], dtype=np.int64)

    def _check(self, v: np.ndarray) -> None:
        if v.size != self.dim:
            raise ScorerError(f"the store's vectors are {v.size}-d but the embedder's "
                              f"{self.dim}-d: use the embedder the KG was loaded with")

    def entity_matrix(self) -> np.ndarray:
        """(M, d); one zero row when empty (text-less entities index row 0, then masked)."""
        return (np.stack(self.entity_rows) if self.entity_rows
                else np.zeros((1, self.dim), np.float32))

    def relation_matrix(self) -> np.ndarray:
        return (np.stack(self.relation_rows) if self.relation_rows
                else np.zeros((1, self.dim), np.float32))


def seed_question(question: str, topics: Sequence[str], store: GraphReader,
                  embedder: Embedder, cfg: RetrievalConfig):
    """(SeedSet, QuestionEncoding) exactly as `candidate.retrieve` finds them."""
    from talent_core.retrieval.candidate import question_encoding
    from talent_core.retrieval.seeds import add_vector_seeds, text_seeds

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
        structure=structure_features(g, train.rounds, train.reverse_rounds, train.topic_pe),
        head=g.head, rel=rel, tail=g.tail, labels=labels, answers=answers,
        groups=np.array([k for _, k in hits], dtype=np.int64), n_gold=len(gold), kind=kind,
        truncated=g.truncated,
    )


def build_examples(records: Sequence[QARecord], store: GraphReader, embedder: Embedder,
                   cfg: RetrievalConfig, tables: Tables, train: ScorerTrainConfig,
                   desc: str = "examples", progress: bool = True) -> list[Example]:
    from tqdm.auto import tqdm

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


# --- training ------------------------------------------------------------------------------


def _tensors(e: Example, entity_table, relation_table):
    import torch

    t = torch.from_numpy
    return (t(e.question), entity_table[t(e.entities)], t(e.non_text.astype(bool)),
            t(e.structure.astype(np.float32)), relation_table, t(e.head), t(e.rel), t(e.tail))


def evaluate(model: TripleScorer, examples: Sequence[Example], entity_table, relation_table,
             ks: Iterable[int] = KS) -> dict[str, float]:
    """The validation metrics (module docstring) of `model` on `examples`."""
    import torch

    ks = tuple(ks)
    sums: dict[str, list[float]] = {}

    def add(k: str, v: float) -> None:
        sums.setdefault(k, []).append(v)

    model.eval()
    with torch.inference_mode():
        for e in examples:
            logits = (model(*_tensors(e, entity_table, relation_table)).numpy()
                      if len(e.head) else np.zeros(0, np.float32))
            order = top_k(logits, max(ks)) if len(logits) else np.zeros(0, np.int64)
            in_graph = set(e.groups.tolist())
            for k in ks:
                keep = order[:k]
                nodes = np.zeros(len(e.entities), dtype=bool)
                nodes[e.head[keep]] = True
                nodes[e.tail[keep]] = True
                covered = set(e.groups[nodes[e.answers]].tolist()) if len(e.answers) else set()
                if in_graph:
                    add(f"ans_recall@{k}", len(covered) / len(in_graph))
                if e.labels.any():
                    add(f"triple_recall@{k}", float(e.labels[keep].sum()) / e.labels.sum())
                add(f"gold_recall@{k}", len(covered) / e.n_gold if e.n_gold else 0.0)
                add(f"hit@{k}", 1.0 if covered else 0.0)
    model.train()
    out = {k: round(float(np.mean(v)), 4) for k, v in sorted(sums.items())}
    out["questions"] = len(examples)
    out["with_answer_in_neighbourhood"] = sum(1 for e in examples if len(e.answers))
    return out


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)  # Linux KiB


def _selection(metrics: dict[str, float], k: int) -> tuple[float, float]:
    return metrics.get(f"ans_recall@{k}", 0.0), metrics.get(f"triple_recall@{k}", 0.0)


def train_scorer(
    train: Sequence[Example],
    val: Sequence[Example],
    entity_table: np.ndarray,
    relation_table: np.ndarray,
    config: ScorerTrainConfig,
    output: Path,
    meta: dict[str, Any],
    fingerprint: str,
    resume: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Train, select the best epoch by validation answer recall@100, write it to `output`
    (`save_scorer`); returns the checkpoint's metadata."""
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    output.mkdir(parents=True, exist_ok=True)
    dim = entity_table.shape[1]
    torch.manual_seed(config.seed)
    model = TripleScorer(dim, config.rounds, config.reverse_rounds, config.topic_pe,
                         config.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    ent = torch.from_numpy(np.ascontiguousarray(entity_table, dtype=np.float32))
    rel = torch.from_numpy(np.ascontiguousarray(relation_table, dtype=np.float32))
    trainable = [e for e in train if e.trainable]
    if not trainable:
        raise ScorerError("no training question has a pseudo-labelled triple (no path from a "
                         "topic entity to an answer in its neighbourhood)")

    ks = sorted({*KS, config.select_k})
    state_path = output / STATE_FILE
    state: dict[str, Any] = {"epoch": 0, "best": None, "best_epoch": None, "bad": 0,
                             "history": [], "train_s": 0.0, "done": False}
    if resume and state_path.is_file():
        saved = torch.load(state_path, map_location="cpu", weights_only=False)
        if saved["fingerprint"] != fingerprint:
            raise ResumeMismatch(
                f"{state_path} belongs to another configuration or data; use another -o "
                "DIR or --no-resume to start over"
            )
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optim"])
        torch.set_rng_state(saved["torch_rng"])
        state = saved["state"]
        log.info("resuming after epoch %d (best %s at epoch %s)", state["epoch"], state["best"],
                 state["best_epoch"])

    def save_state() -> None:
        tmp = state_path.with_suffix(".tmp")
        torch.save({"fingerprint": fingerprint, "model": model.state_dict(),
                    "optim": opt.state_dict(), "torch_rng": torch.get_rng_state(),
                    "state": state}, tmp)
        tmp.replace(state_path)

    def write_best(metrics: dict[str, float]) -> None:
        full = {**meta, "validation": metrics, "best_epoch": state["best_epoch"],
                "epochs_run": state["epoch"], "train_s": round(state["train_s"], 1),
                "peak_rss_mb": _peak_rss_mb(), "history": state["history"]}
        save_scorer(model, full, output)

    if state["epoch"] == 0 and not state["history"]:
        m0 = evaluate(model, val, ent, rel, ks)
        state["history"].append({"epoch": 0, "loss": None, **m0})
        log.info("epoch 0 (untrained): val %s", m0)

    last_epoch_s = 0.0
    while not state["done"] and state["epoch"] < config.epochs:
        budget = config.max_minutes * 60 if config.max_minutes else None
        if budget is not None and state["train_s"] + last_epoch_s > budget:
            log.info("stopping: the next epoch would overrun --max-minutes %.1f",
                     config.max_minutes)
            break
        epoch = state["epoch"] + 1
        t0 = time.perf_counter()
        order = np.random.default_rng(config.seed + epoch).permutation(len(trainable))
        total = 0.0
        bar = tqdm(order.tolist(), desc=f"epoch {epoch}", unit="q", disable=not progress,
                   leave=False)
        for i in bar:
            e = trainable[i]
            logits = model(*_tensors(e, ent, rel))
            loss = F.binary_cross_entropy_with_logits(logits, torch.from_numpy(
                e.labels.astype(np.float32)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        bar.close()
        metrics = evaluate(model, val, ent, rel, ks)
        last_epoch_s = time.perf_counter() - t0
        state["train_s"] += last_epoch_s
        state["epoch"] = epoch
        loss = total / len(trainable)
        state["history"].append({"epoch": epoch, "loss": round(loss, 5),
                                 "seconds": round(last_epoch_s, 1), **metrics})
        sel = _selection(metrics, config.select_k)
        improved = state["best"] is None or sel > tuple(state["best"])
        log.info("epoch %d: loss %.4f, val ans_recall@%d %.4f, triple_recall@%d %.4f "
                 "(%.0f s)%s", epoch, loss, config.select_k, sel[0], config.select_k, sel[1],
                 last_epoch_s, " best" if improved else "")
        if improved:
            state["best"], state["best_epoch"], state["bad"] = list(sel), epoch, 0
            write_best(metrics)
        else:
            state["bad"] += 1
            if state["bad"] >= config.patience:
                log.info("stopping: %d epochs without improvement", state["bad"])
                state["done"] = True
        save_state()

    if not (output / "scorer.json").is_file():
        raise ScorerError("no epoch was trained (--max-minutes too small?)")
    final = json.loads((output / "scorer.json").read_text(encoding="utf-8"))
    # the run's totals (the best epoch's weights and validation metrics stay as written)
    final.update({"epochs_run": state["epoch"], "train_s": round(state["train_s"], 1),
                  "peak_rss_mb": _peak_rss_mb(), "history": state["history"]})
    (output / "scorer.json").write_text(json.dumps(final, indent=2, sort_keys=True) + "\n",
                                        encoding="utf-8")
    return final


def fit_scorer(
    train_recs: Sequence[QARecord],
    val_recs: Sequence[QARecord],
    store: GraphReader,
    embedder: Embedder,
    cfg: RetrievalConfig,
    config: ScorerTrainConfig,
    output: Path,
    *,
    resume: bool = True,
    progress: bool = True,
    files: Sequence[dict[str, str]] = (),
    val_file: str | None = None,
) -> dict[str, Any]:
    """Examples (cached in output/cache), training, the best checkpoint in `output`;
    returns its metadata (`scorer.json`)."""
    output = Path(output)
    stats = store.stats()
    retrieval = {k: getattr(cfg, k) for k in (*RETRIEVAL_FIELDS, "stopwords")}
    data_id = {
        "version": CACHE_VERSION,
        "train": _digest([r.model_dump() for r in train_recs]),
        "val": _digest([r.model_dump() for r in val_recs]),
        "store": stats.model_dump(), "embedder": embedder.model_name, "retrieval": retrieval,
        "structure": [config.rounds, config.reverse_rounds, config.topic_pe],
    }
    key = _digest(data_id)
    cache_path = output / "cache" / "examples.npz"
    t0 = time.perf_counter()
    cached = load_cache(cache_path, key)
    if cached is None:
        tables = Tables(dim=int(embedder.dimension))
        splits = {
            "train": build_examples(train_recs, store, embedder, cfg, tables, config,
                                    "train examples", progress),
            "val": build_examples(val_recs, store, embedder, cfg, tables, config,
                                  "val examples", progress),
        }
        save_cache(cache_path, key, tables, splits)
        entity_table, relation_table = tables.entity_matrix(), tables.relation_matrix()
    else:
        entity_table, relation_table, splits = cached
        log.info("example cache reused: %s", cache_path)
    build_s = time.perf_counter() - t0

    train_ex, val_ex = splits["train"], splits["val"]
    kinds = {k: sum(1 for e in train_ex if e.kind == k)
             for k in ("directed", "undirected", "none")}
    n_pos = [int(e.labels.sum()) for e in train_ex if e.trainable]
    sizes = [len(e.head) for e in train_ex]
    log.info("examples: %d train (%d with pseudo-labels: %s), %d val; median %d triples, "
             "%d positives (%.0f s)", len(train_ex), len(n_pos), kinds, len(val_ex),
             int(np.median(sizes)), int(np.median(n_pos or [0])), build_s)
    meta = {
        "embedder": canonical_embedder(embedder.model_name),
        "embedder_name": embedder.model_name,
        "retrieval": retrieval,
        "store": stats.model_dump(),
        "training": {
            "files": list(files), "questions": len(train_ex), "trained_on": len(n_pos),
            "label_kinds": kinds, "median_triples": int(np.median(sizes)),
            "median_positives": int(np.median(n_pos or [0])),
            "truncated_neighbourhoods": sum(1 for e in train_ex if e.truncated),
            "questions_sha256": data_id["train"], "config": config.model_dump(),
        },
        "validation_set": {"file": val_file, "questions": len(val_ex),
                           "questions_sha256": data_id["val"]},
        "build_s": round(build_s, 1),
    }
    fingerprint = _digest({"data": key, "config": config.identity()})
    return train_scorer(train_ex, val_ex, entity_table, relation_table, config, output, meta,
                        fingerprint, resume=resume, progress=progress)


# --- the command ---------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)


_train_options = with_options(model_options(ScorerTrainConfig), into="options")
_retrieval_options = with_options(model_options(RetrievalConfig, RETRIEVAL_FIELDS),
                                  into="retrieval")


@_train_options
@_retrieval_options
def train_subgraphrag(
    questions: Annotated[list[Path], typer.Argument(
        metavar="QUESTIONS...", help="training question files with gold answers (MetaQA "
        "`question [topic]<TAB>a1|a2`, or RoG jsonl)", exists=True, dir_okay=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="scorer directory to write "
                                         "(also holds the example cache and the resume state)")],
    val: Annotated[Path | None, typer.Option("--val", help="validation questions (default: a "
                                             "held-out share of QUESTIONS)", exists=True,
                                             dir_okay=False)] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="metaqa | rog (default: guessed "
                                            "from each file name)")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="use only the first N training "
                                              "questions")] = None,
    resume: Annotated[bool, typer.Option("--resume/--no-resume", help="continue from DIR's "
                                         "training state")] = True,
    verbose: Annotated[bool, typer.Option("-v")] = False,
    *,
    options: dict[str, Any],
    retrieval: dict[str, Any],
) -> None:
    """Train SubgraphRAG's triple scorer (MLP + directional distance encoding) on the
    questions' neighbourhoods in the configured store; `--method subgraphrag --scorer DIR`
    uses it."""
    import sys

    from talent_core.pipeline import Pipeline
    from talent_core.questions import QuestionFileError, detect_question_format
    from talent_core.questions import read_question_files as read
    from talent_core.retrieval.config import RetrievalSettingsError, apply_overrides

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)  # epochs are always reported
    try:
        config = ScorerTrainConfig(**options)
        rcfg = apply_overrides(RetrievalConfig(), **retrieval)
    except (ValueError, RetrievalSettingsError) as e:
        raise _fail(str(e)) from None

    try:
        train_recs = read(questions, fmt, limit)
        val_recs = read([val], fmt) if val else None
    except QuestionFileError as e:
        raise _fail(str(e)) from None
    if not train_recs:
        raise _fail("no training questions")
    if val_recs is None:  # a seeded held-out share
        perm = np.random.default_rng(config.seed).permutation(len(train_recs))
        n_val = max(1, round(config.val_share * len(train_recs)))
        held = set(perm[:n_val].tolist())
        val_recs = [r for i, r in enumerate(train_recs) if i in held]
        train_recs = [r for i, r in enumerate(train_recs) if i not in held]
    overlap = {r.question for r in train_recs} & {r.question for r in val_recs}
    if overlap:
        log.warning("%d validation questions also occur in training", len(overlap))

    qfmt = fmt or detect_question_format(questions[0])
    files = [{"file": p.name, "sha256": _sha256(p)} for p in questions]
    pipe = Pipeline(retrieval=rcfg, question_format=qfmt)  # type: ignore[arg-type]
    try:
        final = fit_scorer(train_recs, val_recs, pipe.store, pipe.embedder,
                           pipe.retrieval_config(), config, output, resume=resume,
                           files=files, val_file=val.name if val else None)
    except (ScorerError, ResumeMismatch) as e:
        raise _fail(str(e)) from None
    finally:
        pipe.close()
    v = final["validation"]
    t = final["training"]
    typer.echo(json.dumps({
        "scorer": str(output), "train_questions": t["questions"], "trained_on": t["trained_on"],
        "val_questions": final["validation_set"]["questions"], "epochs_run": final["epochs_run"],
        "best_epoch": final["best_epoch"],
        **{k: v[k] for k in v if k.startswith(("ans_recall", "hit", "gold_recall"))},
        "build_s": final["build_s"], "train_s": final["train_s"],
        "peak_rss_mb": final["peak_rss_mb"],
    }))
