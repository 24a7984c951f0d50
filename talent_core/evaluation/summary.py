"""Summaries of rows (pure): `summarise` (the `talent eval` JSON summary) and the report's
per-group results (`results`: per method x mode x sweep point, with per-hop and per-type
breakdowns)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from talent_core.evaluation.latency import STAGES, stage_latency
from talent_core.evaluation.methods import point_label
from talent_core.evaluation.metrics import macro_average


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Macro averages over rows (pure)."""
    out: dict[str, Any] = {"n": len(rows)}
    for key in ("candidate", "selected", "selected_in_s"):
        scored = [r[key] for r in rows if key in r]
        if scored:
            out[key] = macro_average(scored)
    qa = [r["hit@1"] for r in rows if "hit@1" in r]
    if qa:  # an abstention ("not in the KG") of a run that answers counts as a miss
        skipped = [0.0 for r in rows if r.get("not_in_kg") and "hit@1" not in r]
        qa += skipped
        out["hit@1"] = sum(qa) / len(qa)
        f1 = [r["answer_f1"] for r in rows if "answer_f1" in r]
        out["answer_f1"] = sum(f1 + skipped) / len(f1 + skipped) if f1 else None
    out["abstained"] = sum(bool(r.get("not_in_kg")) for r in rows) / max(1, len(rows))
    if any("error" in r for r in rows):  # the language-model server failed (misses above)
        out["errors"] = sum("error" in r for r in rows)
    ooc = [r["out_of_candidate"] for r in rows if "out_of_candidate" in r]
    if ooc:
        names = [o for lst in ooc for o in lst]
        out["out_of_candidate_per_question"] = len(names) / len(ooc)
        out["out_of_candidate_grounded"] = (
            sum(o["grounded"] for o in names) / len(names) if names else 0.0
        )
    timings = {k: stage_latency(rows, k) for k in ("retriever", "generator", "total")}
    out["timings"] = {k: v for k, v in timings.items() if v}
    out["truncated"] = sum(bool(r["truncated"]) for r in rows)
    runaway = [r["selection_truncated"] for r in rows if "selection_truncated" in r]
    if runaway:
        out["selection_truncated"] = sum(runaway)
    return out


def _mean(vals: Sequence[float]) -> float:
    return sum(vals) / len(vals) if vals else 0.0


def _r(x: Any) -> Any:
    """Numbers rounded to 6 places (recursively), so reports compare exactly."""
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: _r(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_r(v) for v in x]
    return x


def summarise_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Macro averages of one group of rows (pure): `summarise` plus the node set,
    V̂ \\ S, the answer metrics, the hallucination rate and every stage's latency."""
    rows = list(rows)
    base = summarise(rows)
    out: dict[str, Any] = {"n": len(rows)}
    retrieval: dict[str, Any] = {}
    llm = any(r["mode"] != "retrieval" for r in rows)  # S is a part only beside V̂
    for key, label in (("nodes", "nodes"), ("candidate", "S"), ("selected", "V̂"),
                       ("selected_in_s", "V̂∩S"), ("selected_out_s", "V̂\\S")):
        scored = [r[key] for r in rows if key in r and (llm or key != "candidate")]
        if scored:
            retrieval[label] = macro_average(scored)
    if retrieval:
        out["retrieval"] = retrieval
    qa_rows = [r for r in rows if "hit@1" in r]
    if qa_rows:
        out["qa"] = {k: _mean([r[k] for r in qa_rows])
                     for k in ("hit@1", "hit@any", "substring_hit", "answer_f1")}
    if "out_of_candidate_per_question" in base:
        sel = [r for r in rows if "hallucinated" in r]
        out["out_of_candidate"] = {
            "per_question": base["out_of_candidate_per_question"],
            "grounded": base["out_of_candidate_grounded"],
            "hallucination_rate": (sum(r["hallucinated"] for r in sel)
                                   / max(1, sum(r.get("v_hat_size", 0) for r in sel))),
        }
    stages = [s for s in STAGES if any(s in r.get("timings_ms", {}) for r in rows)]
    out["latency"] = {s: stage_latency(rows, s) for s in stages}
    out["truncated"] = base["truncated"]
    out["abstained"] = base["abstained"]
    if "selection_truncated" in base:
        out["selection_truncated"] = base["selection_truncated"]
    return _r(out)


def _brief(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    s = summarise_rows(rows)
    out: dict[str, Any] = {"n": s["n"]}
    if "retrieval" in s:
        nodes = s["retrieval"]["nodes"]
        out.update(hit=nodes["hit"], recall=nodes["recall"], size=nodes["size"])
    if "qa" in s:
        out["hit@1"] = s["qa"]["hit@1"]
    return out


def group_rows(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict]]:
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["mode"], point_label(r["point"])), []).append(r)
    return groups


def results(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (method, mode, sweep point), with per-hop and per-type breakdowns."""
    out = []
    for (method, mode, label), grp in group_rows(rows).items():
        entry: dict[str, Any] = {"method": method, "mode": mode, "point": grp[0]["point"],
                                 "label": label, **summarise_rows(grp)}
        for key, name in (("hop", "by_hop"), ("qtype", "by_type")):
            values = sorted({r[key] for r in grp if r.get(key) is not None}, key=str)
            if values:
                entry[name] = {str(v): _brief([r for r in grp if r.get(key) == v])
                               for v in values}
        out.append(entry)
    return out


def strip_timings(x: Any) -> Any:
    """``x`` without latency / timings (what the determinism comparison reads)."""
    if isinstance(x, dict):
        return {k: strip_timings(v) for k, v in x.items() if k not in ("latency", "timings_ms")}
    if isinstance(x, list):
        return [strip_timings(v) for v in x]
    return x

