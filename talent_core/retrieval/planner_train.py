"""`talent train planner`: fit the relation-path planner (`planner`) on question files.

For each training question: its anchors (the retrieval's seeds stage), their
``max_len``-hop neighbourhood in the store (within ``caps``), the path types' ends there,
the soft label (`planner.label_types`) and the text the planner reads (`planner.plan_text`).
Then softmax regression on the embedded texts; validation reports how often the most
probable type is a labelled one and how often its ends hold a gold answer.
"""

from __future__ import annotations

import json
import logging
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from talent_core.questions import QARecord
from talent_core.retrieval.planner import (
    PathT,
    PlannerModel,
    fit,
    label_types,
    plan_text,
    type_ends,
)
from talent_core.store.base import ExpansionCaps
from talent_core.text import answer_key

log = logging.getLogger(__name__)

LABEL_CAPS = ExpansionCaps(fanout=200, max_nodes=20000, max_edges=60000)


def labelled(records: Sequence[QARecord], pipe: Any, max_len: int, caps: ExpansionCaps,
             desc: str = "label") -> list[tuple[str, dict[PathT, float], dict[PathT, set[str]],
                                                 set[str]]]:
    """(planner text, soft label, ends per type, gold node ids) per question (label {} when
    no type reaches a gold answer)."""
    from tqdm.auto import tqdm

    from talent_core.questions import parse_question
    from talent_core.retrieval.candidate import find_seeds

    cfg = pipe.retrieval_config()
    out = []
    for rec in tqdm(records, desc=desc, unit="q", file=sys.stderr):
        text, topics = parse_question(rec.question, rec.topic_entities)
        seeds, _ = find_seeds(text, pipe.store, pipe.embedder, cfg, topics or None)
        anchors = seeds.anchors()
        ids = [a.id for a in anchors]
        sub = pipe.store.neighbourhood(ids, max_len, caps) if ids else None
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


def train_planner(
    questions: Annotated[list[Path], typer.Argument(
        metavar="QUESTIONS...", help="training question files with gold answers (MetaQA "
        "`question [topic]<TAB>a1|a2`, or RoG jsonl)", exists=True, dir_okay=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="planner directory to write")],
    val: Annotated[Path | None, typer.Option("--val", help="validation questions", exists=True,
                                             dir_okay=False)] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="metaqa | rog (default: guessed "
                                            "from each file name)")] = None,
    name: Annotated[str | None, typer.Option(help="the planner's name (default: the output "
                                             "directory's)")] = None,
    max_len: Annotated[int, typer.Option("--max-len", min=1, max=3,
                                         help="longest relation path")] = 3,
    epochs: Annotated[int, typer.Option(min=1)] = 300,
    lr: Annotated[float, typer.Option(min=0.0)] = 0.01,
    answer_weight: Annotated[float, typer.Option(
        "--answer-weight", min=0.0, help="w of ranked answers' score log p_LM + w log(pi + "
        "eps); tune it on validation rows (bench/planner_weight.py)")] = 5.0,
    eps: Annotated[float, typer.Option(min=1e-9)] = 1e-3,
    limit: Annotated[int | None, typer.Option(min=1, help="only the first N training "
                                              "questions")] = None,
    verbose: Annotated[bool, typer.Option("-v")] = False,
) -> None:
    """Train the relation-path planner that re-weights ranked answers (`--planner DIR` on
    ask / eval / app; the shipped one serves MetaQA)."""
    from talent_core.pipeline import Pipeline
    from talent_core.questions import QuestionFileError, detect_question_format
    from talent_core.questions import read_question_files as read

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        train_recs, val_recs = read(questions, fmt, limit), read([val], fmt) if val else []
    except QuestionFileError as e:
        raise _fail(str(e)) from None
    if not train_recs:
        raise _fail("no training questions")
    overlap = {r.question for r in train_recs} & {r.question for r in val_recs}
    if overlap:
        raise _fail(f"{len(overlap)} validation questions also occur in the training files")

    t0 = time.perf_counter()
    pipe = Pipeline(question_format=fmt or detect_question_format(questions[0]),  # type: ignore[arg-type]
                    planner="none")
    try:
        rows = labelled(train_recs, pipe, max_len, LABEL_CAPS)
        val_rows = labelled(val_recs, pipe, max_len, LABEL_CAPS, desc="label val")
        label_s = time.perf_counter() - t0
        used = [r for r in rows if r[1]]
        if not used:
            raise _fail("no training question has an answer on a relation path from its "
                        "anchors: is the KG loaded (talent stats)?")
        paths = sorted({t for r in used for t in r[1]})
        index = {t: i for i, t in enumerate(paths)}
        targets = np.zeros((len(used), len(paths)), dtype=np.float32)
        for k, (_, label, _, _) in enumerate(used):
            for t, m in label.items():
                targets[k, index[t]] = m
        vecs = np.asarray(pipe.embedder.encode([r[0] for r in used]), dtype=np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        t1 = time.perf_counter()
        weight, bias, loss = fit(vecs, targets, epochs=epochs, lr=lr)
        fit_s = time.perf_counter() - t1
        meta: dict[str, Any] = {
            "name": name or output.name,
            "embedding_model": pipe.settings.embedding_model,
            "max_len": max_len, "answer_weight": answer_weight, "eps": eps,
            "walk_limit": 2000, "epochs": epochs, "lr": lr, "final_loss": round(loss, 4),
            "label_caps": LABEL_CAPS.model_dump(),
            "trained_on": {"files": [p.name for p in questions], "questions": len(train_recs),
                           "labelled": len(used)},
        }
        model = PlannerModel(paths=paths, weight=weight, bias=bias, meta=meta)
        train_metrics = evaluate_planner(model, vecs, used)
        if val_rows:
            val_vecs = np.asarray(pipe.embedder.encode([r[0] for r in val_rows]),
                                  dtype=np.float32)
            meta["validation"] = {"file": val.name if val else None,
                                  **evaluate_planner(model, val_vecs, val_rows)}
        meta["training"] = {**train_metrics, "label_s": round(label_s, 1),
                            "fit_s": round(fit_s, 1),
                            "peak_rss_mb": round(resource.getrusage(
                                resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
        model.save(output)
    finally:
        pipe.close()
    typer.echo(json.dumps({"planner": str(output), "paths": len(paths),
                           "training": meta["training"], "validation": meta.get("validation")}))


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)
