"""Training the relation-path planner (`retrieval.planner`) on question files
(`talent train planner` runs `fit_planner`).

For each training question: its anchors (the retrieval's seeds stage), their
``max_len``-hop neighbourhood in the store (within ``caps``), the path types' ends there,
the soft label (`planner.label_types`) and the text the planner reads (`planner.plan_text`).
Then softmax regression on the embedded texts; validation reports how often the most
probable type is a labelled one and how often its ends hold a gold answer.
"""

from __future__ import annotations

import logging
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from talent_core.embedding import Embedder
from talent_core.errors import TrainingDataError
from talent_core.questions import QARecord, parse_question
from talent_core.retrieval.candidate import find_seeds
from talent_core.retrieval.config import RetrievalConfig
from talent_core.retrieval.planner import (
    PathT,
    PlannerModel,
    fit,
    label_types,
    plan_text,
    type_ends,
)
from talent_core.store.base import ExpansionCaps, GraphReader
from talent_core.text import answer_key

log = logging.getLogger(__name__)

LABEL_CAPS = ExpansionCaps(fanout=200, max_nodes=20000, max_edges=60000)


Row = tuple[str, dict[PathT, float], dict[PathT, set[str]], set[str]]


def labelled(records: Sequence[QARecord], store: GraphReader, embedder: Embedder,
             cfg: RetrievalConfig, max_len: int, caps: ExpansionCaps,
             desc: str = "label") -> list[Row]:
    """(planner text, soft label, ends per type, gold node ids) per question (label {} when
    no type reaches a gold answer)."""
    out = []
    for rec in tqdm(records, desc=desc, unit="q", file=sys.stderr):
        text, topics = parse_question(rec.question, rec.topic_entities)
        seeds, _ = find_seeds(text, store, embedder, cfg, topics or None)
        anchors = seeds.anchors()
        ids = [a.id for a in anchors]
        sub = store.neighbourhood(ids, max_len, caps) if ids else None
        gold_keys = {answer_key(a) for a in [*rec.answers, *rec.answer_entities]}
        gold = {n.id for n in sub.nodes if answer_key(n.name) in gold_keys} if sub else set()
        ends = type_ends(sub.edges, ids, max_len) if sub else {}
        out.append((plan_text(text, [a.name for a in anchors]), label_types(ends, gold),
                    ends, gold))
    return out


def evaluate_planner(model: PlannerModel, vecs: np.ndarray, rows: Sequence[Any]
                     ) -> dict[str, float]:
    """type_acc: the top type is a labelled one; top_hit: the top type's ends hold a gold
    answer (over the questions with a label)."""
    probs = model.probabilities(vecs) if len(rows) else np.zeros((0, len(model.paths)))
    acc, hit = [], []
    for p, (_, label, ends, gold) in zip(probs, rows, strict=True):
        if not label:
            continue
        top = model.paths[int(np.argmax(p))]
        acc.append(top in label)
        hit.append(bool(ends.get(top, set()) & gold))
    return {"questions": len(acc), "type_acc": float(np.mean(acc)) if acc else 0.0,
            "top_hit": float(np.mean(hit)) if hit else 0.0}


def fit_planner(
    train_recs: Sequence[QARecord],
    val_recs: Sequence[QARecord],
    store: GraphReader,
    embedder: Embedder,
    cfg: RetrievalConfig,
    output: Path,
    *,
    name: str,
    embedding_model: str,
    max_len: int = 3,
    epochs: int = 300,
    lr: float = 0.01,
    answer_weight: float = 5.0,
    eps: float = 1e-3,
    files: Sequence[str] = (),
    val_file: str | None = None,
) -> PlannerModel:
    """Label the questions over `store`, fit the planner, write it to `output`; returns it
    (its `meta` holds the training and validation metrics)."""
    t0 = time.perf_counter()
    rows = labelled(train_recs, store, embedder, cfg, max_len, LABEL_CAPS)
    val_rows = labelled(val_recs, store, embedder, cfg, max_len, LABEL_CAPS, desc="label val")
    label_s = time.perf_counter() - t0
    used = [r for r in rows if r[1]]
    if not used:
        raise TrainingDataError("no training question has an answer on a relation path from "
                                "its anchors: is the KG loaded (talent stats)?")
    paths = sorted({t for r in used for t in r[1]})
    index = {t: i for i, t in enumerate(paths)}
    targets = np.zeros((len(used), len(paths)), dtype=np.float32)
    for k, (_, label, _, _) in enumerate(used):
        for t, m in label.items():
            targets[k, index[t]] = m
    vecs = np.asarray(embedder.encode([r[0] for r in used]), dtype=np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    t1 = time.perf_counter()
    weight, bias, loss = fit(vecs, targets, epochs=epochs, lr=lr)
    fit_s = time.perf_counter() - t1
    meta: dict[str, Any] = {
        "name": name,
        "embedding_model": embedding_model,
        "max_len": max_len, "answer_weight": answer_weight, "eps": eps,
        "walk_limit": 2000, "epochs": epochs, "lr": lr, "final_loss": round(loss, 4),
        "label_caps": LABEL_CAPS.model_dump(),
        "trained_on": {"files": list(files), "questions": len(train_recs),
                       "labelled": len(used)},
    }
    model = PlannerModel(paths=paths, weight=weight, bias=bias, meta=meta)
    train_metrics = evaluate_planner(model, vecs, used)
    if val_rows:
        val_vecs = np.asarray(embedder.encode([r[0] for r in val_rows]), dtype=np.float32)
        meta["validation"] = {"file": val_file, **evaluate_planner(model, val_vecs, val_rows)}
    meta["training"] = {**train_metrics, "label_s": round(label_s, 1),
                        "fit_s": round(fit_s, 1),
                        "peak_rss_mb": round(resource.getrusage(
                            resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    model.save(output)
    return model
