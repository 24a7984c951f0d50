"""Evaluation over a question file: the same Pipeline the CLI and UI use.

Per question: the candidate S (node names) and, with a language model, the retriever's
output V-hat (selected names of S plus out-of-candidate names) and the generator's answers.
Metrics (talent_core.metrics): Hit/Recall/Precision/F1/size of S and of V-hat against the
gold answers, and Hit@1 of the generated answers. Macro averages over questions.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm

from talent_core.metrics import hit_at_1, macro_average, name_set, retrieval_scores
from talent_core.models import Answer, Decode
from talent_core.pipeline import Mode, Pipeline
from talent_core.questions import QARecord
from talent_core.text import answer_key

log = logging.getLogger(__name__)


def score_answer(rec: QARecord, ans: Answer) -> dict[str, Any]:
    """One row: what was retrieved/selected/answered and its scores (pure)."""
    cand_names = [n.name for n in ans.candidate.nodes]
    gold = name_set(rec.answers)
    row: dict[str, Any] = {
        "id": rec.id,
        "question": rec.question,
        "gold": rec.answers,
        "candidate": retrieval_scores(cand_names, rec.answers).as_dict(),
        "truncated": ans.candidate.truncated,
        "timings_ms": ans.timings_ms,
    }
    if ans.selection is not None:
        sel = ans.selection
        in_s = [n.name for n in sel.selected]
        outside = [o.name for o in sel.out_of_candidate]
        row["selected"] = retrieval_scores(in_s + outside, rec.answers).as_dict()
        row["selected_in_s"] = retrieval_scores(in_s, rec.answers).as_dict()
        row["out_of_candidate"] = [o.model_dump() for o in sel.out_of_candidate]
        row["selection_truncated"] = sel.truncated  # ran to max_new_tokens without EOS
        if sel.ranked:  # ranked retriever: (score, is gold) per node name, for size/coverage
            row["retriever_ranked"] = [[r.score, int(answer_key(r.name) in gold)]
                                       for r in sel.ranked]
    row["decode"] = ans.decode
    if ans.ranked:
        # [name, score, is gold] (+ [model score, path prior] under a relation-path plan)
        row["answer_ranked"] = [[r.name, r.score, int(answer_key(r.name) in gold)]
                                + ([r.lm_score, r.prior] if r.prior is not None else [])
                                for r in ans.ranked[:20]]
    if ans.plan:
        row["plan"] = [[p.text, p.prob, p.ends] for p in ans.plan]
    if ans.raw or ans.answer:
        row["answer"] = ans.answer
        row["hit@1"] = hit_at_1(ans.answer, rec.answers)
    return row


def latency(rows: list[dict[str, Any]], key: str) -> dict[str, float] | None:
    """Mean / p50 / p95 (ms) of one stage's timing over rows (pure); None without any."""
    vals = sorted(r["timings_ms"][key] for r in rows if key in r.get("timings_ms", {}))
    if not vals:
        return None
    return {"mean_ms": round(statistics.mean(vals)), "p50_ms": round(vals[len(vals) // 2]),
            "p95_ms": round(vals[min(len(vals) - 1, int(0.95 * len(vals)))])}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Macro averages over rows (pure)."""
    out: dict[str, Any] = {"n": len(rows)}
    for key in ("candidate", "selected", "selected_in_s"):
        scored = [r[key] for r in rows if key in r]
        if scored:
            out[key] = macro_average(scored)
    qa = [r["hit@1"] for r in rows if "hit@1" in r]
    if qa:
        out["hit@1"] = sum(qa) / len(qa)
    ooc = [r["out_of_candidate"] for r in rows if "out_of_candidate" in r]
    if ooc:
        names = [o for lst in ooc for o in lst]
        out["out_of_candidate_per_question"] = len(names) / len(ooc)
        out["out_of_candidate_grounded"] = (
            sum(o["grounded"] for o in names) / len(names) if names else 0.0
        )
    timings = {k: latency(rows, k) for k in ("retriever", "generator", "total")}
    out["timings"] = {k: v for k, v in timings.items() if v}
    out["truncated"] = sum(bool(r["truncated"]) for r in rows)
    runaway = [r["selection_truncated"] for r in rows if "selection_truncated" in r]
    if runaway:
        out["selection_truncated"] = sum(runaway)
    return out


def evaluate(
    pipe: Pipeline, records: Iterable[QARecord], mode: Mode = "full", progress: bool = True,
    decode: Decode | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rows = []
    for rec in tqdm(list(records), desc=f"eval ({mode})", disable=not progress, unit="q"):
        ans = pipe.ask(rec.question, rec.topic_entities or None, mode=mode, decode=decode)
        rows.append(score_answer(rec, ans))
    return summarise(rows), rows
