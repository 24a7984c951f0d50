"""Training the relation-path planner (`retrieval.planner`) on question files
(`talent train planner` runs `fit_planner`) or on relation-path label records
(`talent train planner --format webqsp-paths` runs `fit_from_labels`).

Question files: for each training question, its anchors (the retrieval's seeds stage),
their ``max_len``-hop neighbourhood in the store (within ``caps``), the path types' ends
there, the soft label (`planner.label_types`) and the text the planner reads
(`planner.plan_text`). Then softmax regression on the embedded texts; validation reports
how often the most probable type is a labelled one and how often its ends hold a gold
answer.

Label records (`read_path_labels`; WebQSP training questions with RoG's ground paths, no
triples): the labels are the records' own relation paths (`path_labels`), so no store is
walked; validation reports path accuracy (`path_accuracy`: the top path is one of the
question's ground paths).
"""

from __future__ import annotations

import json
import logging
import resource
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from tqdm.auto import tqdm

from talent_core.embedding import Embedder, TextEmbedder
from talent_core.errors import DataError, TrainingDataError
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


# --- training from relation-path label records -------------------------------------------

LabelSource = Literal["ground", "chain", "both"]
LABEL_SOURCES: tuple[str, ...] = ("ground", "chain", "both")


class PathLabelRecord(BaseModel):
    """One labelled question of `webqsp-train/train.jsonl`: the topic entity's name, the
    annotators' relation chain and RoG's ground relation paths (topic -> answers, direction
    ignored; an empty path: the answer is the topic itself); no triples."""

    model_config = ConfigDict(extra="ignore")
    id: str
    split: Literal["train", "validation"] = "train"
    question: str = Field(min_length=1)
    q_entity: list[str] = Field(default_factory=list)
    answer: list[str] = Field(default_factory=list)
    inferential_chain: list[str] = Field(default_factory=list)
    ground_paths: list[list[str]] = Field(default_factory=list)

    @field_validator("inferential_chain")
    @classmethod
    def _chain_names(cls, v: list[str]) -> list[str]:
        if any(not r.strip() for r in v):
            raise ValueError("an empty relation name")
        return v

    @field_validator("ground_paths")
    @classmethod
    def _path_names(cls, v: list[list[str]]) -> list[list[str]]:
        if any(not r.strip() for p in v for r in p):
            raise ValueError("an empty relation name")
        return v


def read_path_labels(path: Path | str) -> list[PathLabelRecord]:
    """The label records of a jsonl file (blank lines skipped); a bad line raises
    `DataError` naming file:line and the problem."""
    path = Path(path)
    out: list[PathLabelRecord] = []
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: invalid UTF-8 ({e.reason})") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object")
        try:
            out.append(PathLabelRecord.model_validate(obj))
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "record"
            raise DataError(f"{path}:{lineno}: {where}: {err['msg']}") from None
    if not out:
        raise DataError(f"{path}: no label records")
    return out


def path_labels(rec: PathLabelRecord, source: LabelSource, max_len: int = 3
                ) -> dict[PathT, float]:
    """Soft target of a record (mass shared equally; paths longer than ``max_len`` dropped):
    "ground": its ground paths; "chain": its inferential chain; "both": the ground paths
    sharing a relation with the chain (the chain disambiguates RoG's noisy paths, which
    stay in the KG's naming), all of them when none does, the chain when there are none."""
    ground = list(dict.fromkeys(tuple(p) for p in rec.ground_paths if 0 < len(p) <= max_len))
    chain: list[PathT] = ([tuple(rec.inferential_chain)]
                          if 0 < len(rec.inferential_chain) <= max_len else [])
    if source == "ground":
        keep = ground
    elif source == "chain":
        keep = chain
    else:
        rels = set(rec.inferential_chain)
        keep = [p for p in ground if rels & set(p)] or ground or chain
    return {p: 1.0 / len(keep) for p in keep}


def path_accuracy(model: PlannerModel, vecs: np.ndarray,
                  recs: Sequence[PathLabelRecord]) -> dict[str, float]:
    """Over the records with ground paths: path_acc, the top planned path is one of them
    (relation sequences compared as written: each hop's direction is ignored in the
    labels); path_acc5, one of the five likeliest is; chain_acc, the top path is the
    inferential chain (over the records with one)."""
    probs = model.probabilities(vecs) if len(recs) else np.zeros((0, len(model.paths)))
    acc, acc5, chain = [], [], []
    for p, rec in zip(probs, recs, strict=True):
        order = np.argsort(-p, kind="stable")[:5].tolist()
        top = model.paths[order[0]]
        if rec.ground_paths:
            gold = {tuple(g) for g in rec.ground_paths}
            acc.append(top in gold)
            acc5.append(any(model.paths[i] in gold for i in order))
        if rec.inferential_chain:
            chain.append(top == tuple(rec.inferential_chain))
    return {"questions": len(acc), "path_acc": float(np.mean(acc)) if acc else 0.0,
            "path_acc5": float(np.mean(acc5)) if acc5 else 0.0,
            "chain_questions": len(chain),
            "chain_acc": float(np.mean(chain)) if chain else 0.0}


def label_texts(recs: Sequence[PathLabelRecord]) -> list[str]:
    """What the planner reads of each record: the question without its topic's mention."""
    return [plan_text(r.question, r.q_entity) for r in recs]


def fit_from_labels(
    records: Sequence[PathLabelRecord],
    embedder: TextEmbedder,
    output: Path | None,
    *,
    name: str,
    embedding_model: str,
    source: LabelSource = "both",
    min_count: int = 1,
    max_len: int = 3,
    epochs: int = 300,
    lr: float = 0.01,
    answer_weight: float = 5.0,
    eps: float = 1e-3,
    files: Sequence[str] = (),
    vectors: np.ndarray | None = None,
) -> PlannerModel:
    """Fit the planner on the records of split "train" with `path_labels` (paths labelled
    in fewer than ``min_count`` training questions dropped: the file stays small), validate
    on split "validation"; write it to ``output`` (None: not written). ``vectors``: the
    records' embedded `label_texts`, when the caller has them."""
    t0 = time.perf_counter()
    train = [i for i, r in enumerate(records) if r.split == "train"]
    val = [i for i, r in enumerate(records) if r.split == "validation"]
    labels = {i: path_labels(records[i], source, max_len) for i in train}
    counts = Counter(t for i in train for t in labels[i])
    paths = sorted(t for t, c in counts.items() if c >= min_count)
    index = {t: k for k, t in enumerate(paths)}
    used = [i for i in train if any(t in index for t in labels[i])]
    if not used:
        raise TrainingDataError("no training record has a relation-path label "
                                f"(source {source!r}, min count {min_count})")
    targets = np.zeros((len(used), len(paths)), dtype=np.float32)
    for k, i in enumerate(used):
        kept = {t: m for t, m in labels[i].items() if t in index}
        total = sum(kept.values())
        for t, m in kept.items():
            targets[k, index[t]] = m / total
    if vectors is None:
        vectors = np.asarray(embedder.encode(label_texts(records)), dtype=np.float32)
    vecs = np.asarray(vectors, dtype=np.float32)
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    embed_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    weight, bias, loss = fit(vecs[used], targets, epochs=epochs, lr=lr)
    fit_s = time.perf_counter() - t1
    meta: dict[str, Any] = {
        "name": name, "embedding_model": embedding_model,
        "max_len": max_len, "answer_weight": answer_weight, "eps": eps,
        "walk_limit": 2000, "epochs": epochs, "lr": lr, "final_loss": round(loss, 4),
        "labels": {"source": source, "min_count": min_count},
        "trained_on": {"files": list(files), "questions": len(train), "labelled": len(used)},
    }
    model = PlannerModel(paths=paths, weight=weight, bias=bias, meta=meta)
    meta["training"] = {**path_accuracy(model, vecs[train], [records[i] for i in train]),
                        "embed_s": round(embed_s, 1), "fit_s": round(fit_s, 1)}
    if val:
        meta["validation"] = path_accuracy(model, vecs[val], [records[i] for i in val])
    if output is not None:
        model.save(output)
    return model
