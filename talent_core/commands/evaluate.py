"""`talent eval`: metrics over a question file; with --report DIR, every method, LLM mode and
sweep point (talent_core.evaluation). The pipeline and the evaluation modules are imported
when the command runs: `talent --help` imports this module."""

from __future__ import annotations

import itertools
import json as _json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from talent_core.commands.console import fail, setup_logging
from talent_core.commands.options import (
    DEFAULT_MODELS,
    NONE_GIVEN,
    ModelChoice,
    Verbose,
    declared_options,
    model_choice,
    option_name,
    question_format,
    retrieval_config,
    retrieval_options,
    with_options,
)
from talent_core.commands.shared import empty_store_notice, frozen_notice, pipeline_for
from talent_core.llm.data import write_jsonl
from talent_core.questions import QUESTION_FORMATS, read_questions

# the options of --report alone (ReportOptions.parse reads them), where eval_cmd declares
# `report_only`: it receives the given ones as one dict
REPORT_ONLY = {
    "methods": Annotated[str | None, typer.Option(
        "--methods", help="--report: comma list of vector, pcst-paper, pcst-default, "
        "llm-ranked, llm-free (explagraphs: graph, llm-ranked, llm-free); default: the "
        "retrieval-only ones (explagraphs: graph,llm-ranked)")],
    "modes": Annotated[str | None, typer.Option(
        "--modes", help="--report: LLM modes of the llm-* methods, comma list of full, "
        "no-retriever, frozen (default full)")],
    "sweep": Annotated[list[str] | None, typer.Option(
        "--sweep", help="--report, repeatable: k=3,5,10,20 (k_nodes = k_edges = beam = k "
        "together), lambda=0.001:DIR1,0.01:DIR2 (the retriever adapter trained with each "
        "lambda; mode full), or any retrieval setting, e.g. edge_cost=0.25,0.5")],
    "sample_seed": Annotated[int | None, typer.Option(
        "--sample-seed", help="--report with --limit: a seeded sample, balanced over hops")],
    "annotations": Annotated[Path | None, typer.Option(
        "--annotations", help="--report, explagraphs: pseudo-gold nodes (the JSONL of "
        "`talent annotate-explagraphs --examples-out`) for the retrieval metrics")],
}


@retrieval_options
@model_choice
@with_options(declared_options(REPORT_ONLY), into="report_only")
def eval_cmd(
    questions: Annotated[list[Path], typer.Argument(
        metavar="FILE...", help="question file(s) with gold answers (several only with "
        "--report)")],
    fmt: Annotated[str | None, typer.Option(
        "--format", help=" | ".join(QUESTION_FORMATS) + " | explagraphs (the ExplaGraphs TSV: "
        "the stance task, each row's graph as S; accuracy, per class, balanced accuracy, "
        "majority baseline) (default: guessed from the file name)")] = None,
    mode: Annotated[str | None, typer.Option(
        help="retrieval | full | no-retriever (default retrieval; explagraphs: the stance "
        "task's, TALENT_STANCE_MODE)")] = None,
    models: ModelChoice = DEFAULT_MODELS,
    limit: Annotated[int | None, typer.Option(min=1, help="at most N questions (--report: "
                                              "in all, over every file)")] = None,
    offset: Annotated[int, typer.Option(min=0, help="skip the first N questions")] = 0,
    rows_out: Annotated[Path | None, typer.Option("--rows", help="per-question JSONL")] = None,
    report: Annotated[Path | None, typer.Option(
        "--report", help="write a full report into DIR: rows.jsonl (resumable), report.json, "
        "report.md and PNG plots, every method x mode x sweep point")] = None,
    report_only: Mapping[str, Any] = NONE_GIVEN,
    verbose: Verbose = False,
    *,
    retrieval: dict[str, Any],
) -> None:
    """Retrieval metrics of S (and of the LLM retriever's V-hat) and QA Hit@1; with
    --report DIR, every method, LLM mode and sweep point side by side (report.md)."""
    from talent_core.evaluation.runner import evaluate
    from talent_core.pipeline import Pipeline

    setup_logging(verbose)
    if report is not None:
        if models.decode is not None:
            raise fail("--decode: with --report each LLM method has its decoding "
                        "(llm-ranked, llm-free)")
        _eval_report(questions, fmt, models, limit, offset, report, report_only, retrieval)
        return
    given = [option_name(name) for name, value in report_only.items() if value]
    if given:
        raise fail(f"{', '.join(given)} need --report DIR")
    if len(questions) != 1:
        raise fail("give one question file (several only with --report DIR)")
    if fmt == "explagraphs" or (fmt is None and questions[0].suffix.lower() == ".tsv"):
        _eval_stance(questions[0], mode, models, limit, offset, rows_out, retrieval)
        return
    mode = mode or "retrieval"
    if mode not in ("retrieval", "full", "no-retriever"):
        raise fail(f"--mode must be retrieval, full or no-retriever, not {mode!r}")
    qfmt = question_format(fmt, questions[0])
    config = retrieval_config(retrieval)
    pipe = (Pipeline(retrieval=config, question_format=qfmt) if mode == "retrieval" else
            pipeline_for(config, models, qfmt))
    frozen_notice(pipe.frozen_in(mode))  # type: ignore[arg-type]
    empty_store_notice(pipe)
    try:
        recs = itertools.islice(read_questions(questions[0], qfmt), offset,
                                offset + limit if limit else None)
        summary, rows = evaluate(pipe, list(recs), mode=mode)  # type: ignore[arg-type]
    finally:
        pipe.close()
    if rows_out:
        write_jsonl(rows_out, rows)
    typer.echo(_json.dumps(summary))


def _eval_stance(path, mode, models: ModelChoice, limit, offset, rows_out, retrieval) -> None:
    """`talent eval FILE --format explagraphs` (talent_core.evaluation.stance)."""
    from talent_core.config import get_settings
    from talent_core.errors import TalentError
    from talent_core.evaluation.stance import evaluate_stance
    from talent_core.llm.explagraphs import read_explagraphs
    from talent_core.store.memory import MemoryStore

    mode = mode or get_settings().stance_mode  # as `talent ask --stance` answers
    if mode not in ("full", "no-retriever"):
        raise fail(f"--format explagraphs: --mode must be full or no-retriever, not {mode!r} "
                   "(each row's graph is S: there is nothing to retrieve)")
    try:
        records = read_explagraphs(path)[offset:offset + limit if limit else None]
    except (TalentError, OSError) as e:
        raise fail(str(e)) from None
    # each row's graph is S: no store is read
    pipe = pipeline_for(retrieval_config(retrieval), models.for_stance(), store=MemoryStore())
    try:
        summary, rows = evaluate_stance(pipe, records, mode)
    except TalentError as e:
        raise fail(str(e)) from None
    finally:
        pipe.close()
    for note in summary["notes"]:
        typer.echo(f"note: {note}", err=True)
    if rows_out:
        write_jsonl(rows_out, rows)
    typer.echo(_json.dumps(summary))


def _eval_report(questions, fmt, models: ModelChoice, limit, offset, out_dir,
                 report_only: Mapping[str, Any], retrieval) -> None:
    """`talent eval --report DIR` (talent_core.evaluation.report)."""
    from talent_core.evaluation.report import run_report
    from talent_core.evaluation.sweep import ReportError, ReportOptions
    from talent_core.pipeline import Pipeline

    if models.frozen_retriever:
        raise fail("--frozen-retriever: with --report use --modes frozen")
    if fmt is None:
        fmt = ("explagraphs" if questions[0].suffix.lower() == ".tsv"
               else question_format(None, questions[0]))
    config = retrieval_config(retrieval)
    try:
        r = report_only
        options = ReportOptions.parse(questions, fmt, r.get("methods"), r.get("modes"),
                                      r.get("sweep"), config, limit, offset,
                                      r.get("sample_seed"), r.get("annotations"))
    except ReportError as e:
        raise fail(str(e)) from None
    expla = fmt == "explagraphs"
    qfmt = None if expla else fmt
    store = None
    if expla:  # the graph of each example is S: no store is read
        from talent_core.store.memory import MemoryStore

        store = MemoryStore()
    if options.llm:
        pipe = pipeline_for(config, models, qfmt, store=store)  # no --decode, not frozen
        frozen_notice([r for r in pipe.frozen_roles
                        if r == "generator" or set(options.modes) & {"full"}])
    else:
        pipe = Pipeline(retrieval=config, question_format=qfmt, store=store)
    command = "talent " + shlex.join(sys.argv[1:]) if sys.argv[1:] else None
    try:
        rep = run_report(pipe, options, out_dir, command=command)
    except ReportError as e:
        raise fail(str(e)) from None
    finally:
        pipe.close()
    typer.echo(_json.dumps({"report": str(out_dir / "report.md"), "rows": rep["run"]["rows"],
                            "computed": rep["run"]["computed"], "plots": rep["plots"]}))

