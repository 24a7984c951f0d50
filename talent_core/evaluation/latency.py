"""The one percentile definition and latency summary, read by reports and bench/ scripts, so
that every published p50 / p95 means the same thing.

Percentile q of n timings: the sorted values' element at index min(n - 1, floor(q/100 * n))
(no interpolation; p50 of an even count is the upper middle value).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

# the report's latency stages, in table order (`retrieve_*`: the candidate's own stages;
# `vector`: the stage name of rows written before `vector` became the retriever method)
STAGES = ("retrieve_seeds", "retrieve_embed", "retrieve_neighbourhood", "retrieve_pcst",
          "retrieve_vector", "retrieve_total", "vector", "retriever", "generator", "total")


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0-100) of ``values`` as defined above; None without values."""
    vals = sorted(values)
    return _pick(vals, q) if vals else None


def _pick(sorted_vals: list[float], q: float) -> float:
    return sorted_vals[min(len(sorted_vals) - 1, int(q / 100 * len(sorted_vals)))]


def latency_summary(values: Iterable[float]) -> dict[str, float] | None:
    """{mean_ms, p50_ms, p95_ms} of timings in ms, rounded to whole ms; None without any."""
    vals = sorted(values)
    if not vals:
        return None
    return {"mean_ms": round(statistics.mean(vals)), "p50_ms": round(_pick(vals, 50)),
            "p95_ms": round(_pick(vals, 95))}


def stage_latency(rows: Iterable[Mapping[str, Any]], key: str) -> dict[str, float] | None:
    """`latency_summary` of one stage's timing (``timings_ms[key]``) over rows (pure)."""
    return latency_summary(r["timings_ms"][key] for r in rows if key in r.get("timings_ms", {}))
