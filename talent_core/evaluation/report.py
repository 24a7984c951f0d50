"""Evaluation reports (`talent eval FILE... --report DIR`): every retrieval method and LLM
ablation side by side in one reproducible run.

A report is a grid of rows: question x method x mode x sweep point (`methods`, `sweep`).
Candidates are retrieved once per question and retrieval config and shared by the methods
that read them (`runner`). Rows are appended to ``rows.jsonl`` as they are computed; a rerun
skips the rows already there (same question, method, mode, point and configuration hash), so
an interrupted run resumes. Then report.json, report.md (`markdown`) and the plots (`plots`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from talent_core.evaluation import provenance
from talent_core.evaluation.datasets import read_items, select_items
from talent_core.evaluation.markdown import DEFINITIONS, markdown
from talent_core.evaluation.methods import METHODS, MODE_ORDER, Point, method_modes, project
from talent_core.evaluation.plots import write_plots
from talent_core.evaluation.runner import Runner, plan, read_rows
from talent_core.evaluation.stance import use_label_models, with_stance
from talent_core.evaluation.summary import results
from talent_core.evaluation.sweep import ReportError, ReportOptions, sweep_points
from talent_core.retrieval.config import RetrievalConfig

if TYPE_CHECKING:
    from talent_core.pipeline import Pipeline

log = logging.getLogger(__name__)


def run_config(pipe: Pipeline, options: ReportOptions) -> dict[str, Any]:
    """What every row's numbers depend on besides its question, method, mode and point
    (its hash keys the rows: a rerun with another configuration recomputes them)."""
    cfg: dict[str, Any] = {"format": options.fmt}
    if options.fmt != "explagraphs":
        cfg["retrieval"] = pipe.retrieval_config().model_dump()
        if any(METHODS[m].retriever == "subgraphrag" for m in options.methods):
            # lazy as in retrieval.candidate: the scorer module is only read for subgraphrag
            from talent_core.retrieval.subgraphrag import WEIGHTS_FILE, resolve_scorer

            scorer = resolve_scorer(cfg["retrieval"]["scorer"], pipe.settings.embedding_model)
            cfg["scorer_sha256"] = provenance.sha256_file(scorer / WEIGHTS_FILE)
    if options.llm:
        cfg.update(base_model=pipe.base_model or pipe.settings.base_model,
                   retriever_dir=str(pipe.retriever_dir) if pipe.retriever_dir else None,
                   generator_dir=str(pipe.generator_dir) if pipe.generator_dir else None,
                   lambda_dirs={k: v for s in options.sweeps for k, v in s.dirs.items()},
                   retriever_max_new_tokens=pipe.settings.retriever_max_new_tokens,
                   generator_max_new_tokens=pipe.settings.generator_max_new_tokens)
    if options.annotations is not None:
        cfg["annotations_sha256"] = provenance.sha256_file(options.annotations)
    return cfg


def run_report(pipe: Pipeline, options: ReportOptions, out_dir: Path,
               command: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Compute the missing rows (appended to ``out_dir/rows.jsonl``), then write
    report.json, report.md and the plots; returns the report."""
    t_start = time.time()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    items = select_items(read_items(options.files, options.fmt, options.annotations),
                         options.limit, options.sample_seed, options.offset)
    if not items:
        raise ReportError("no questions to evaluate")
    if options.llm and options.fmt == "explagraphs":
        use_label_models(pipe)
    config = run_config(pipe, options)
    chash = provenance.config_hash(config)
    rows_path = out_dir / "rows.jsonl"
    done: dict[str, dict[str, Any]] = {}
    stale = 0
    for row in read_rows(rows_path):
        if row.get("config") == chash:
            done[row["key"]] = row
        else:
            stale += 1
    if stale:
        log.warning("%d rows of %s were computed with another configuration: ignored",
                    stale, rows_path)
    points = sweep_points(options.sweeps)
    specs = plan(items, options.methods, options.modes, points)
    todo = [s for s in specs if s.key not in done]
    log.info("%d rows: %d already in %s, %d to compute", len(specs), len(specs) - len(todo),
             rows_path, len(todo))
    runner = Runner(pipe, options.sweeps)
    t_rows = time.perf_counter()
    with rows_path.open("a", encoding="utf-8") as sink:
        for spec in tqdm(todo, desc="report", unit="row", disable=not progress):
            row = runner.row(spec, chash)
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
            sink.flush()
            done[spec.key] = row
    rows = [done[s.key] for s in specs]
    stats = pipe.stats().model_dump() if options.fmt != "explagraphs" else None
    hops: dict[str, int] = {}
    for it in items:
        hops[str(it.hop)] = hops.get(str(it.hop), 0) + 1
    report: dict[str, Any] = {
        "command": command,
        "config": {**config, "files": [str(f) for f in options.files],
                   "methods": options.methods, "modes": options.modes,
                   "sweeps": [{"name": s.name, "values": s.values, **({"dirs": s.dirs}
                               if s.dirs else {})} for s in options.sweeps],
                   "limit": options.limit, "offset": options.offset,
                   "sample_seed": options.sample_seed, "config_hash": chash},
        "dataset": {
            "files": [{"path": str(f), "sha256": provenance.sha256_file(f)} for f in options.files],
            "questions": len(items), "questions_by_hop": hops,
            "with_type": sum(1 for it in items if it.qtype),
            "store": stats,
            "annotations": str(options.annotations) if options.annotations else None,
        },
        "code": provenance.code_commit(),
        "packages": provenance.package_versions(),
        "machine": provenance.machine(),
        "methods": {n: {"description": METHODS[n].description, "llm": METHODS[n].llm,
                        "modes": method_modes(METHODS[n], options.modes)}
                    for n in options.methods},
        "definitions": DEFINITIONS,
        "results": sorted(with_stance(results(rows), rows, options.fmt), key=lambda g: (
            options.methods.index(g["method"]), MODE_ORDER.index(g["mode"]),
            [points.index(p) for p in points if project(p, METHODS[g["method"]], g["mode"])
             == g["point"]][0])),
        "run": {"rows": len(rows), "computed": len(todo), "resumed": len(specs) - len(todo),
                "retrievals": runner.retrievals,
                "seconds_computing": round(time.perf_counter() - t_rows, 3),
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "wall_s": round(time.time() - t_start, 3)},
    }
    report["reference_point"] = reference_point(options, pipe)
    report["plots"] = write_plots(report, out_dir, report["reference_point"])
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False)
                                         + "\n", encoding="utf-8")
    (out_dir / "report.md").write_text(markdown(report), encoding="utf-8")
    return report


def reference_point(options: ReportOptions, pipe: Pipeline) -> Point:
    """The sweep point the bar charts show: each swept setting at the run's configured
    value when it is swept (k: k_nodes), else its first value."""
    base = pipe.retrieval if options.fmt != "explagraphs" else RetrievalConfig()
    ref: Point = {}
    for s in options.sweeps:
        current = base.k_nodes if s.name == "k" else getattr(base, s.name, None)
        ref[s.name] = current if current in s.values else s.values[0]
    return ref

