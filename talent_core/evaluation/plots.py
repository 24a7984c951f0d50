"""The report's PNG plots: coverage vs size, per hop / type bars, latency per stage and one
plot per swept setting (matplotlib, imported when plotting: it is slow to import)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from talent_core.evaluation.latency import STAGES
from talent_core.evaluation.markdown import series_name
from talent_core.evaluation.methods import METHODS, Point, point_label
from talent_core.retrieval.config import SIZE_FIELD


def _series(res: Sequence[dict[str, Any]], param: str) -> dict[str, list[dict[str, Any]]]:
    """Groups that vary ``param``, by curve (method, mode and the other settings), each
    sorted by the parameter's value."""
    out: dict[str, list[dict[str, Any]]] = {}
    for g in res:
        if param in g["point"]:
            out.setdefault(series_name(g, [param]), []).append(g)
    return {k: sorted(v, key=lambda g: g["point"][param]) for k, v in out.items()}


def _size_series(res: Sequence[dict[str, Any]]) -> dict[str, tuple[str | None,
                                                                 list[dict[str, Any]]]]:
    """Coverage-vs-size curves: per method (and mode and other settings), its groups along
    its retriever's size setting (k for pcst, top_triples, top_egos: `SIZE_FIELD`) when swept,
    sorted by it; a method without one is a single point."""
    out: dict[str, tuple[str | None, list[dict[str, Any]]]] = {}
    for g in res:
        m = METHODS.get(g["method"])
        size = SIZE_FIELD.get(m.retriever or "") if m else None
        param = next((p for p in ("k", size) if p and p in g["point"]
                      and (p != "k" or size == "k_nodes")), None)
        name = series_name(g, [param] if param else [])
        out.setdefault(name, (param, []))[1].append(g)
    return {k: (p, sorted(v, key=lambda g: g["point"][p]) if p else v)
            for k, (p, v) in out.items()}


def _at(res: Sequence[dict[str, Any]], ref: Point) -> list[dict[str, Any]]:
    """The groups at the reference point (each group's own parameters)."""
    return [g for g in res if all(ref.get(k) == v for k, v in g["point"].items())]


def write_plots(report: dict[str, Any], out_dir: Path, ref: Point) -> list[str]:
    """PNG plots (matplotlib, Agg) into ``out_dir``; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = report["results"]
    written: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=120)
        plt.close(fig)
        written.append(name)

    ret = [g for g in res if "retrieval" in g]
    # coverage vs size (TaLenT Figure 3): one curve per method across k (or one point each)
    if ret:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
        for (name, (param, grp)), marker in zip(_size_series(ret).items(),
                                                itertools.cycle("osD^vP*X"), strict=False):
            xs = [g["retrieval"]["nodes"]["size"] for g in grp]
            for ax, metric in zip(axes, ("hit", "recall"), strict=True):
                ys = [100 * g["retrieval"]["nodes"][metric] for g in grp]
                ax.plot(xs, ys, marker=marker, label=name)
                for g, x, y in zip(grp, xs, ys, strict=True):
                    if param:
                        ax.annotate(f"{param}={g['point'][param]}", (x, y), fontsize=7,
                                    textcoords="offset points", xytext=(3, 3))
        for ax, metric in zip(axes, ("Hit", "Recall"), strict=True):
            ax.set_xlabel("mean number of nodes retrieved")
            ax.set_ylabel(f"{metric} of the gold answers (%)")
            ax.set_title(f"Coverage ({metric}) vs size")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        save(fig, "coverage_vs_size.png")
    # per hop / per type bars: Hit@1 where a generator answered, else retrieval Hit
    ref_groups = _at(res, ref)
    for key, title in (("by_hop", "hop"), ("by_type", "question type")):
        grp = [g for g in ref_groups if key in g]
        if not grp:
            continue
        qa = any("hit@1" in b for g in grp for b in g[key].values())
        metric, ylabel = ("hit@1", "Hit@1 (%)") if qa else ("hit", "retrieval Hit (%)")
        grp = [g for g in grp if any(metric in b for b in g[key].values())]
        cats = sorted({c for g in grp for c in g[key]}, key=str)
        width = 0.8 / max(1, len(grp))
        fig, ax = plt.subplots(figsize=(min(16, max(6, 0.6 * len(cats) * max(1, len(grp)))), 5))
        for i, g in enumerate(grp):
            xs = [j + i * width for j in range(len(cats))]
            ys = [100 * g[key].get(c, {}).get(metric, 0.0) for c in cats]
            ax.bar(xs, ys, width, label=series_name(g, ref))
        ax.set_xticks([j + width * (len(grp) - 1) / 2 for j in range(len(cats))])
        ax.set_xticklabels(cats, rotation=30 if key == "by_type" else 0, ha="right"
                           if key == "by_type" else "center", fontsize=8)
        ax.set_xlabel(title)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 105)
        ax.set_xlim(-0.6, len(cats))
        ax.set_title(f"{ylabel.split(' (')[0]} per {title}"
                     + (f" at {point_label(ref)}" if ref else ""))
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1))
        ax.grid(axis="y", alpha=0.3)
        save(fig, f"{key}.png")
    # latency per stage: one bar per method / mode, stacked by stage (p50), total p95 marked
    lat = [g for g in ref_groups if g["latency"]]
    if lat:
        parts = [st for st in STAGES if st not in ("retrieve_total", "total")
                 and any(g["latency"].get(st) for g in lat)]
        fig, ax = plt.subplots(figsize=(12, 1.5 + 0.45 * len(lat)))
        ys = list(range(len(lat)))
        left = [0.0] * len(lat)
        for st in parts:
            widths = [(g["latency"].get(st) or {}).get("p50_ms", 0) for g in lat]
            ax.barh(ys, widths, 0.6, left=left, label=f"{st} (p50)")
            left = [a + b for a, b in zip(left, widths, strict=True)]
        p95 = [(g["latency"].get("total") or {}).get("p95_ms") for g in lat]
        ax.plot([x if x is not None else float("nan") for x in p95], ys, "k|",
                markersize=14, label="total p95")
        ax.set_yticks(ys)
        ax.set_yticklabels([series_name(g, ref) for g in lat], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("latency per question (ms): stages stacked at their p50")
        ax.set_title("Latency per stage" + (f" at {point_label(ref)}" if ref else ""))
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.grid(axis="x", alpha=0.3)
        save(fig, "latency.png")
    # sweeps: node-set Hit / Recall, mean nodes and Hit@1 against each swept setting
    for param in dict.fromkeys(k for g in res for k in g["point"]):
        curves = _series(res, param)
        panels = [("Hit / Recall of the node set (%)", "retrieval"), ("mean nodes", "size")]
        if any("qa" in g for grp in curves.values() for g in grp):
            panels.append(("Hit@1 of the answers (%)", "qa"))
        fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.5))
        colours = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
        for (name, grp), marker, colour in zip(curves.items(), itertools.cycle("osD^vP*X"),
                                               colours, strict=False):
            xs = [g["point"][param] for g in grp]
            for ax, (_, what) in zip(axes, panels, strict=True):
                if what == "retrieval" and all("retrieval" in g for g in grp):
                    ax.plot(xs, [100 * g["retrieval"]["nodes"]["hit"] for g in grp],
                            marker=marker, color=colour, label=f"{name} Hit")
                    ax.plot(xs, [100 * g["retrieval"]["nodes"]["recall"] for g in grp],
                            marker=marker, color=colour, linestyle="--", label=f"{name} Recall")
                elif what == "size" and all("retrieval" in g for g in grp):
                    ax.plot(xs, [g["retrieval"]["nodes"]["size"] for g in grp], marker=marker,
                            color=colour, label=name)
                elif what == "qa" and all("qa" in g for g in grp):
                    ax.plot(xs, [100 * g["qa"]["hit@1"] for g in grp], marker=marker,
                            color=colour, label=name)
        for ax, (label, _) in zip(axes, panels, strict=True):
            ax.set_xlabel("lambda (retriever adapter)" if param == "lambda"
                          else "k (k_nodes = k_edges = beam)" if param == "k" else param)
            if param == "lambda" and all(v > 0 for g in res for v in
                                         [g["point"].get("lambda", 1)]):
                ax.set_xscale("log")
            ax.set_ylabel(label)
            ax.set_title(f"{label.split(' (')[0]} vs {param}")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
        save(fig, f"sweep_{param}.png")
    return written
