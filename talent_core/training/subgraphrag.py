"""Training SubgraphRAG's triple scorer (`talent train subgraphrag` runs `fit_scorer`).

    QUESTIONS (MetaQA / RoG) -> seeds -> neighbourhood (store) -> features + pseudo-labels
    (built once, cached in DIR/cache) -> BCE + Adam, one question per step -> DIR/scorer.*

* Examples (`subgraphrag_examples`): as `retrieve` finds each question's neighbourhood.
  Questions without a positive triple are kept for validation metrics but never trained on
  (the paper's `skip_no_path`).
* Loss: `binary_cross_entropy_with_logits` over all triples of one question, mean; Adam.
* Selection: after every epoch the validation questions (`--val`, else a seeded
  `val_share` of the training questions) are scored; the best epoch by answer recall at
  K = 100 (ties: triple recall at 100) is written to DIR as `scorer.safetensors` +
  `scorer.json`; training stops after `patience` epochs without improvement, at `epochs`,
  or before an epoch that would overrun `max_minutes` (`scorer.json` says which:
  `stopped_by`).
* Metrics at K in (50, 100, 200), means over validation questions:
  `ans_recall@K`   the paper's: answers among the kept triples' entities / answers in the
                   neighbourhood (questions with an answer in it);
  `triple_recall@K` pseudo-positive triples among the top K / positives (questions with one);
  `gold_recall@K`, `hit@K`: gold answers (normalised names) among the kept entities / all
                   gold answers, and whether any is there (every question).
* Resumable: `DIR/train_state.pt` (model, optimiser, epoch, best, RNG states, history) is
  written after every epoch; a rerun with the same data and configuration continues from
  it, another configuration is refused (`--no-resume` starts over). `epochs`, `patience`
  and `max_minutes` may change between runs: a run stopped by its time budget, its epoch
  cap or its patience continues when rerun with a larger one (a killed run continues from
  its last finished epoch), and ends exactly as one uninterrupted run would. The example
  cache is reused when the question files, store, embedder and retrieval settings are the
  same.
"""

from __future__ import annotations

import hashlib
import json
import logging
import resource
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from talent_core.embedding import Embedder
from talent_core.errors import ResumeMismatch, ScorerError
from talent_core.questions import QARecord
from talent_core.retrieval.config import RetrievalConfig
from talent_core.retrieval.subgraphrag import TripleScorer, canonical_embedder, save_scorer, top_k
from talent_core.store.base import GraphReader
from talent_core.training.subgraphrag_examples import (
    Example,
    ScorerTrainConfig,
    Tables,
    build_examples,
    load_cache,
    save_cache,
)

log = logging.getLogger(__name__)

KS = (50, 100, 200)
CACHE_VERSION = 1
STATE_FILE = "train_state.pt"
# the RetrievalConfig fields that shape a training example (the others are other methods')
RETRIEVAL_FIELDS = ("hops", "fanout", "max_nodes", "max_edges", "k_seed", "vector_anchors",
                    "name_match", "fulltext_k")


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

    output.mkdir(parents=True, exist_ok=True)
    dim = entity_table.shape[1]
    torch.manual_seed(config.seed)
    model = TripleScorer(dim, config.rounds, config.reverse_rounds, config.topic_pe,
                         config.hidden, config.undirected_rounds)
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
                             "history": [], "train_s": 0.0}
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
        log.info("resuming after epoch %d (best %s at epoch %s, %d epochs without "
                 "improvement)", state["epoch"], state["best"], state["best_epoch"],
                 state["bad"])

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
    # patience is read afresh (not a stored flag): a rerun with a larger one continues
    while state["bad"] < config.patience and state["epoch"] < config.epochs:
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
        save_state()

    if not (output / "scorer.json").is_file():
        raise ScorerError("no epoch was trained (--max-minutes too small?)")
    final = json.loads((output / "scorer.json").read_text(encoding="utf-8"))
    # the run's totals (the best epoch's weights and validation metrics stay as written)
    stopped_by = ("patience" if state["bad"] >= config.patience
                  else "epochs" if state["epoch"] >= config.epochs else "max_minutes")
    final.update({"epochs_run": state["epoch"], "train_s": round(state["train_s"], 1),
                  "peak_rss_mb": _peak_rss_mb(), "history": state["history"],
                  "stopped_by": stopped_by})
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
        "structure": [config.rounds, config.reverse_rounds, config.topic_pe,
                      *([config.undirected_rounds] if config.undirected_rounds else [])],
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


def hold_out(records: Sequence[QARecord], config: ScorerTrainConfig
             ) -> tuple[list[QARecord], list[QARecord]]:
    """(train, validation): a seeded `val_share` of `records` held out for validation."""
    perm = np.random.default_rng(config.seed).permutation(len(records))
    n_val = max(1, round(config.val_share * len(records)))
    held = set(perm[:n_val].tolist())
    return ([r for i, r in enumerate(records) if i not in held],
            [r for i, r in enumerate(records) if i in held])


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
