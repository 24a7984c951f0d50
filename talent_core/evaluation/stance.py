"""`talent eval FILE --format explagraphs` without --report: the stance task
(`talent_core.stance`) on every row of an ExplaGraphs TSV, its graph as S, scored by
accuracy, per-class accuracy (recall), balanced accuracy and the majority-class baseline
(a model that leans to one label scores the baseline, not more)."""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from talent_core.answer import Mode
from talent_core.evaluation.metrics import stance_metrics
from talent_core.evaluation.summary import group_rows
from talent_core.llm.explagraphs import ExplaGraphsRecord
from talent_core.stance import StanceRequest, answer_stance, label_models

if TYPE_CHECKING:
    from talent_core.pipeline import Pipeline

log = logging.getLogger(__name__)


def evaluate_stance(pipe: Pipeline, records: Sequence[ExplaGraphsRecord], mode: Mode = "full",
                    progress: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary, per-row dicts) of the stance task over ``records``, each with its own
    explanation graph as S; latency is per question, models already loaded (the first
    question loads them and is not timed)."""
    pipe.models  # noqa: B018  (load before timing)
    rows: list[dict[str, Any]] = []
    last = None
    for rec in tqdm(records, desc="stance", unit="q", disable=not progress):
        graph = "".join(f"({a}; {r}; {b})" for a, r, b in rec.triples)
        t = time.perf_counter()
        out = answer_stance(pipe, StanceRequest(arg1=rec.arg1, arg2=rec.arg2, graph=graph,
                                                mode=mode))
        ms = (time.perf_counter() - t) * 1000
        last = out
        rows.append({"id": rec.id, "source": rec.source, "gold": rec.label,
                     "label": out.label, "correct": out.label == rec.label,
                     "scores": {s.label: s.score for s in out.scores},
                     "evidence": out.evidence, "latency_ms": round(ms, 1)})
    summary = stance_metrics([r["gold"] for r in rows], [r["label"] for r in rows])
    lat = [r["latency_ms"] for r in rows]
    summary.update(
        format="explagraphs", mode=mode,
        latency_ms={"mean": round(statistics.fmean(lat), 1),
                    "p50": round(statistics.median(lat), 1), "max": max(lat)} if lat else None,
        generator=last.generator if last else None, frozen=last.frozen if last else [],
        adapters_task=last.adapters_task if last else None,
        adapters=last.adapters if last else {},
        notes=[n for n in (last.notes if last else []) if "frozen" in n],
    )
    return summary, rows


def use_label_models(pipe: Pipeline) -> None:
    """The report's models for ExplaGraphs: the label-task ones of `stance.label_models`
    (the shipped ExplaGraphs adapters when the loaded ones serve another task; the frozen
    base model where there is none, said in the log); the run configuration then names the
    adapter directories that answer."""
    r, g, trained = label_models(pipe)
    if (r, g) == pipe.models:
        return
    if r.adapter is None and g.adapter is None:
        log.warning("ExplaGraphs: no label-task adapters%s: the frozen base model answers",
                    f" (the loaded ones were trained for {trained!r})" if trained else "")
        pipe.use_models(r, g, adapters=False)  # the loaded weights, prompted for the label task
        return
    pipe.use_models(r, g)
    pipe.retriever_dir = r.lm.paths.get(r.adapter) if r.adapter else None
    pipe.generator_dir = g.lm.paths.get(g.adapter) if g.adapter else None
    log.info("ExplaGraphs: label-task adapters answer (retriever %s, generator %s)",
             pipe.retriever_dir or "frozen", pipe.generator_dir or "frozen")


def with_stance(results: list[dict[str, Any]], rows: Sequence[dict[str, Any]], fmt: str
                ) -> list[dict[str, Any]]:
    """ExplaGraphs report groups that answered get ``stance``: `stance_metrics` of their
    rows (the first answer is the label; none counts as wrong)."""
    if fmt != "explagraphs":
        return results
    groups = group_rows(rows)
    for g in results:
        if "qa" not in g:
            continue
        grp = groups[(g["method"], g["mode"], g["label"])]
        g["stance"] = stance_metrics([(r.get("gold") or [""])[0] for r in grp],
                                     [(r.get("answer") or ["(none)"])[0] for r in grp])
    return results
