"""`talent`: the one CLI. The UI and the evaluation call the same Pipeline.

  talent load PATH --format ...     bulk load (loaders/)
  talent stats [--json]
  talent retrieve "Q" [--json]      candidate subgraph S; or --questions FILE for many
  talent ask "Q" [--retriever DIR] [--generator DIR] [--no-retriever] [--json]
  talent train retriever|generator  LoRA training (talent_core/llm)
  talent examples FILE              candidate subgraphs + gold answers -> training JSONL
  talent eval FILE                  retrieval and QA metrics over a question file
  talent eval FILE... --report DIR  every method / LLM mode / sweep point: report.md, plots
  talent app | demo                 the Streamlit UI (demo: load the bundled sample KG first)
  talent export --neo4j-import DIR  the store as neo4j-admin bulk-import CSVs + import.sh
"""

from __future__ import annotations

import json as _json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

from loaders.cli import load as _load_cmd
from loaders.cli import stats as _stats_cmd
from talent_core.cli_options import model_options, option_name, with_options
from talent_core.questions import QUESTION_FORMATS, QuestionFormat, detect_question_format
from talent_core.retrieval.config import RetrievalConfig, RetrievalSettingsError, apply_overrides
from talent_core.text import TextInputError, check_question, printable, printable_json

# Commands whose modules import torch / transformers (seconds) are imported only when they
# run: `talent --help` and every other command stay fast. name -> (builder, short help)
TRAIN_HELP = "LoRA training of the LLM retriever / generator; SubgraphRAG's triple scorer."
ANNOTATE_HELP = "Pseudo-gold reasoning nodes for ExplaGraphs with an LLM (paper Appendix A.2)."


def _train_app() -> typer.Typer:
    from talent_core.llm import cli as _llm_cli
    from talent_core.retrieval.planner_train import train_planner
    from talent_core.retrieval.subgraphrag_train import train_subgraphrag

    train_app = typer.Typer(no_args_is_help=True, help=TRAIN_HELP, add_completion=False)
    train_app.command("retriever")(_llm_cli.train_retriever)
    train_app.command("generator")(_llm_cli.train_generator)
    train_app.command("tune-ranking")(_llm_cli.tune_ranking)
    train_app.command("subgraphrag")(train_subgraphrag)
    train_app.command("planner")(train_planner)
    return train_app


def _annotate_app() -> typer.Typer:
    from talent_core.llm import cli as _llm_cli

    one = typer.Typer(add_completion=False)
    one.command("annotate-explagraphs")(_llm_cli.annotate_explagraphs)
    return one


LAZY = {"train": (_train_app, TRAIN_HELP), "annotate-explagraphs": (_annotate_app, ANNOTATE_HELP)}


class _LazyGroup(TyperGroup):
    """The `talent` group: LAZY commands are built when they are invoked (or their own help
    is asked); listing them in `talent --help` shows a stub with their short help."""

    _resolving = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *LAZY]

    def resolve_command(self, ctx: click.Context, args: list[str]):
        self._resolving = True
        try:
            return super().resolve_command(ctx, args)
        finally:
            self._resolving = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in LAZY:
            return super().get_command(ctx, cmd_name)
        build, short = LAZY[cmd_name]
        if not self._resolving:
            return click.Command(cmd_name, help=short, short_help=short)
        cmd = typer.main.get_command(build())
        cmd.name = cmd_name
        return cmd

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a data dir the embedded store refuses (another user's, or one
        others could write) is an error message and exit 2 in every command."""
        try:
            return super().invoke(ctx)
        except _data_dir_error() as e:
            raise _fail(str(e)) from None


def _planner_error() -> type[Exception]:
    from talent_core.retrieval.planner import PlannerError

    return PlannerError


def _data_dir_error() -> type[Exception]:
    from talent_core.store.falkordb_server import DataDirError

    return DataDirError


def _scorer_error() -> type[Exception]:
    """SubgraphRAG's ScorerError, imported when an exception is being matched (an `except`
    clause evaluates its classes only then)."""
    from talent_core.retrieval.subgraphrag import ScorerError

    return ScorerError


app = typer.Typer(cls=_LazyGroup, add_completion=False, no_args_is_help=True, help=__doc__)
app.command("load")(_load_cmd)
app.command("stats")(_stats_cmd)

REPO = Path(__file__).resolve().parents[1]
DEMO_KG = Path(__file__).resolve().parent / "demo" / "metaqa" / "kb.txt.gz"  # CC BY 3.0


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _fail(msg: str) -> typer.Exit:
    typer.echo(f"error: {printable(msg, keep_newlines=True)}", err=True)
    return typer.Exit(code=2)


# shared options ---------------------------------------------------------------------------
# one --option per RetrievalConfig field (--k-nodes, --k-edges, --beam, --hops, --edge-cost,
# --prizes, --fanout, ...): the command receives the given ones as `retrieval`
retrieval_options = with_options(model_options(RetrievalConfig), into="retrieval")
QuestionFormatOpt = Annotated[str | None, typer.Option(
    "--format", help=" | ".join(QUESTION_FORMATS) + " (default: guessed from the file name; "
    "a typed question: TALENT_QUESTION_FORMAT)")]
Topic = Annotated[
    list[str] | None, typer.Option("--topic", help="topic entity name (repeatable)")
]
DecodeOpt = Annotated[str | None, typer.Option(
    "--decode", help="ranked: every candidate name scored by the model, answers are KG nodes "
    "(default, TALENT_DECODE); free: the paper's greedy decoding")]
AdaptersOpt = Annotated[str | None, typer.Option(
    "--adapters", help="bundled (the shipped trained adapters; default, TALENT_ADAPTERS), "
    "none (the frozen base model), or a directory with retriever/ and generator/")]
GeneratorTypeOpt = Annotated[str | None, typer.Option(
    "--generator-type", help="text (the context as CSV rows; default, TALENT_GENERATOR_TYPE) "
    "or graph-prompt (G-Retriever: the rows plus GNN soft tokens; adapters' generator-graph/ "
    "or --generator DIR)")]
PlannerOpt = Annotated[str | None, typer.Option(
    "--planner", help="the relation-path planner that re-weights ranked answers: bundled "
    "(the shipped one whose relations the store holds; default, TALENT_PLANNER), none, or a "
    "directory from `talent train planner`")]
FrozenRetriever = Annotated[bool, typer.Option(
    "--frozen-retriever", help="the retriever runs without adapter (ablation)")]


def _decode(decode: str | None) -> str | None:
    if decode not in (None, "free", "ranked"):
        raise _fail(f"--decode must be free or ranked, not {decode!r}")
    return decode


def _pipeline(config, retriever, generator, base_model, adapters, frozen_retriever, decode,
              question_format=None, store=None, generator_type=None, planner=None):
    """The Pipeline for ask / eval, with a clear message for a bad adapter choice."""
    from talent_core.pipeline import Pipeline

    if generator_type not in (None, "text", "graph-prompt"):
        raise _fail(f"--generator-type must be text or graph-prompt, not {generator_type!r}")

    for d in (retriever, generator):
        if d is not None and not d.is_dir():
            raise _fail(f"{d}: not an adapter directory")
    if frozen_retriever and retriever is not None:
        raise _fail("--frozen-retriever and --retriever exclude each other")
    try:
        return Pipeline(retrieval=config, retriever_dir=retriever, generator_dir=generator,
                        base_model=base_model, adapters=adapters,
                        frozen_retriever=frozen_retriever, decode=_decode(decode),
                        question_format=question_format, store=store,
                        generator_type=generator_type, planner=planner)
    except FileNotFoundError as e:
        raise _fail(str(e)) from None


def _empty_store_notice(pipe) -> None:
    """An empty store is said on stderr (where it is, and how to fill or choose one): a
    question over it would silently retrieve nothing."""
    stats = pipe.stats()
    if stats.triples == 0:
        typer.echo(f"note: the store {stats.store or ''} is empty: load a KG with `talent load` "
                   "or `talent demo --no-app`, or set TALENT_DATA_DIR to a loaded store's "
                   "folder" + (" (./.talent, the former default, is here: "
                               "TALENT_DATA_DIR=.talent opens it)"
                               if Path(".talent").is_dir() and Path(".talent").resolve()
                               != Path(pipe.settings.data_dir).expanduser().resolve()
                               else ""), err=True)


def _frozen_notice(roles: list[str]) -> None:
    if roles:
        typer.echo("note: no trained adapter for the " + " and the ".join(roles)
                   + ": the frozen base model runs in its place", err=True)


def _retrieval_config(given: dict[str, Any]) -> RetrievalConfig:
    """RetrievalConfig from the given retrieval options (the others keep their defaults);
    a bad value exits with code 2 and a message naming the option."""
    try:
        return apply_overrides(RetrievalConfig(), **given)
    except RetrievalSettingsError as e:
        raise _fail("; ".join(f"{option_name(f)}: {m}" for f, m in e.problems)) from None


def _question_format(fmt: str | None, path: Path | None) -> QuestionFormat | None:
    """The --format of a question file (guessed from its name when not given); None for a
    typed question without --format (the Pipeline's default)."""
    if fmt is not None and fmt not in QUESTION_FORMATS:
        raise _fail(f"--format must be {' or '.join(QUESTION_FORMATS)}, not {fmt!r}")
    if fmt is None and path is not None:
        return detect_question_format(path)
    return fmt  # type: ignore[return-value]


def candidate_json(candidate) -> dict:
    """The `talent retrieve --json` shape."""
    return {
        "method": candidate.method,
        "seeds": [s.model_dump() for s in candidate.seeds],
        "nodes": [
            {"id": n.id, "name": n.name, "prize": n.prize, "seed": n.seed} for n in candidate.nodes
        ],
        "edges": [
            {"src": e.src, "rel": e.rel, "dst": e.dst, "prize": e.prize} for e in candidate.edges
        ],
        "truncated": candidate.truncated,
        "timings_ms": candidate.timings_ms,
    }


@app.command()
@retrieval_options
def retrieve(
    question: Annotated[str | None, typer.Argument(
        help="the question; names in square brackets are topic entities")] = None,
    questions: Annotated[
        Path | None, typer.Option("--questions", help="a question file: one JSON line each")
    ] = None,
    fmt: QuestionFormatOpt = None,
    limit: Annotated[int | None, typer.Option(min=1)] = None,
    topic: Topic = None,
    json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    verbose: Annotated[bool, typer.Option("-v")] = False,
    *,
    retrieval: dict[str, Any],
) -> None:
    """Candidate subgraph S for a question (or every question of --questions FILE)."""
    from talent_core.pipeline import Pipeline
    from talent_core.questions import QuestionFileError, read_questions

    _logging(verbose)
    if (question is None) == (questions is None):
        raise _fail("give either a QUESTION or --questions FILE")
    qfmt = _question_format(fmt, questions)
    config = _retrieval_config(retrieval)
    pipe = Pipeline(retrieval=config, question_format=qfmt)
    _empty_store_notice(pipe)
    try:
        if question is not None:
            try:
                cand = pipe.retrieve(question, topic or None)
            except (TextInputError, _scorer_error()) as e:
                raise _fail(str(e)) from None
            if json:
                typer.echo(printable_json(candidate_json(cand)))
            else:
                _print_candidate(cand)
            return
        try:
            for rec in read_questions(questions, qfmt, limit):
                cand = pipe.retrieve(rec.question, rec.topic_entities or None)
                out = {"id": rec.id, "question": rec.question, "answers": rec.answers,
                       **candidate_json(cand)}
                typer.echo(printable_json(out))
        except QuestionFileError as e:
            raise _fail(str(e)) from None
    finally:
        pipe.close()


def _echo(text: str) -> None:
    """A line of KG or model text on the terminal: control characters escaped."""
    typer.echo(printable(text, keep_newlines=True))


def _print_candidate(cand) -> None:
    names = {n.id: n.name for n in cand.nodes}
    seeds = ", ".join(f"{s.name} ({'+'.join(s.sources)})" for s in cand.seeds)
    _echo(f"seeds: {seeds}")
    typer.echo(f"S ({cand.method}): {len(cand.nodes)} nodes, {len(cand.edges)} edges"
               + (" (neighbourhood truncated by a cap)" if cand.truncated else ""))
    if cand.method == "grag":  # GRAG's text view: a tree per ego centre
        from talent_core.retrieval.grag import describe

        _echo(describe(cand))
        typer.echo("timings_ms: " + ", ".join(f"{k}={v:.1f}" for k, v in cand.timings_ms.items()))
        return
    for e in cand.edges:
        _echo(f"  {names.get(e.src, e.src)} --{e.rel}--> {names.get(e.dst, e.dst)}")
    isolated = names.keys() - {e.src for e in cand.edges} - {e.dst for e in cand.edges}
    for i in isolated:
        _echo(f"  {names[i]}")
    typer.echo("timings_ms: " + ", ".join(f"{k}={v:.1f}" for k, v in cand.timings_ms.items()))


@app.command()
@retrieval_options
def ask(
    question: Annotated[str, typer.Argument(
        help="the question; names in square brackets are topic entities")],
    retriever: Annotated[
        Path | None, typer.Option("--retriever", help="retriever adapter dir (none: frozen)")
    ] = None,
    generator: Annotated[
        Path | None, typer.Option("--generator", help="generator adapter dir")
    ] = None,
    no_retriever: Annotated[
        bool, typer.Option("--no-retriever", help="feed S straight to the generator (ablation)")
    ] = False,
    base_model: Annotated[str | None, typer.Option("--base-model")] = None,
    decode: DecodeOpt = None,
    adapters: AdaptersOpt = None,
    generator_type: GeneratorTypeOpt = None,
    frozen_retriever: FrozenRetriever = False,
    planner: PlannerOpt = None,
    fmt: QuestionFormatOpt = None,
    topic: Topic = None,
    json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    verbose: Annotated[bool, typer.Option("-v")] = False,
    *,
    retrieval: dict[str, Any],
) -> None:
    """Answer a question with the full pipeline and show its evidence."""
    from talent_core.config import get_settings

    _logging(verbose)
    try:  # before the store opens and the models load: an empty question is said at once
        check_question(question, get_settings().max_question_chars)
    except TextInputError as e:
        raise _fail(str(e)) from None
    if no_retriever and retriever is not None:
        raise _fail("--no-retriever and --retriever exclude each other")
    config = _retrieval_config(retrieval)
    pipe = _pipeline(config, retriever, generator, base_model, adapters, frozen_retriever,
                     decode, _question_format(fmt, None), generator_type=generator_type,
                     planner=planner)
    mode = "no-retriever" if no_retriever else "full"
    _empty_store_notice(pipe)
    _frozen_notice(pipe.frozen_in(mode))
    try:
        ans = pipe.ask(question, topic or None, mode=mode)
    except (TextInputError, _scorer_error(), _planner_error()) as e:
        raise _fail(str(e)) from None
    finally:
        pipe.close()
    out = answer_json(ans)
    if json:
        typer.echo(printable_json(out))
        return
    _echo("answer: " + (" | ".join(ans.answer) or "(none)")
          + f"   [{ans.decode}, {ans.generator} generator]")
    for r in ans.ranked[:5]:
        _echo(f"  {r.score:9.3f}  {r.name}" + ("" if r.prior is None else
                                               f"   (model {r.lm_score:.3f}, path prior "
                                               f"{r.prior:.2f})"))
    if ans.plan:
        _echo("planned relation paths: " + "; ".join(
            f"{p.text} ({p.prob:.2f}, {p.ends} nodes)" for p in ans.plan))
    _echo(f"candidate ({ans.candidate.method}): {len(out['candidate'])} nodes; selected: "
          + ", ".join(n["name"] for n in out["selected"]))
    for o in out["out_of_candidate"]:
        _echo(f"  out of candidate: {o['name']} ({'in KG' if o['grounded'] else 'not in KG'})")


def answer_json(ans) -> dict:
    """The `talent ask --json` shape."""
    names = {n.id: n.name for n in ans.candidate.nodes}
    sel = ans.selection
    return {
        "question": ans.question,
        "answer": ans.answer,
        "raw": ans.raw,
        "method": ans.candidate.method,
        "candidate": [{"id": n.id, "name": n.name, "prize": n.prize, "seed": n.seed}
                      for n in ans.candidate.nodes],
        "selected": [{"id": n.id, "name": n.name} for n in sel.selected] if sel else [],
        "out_of_candidate": [o.model_dump() for o in sel.out_of_candidate] if sel else [],
        "edges": [{"src": names.get(e.src, e.src), "rel": e.rel, "dst": names.get(e.dst, e.dst)}
                  for e in ans.edges],
        "decode": ans.decode,
        "ranked": [r.model_dump() for r in ans.ranked],
        "retriever_ranked": [r.model_dump() for r in sel.ranked] if sel else [],
        "frozen": ans.frozen,
        "generator": ans.generator,
        "plan": [p.model_dump() for p in ans.plan],
        "timings_ms": ans.timings_ms,
    }


@app.command()
@retrieval_options
def examples(
    questions: Annotated[Path, typer.Argument(help="question file with gold answers")],
    output: Annotated[Path, typer.Option("--output", "-o", help="training JSONL to write")],
    fmt: QuestionFormatOpt = None,
    limit: Annotated[int | None, typer.Option(min=1)] = None,
    verbose: Annotated[bool, typer.Option("-v")] = False,
    *,
    retrieval: dict[str, Any],
) -> None:
    """Candidate subgraphs S + gold answers -> training examples for `talent train`."""
    from tqdm import tqdm

    from talent_core.llm.data import TrainingExample, write_examples
    from talent_core.pipeline import Pipeline
    from talent_core.questions import QuestionFileError, read_questions

    _logging(verbose)
    qfmt = _question_format(fmt, questions)
    pipe = Pipeline(retrieval=_retrieval_config(retrieval), question_format=qfmt)
    try:
        recs = list(read_questions(questions, qfmt, limit))
        out = []
        for rec in tqdm(recs, desc="retrieve", unit="q"):
            cand = pipe.retrieve(rec.question, rec.topic_entities or None)
            out.append(TrainingExample(id=rec.id, question=rec.question, candidate=cand,
                                       answers=rec.answers))
        n = write_examples(output, out)
    except QuestionFileError as e:
        raise _fail(str(e)) from None
    finally:
        pipe.close()
    typer.echo(_json.dumps({"examples": n, "output": str(output)}))


@app.command("eval")
@retrieval_options
def eval_cmd(
    questions: Annotated[list[Path], typer.Argument(
        metavar="FILE...", help="question file(s) with gold answers (several only with "
        "--report)")],
    fmt: Annotated[str | None, typer.Option(
        "--format", help=" | ".join(QUESTION_FORMATS) + " | explagraphs (--report only; the "
        "ExplaGraphs TSV) (default: guessed from the file name)")] = None,
    mode: Annotated[str, typer.Option(help="retrieval | full | no-retriever")] = "retrieval",
    retriever: Annotated[Path | None, typer.Option("--retriever")] = None,
    generator: Annotated[Path | None, typer.Option("--generator")] = None,
    base_model: Annotated[str | None, typer.Option("--base-model")] = None,
    decode: DecodeOpt = None,
    adapters: AdaptersOpt = None,
    generator_type: GeneratorTypeOpt = None,
    frozen_retriever: FrozenRetriever = False,
    planner: PlannerOpt = None,
    limit: Annotated[int | None, typer.Option(min=1, help="at most N questions (--report: "
                                              "in all, over every file)")] = None,
    offset: Annotated[int, typer.Option(min=0, help="skip the first N questions")] = 0,
    rows_out: Annotated[Path | None, typer.Option("--rows", help="per-question JSONL")] = None,
    report: Annotated[Path | None, typer.Option(
        "--report", help="write a full report into DIR: rows.jsonl (resumable), report.json, "
        "report.md and PNG plots, every method x mode x sweep point")] = None,
    methods: Annotated[str | None, typer.Option(
        "--methods", help="--report: comma list of vector, pcst-paper, pcst-default, "
        "llm-ranked, llm-free (explagraphs: graph, llm-ranked, llm-free); default: the "
        "retrieval-only ones (explagraphs: graph,llm-ranked)")] = None,
    modes: Annotated[str | None, typer.Option(
        "--modes", help="--report: LLM modes of the llm-* methods, comma list of full, "
        "no-retriever, frozen (default full)")] = None,
    sweep: Annotated[list[str] | None, typer.Option(
        "--sweep", help="--report, repeatable: k=3,5,10,20 (k_nodes = k_edges = beam = k "
        "together), lambda=0.001:DIR1,0.01:DIR2 (the retriever adapter trained with each "
        "lambda; mode full), or any retrieval setting, e.g. edge_cost=0.25,0.5")] = None,
    sample_seed: Annotated[int | None, typer.Option(
        "--sample-seed", help="--report with --limit: a seeded sample, balanced over hops")]
    = None,
    annotations: Annotated[Path | None, typer.Option(
        "--annotations", help="--report, explagraphs: pseudo-gold nodes (the JSONL of "
        "`talent annotate-explagraphs --examples-out`) for the retrieval metrics")] = None,
    verbose: Annotated[bool, typer.Option("-v")] = False,
    *,
    retrieval: dict[str, Any],
) -> None:
    """Retrieval metrics of S (and of the LLM retriever's V-hat) and QA Hit@1; with
    --report DIR, every method, LLM mode and sweep point side by side (report.md)."""
    import itertools

    from talent_core.evaluate import evaluate
    from talent_core.llm.data import write_jsonl
    from talent_core.pipeline import Pipeline
    from talent_core.questions import QuestionFileError, read_questions

    _logging(verbose)
    if report is not None:
        if decode is not None:
            raise _fail("--decode: with --report each LLM method has its decoding "
                        "(llm-ranked, llm-free)")
        _eval_report(questions, fmt, retriever, generator, base_model, adapters,
                     frozen_retriever, limit, offset, report, methods, modes, sweep,
                     sample_seed, annotations, retrieval, generator_type, planner)
        return
    given = [n for n, v in (("--methods", methods), ("--modes", modes), ("--sweep", sweep),
                            ("--sample-seed", sample_seed), ("--annotations", annotations))
             if v]
    if given:
        raise _fail(f"{', '.join(given)} need --report DIR")
    if len(questions) != 1:
        raise _fail("give one question file (several only with --report DIR)")
    if mode not in ("retrieval", "full", "no-retriever"):
        raise _fail(f"--mode must be retrieval, full or no-retriever, not {mode!r}")
    if fmt == "explagraphs":
        raise _fail("--format explagraphs needs --report DIR")
    qfmt = _question_format(fmt, questions[0])
    config = _retrieval_config(retrieval)
    pipe = (Pipeline(retrieval=config, question_format=qfmt) if mode == "retrieval" else
            _pipeline(config, retriever, generator, base_model, adapters, frozen_retriever,
                      decode, qfmt, generator_type=generator_type, planner=planner))
    _frozen_notice(pipe.frozen_in(mode))  # type: ignore[arg-type]
    _empty_store_notice(pipe)
    try:
        recs = itertools.islice(read_questions(questions[0], qfmt), offset,
                                offset + limit if limit else None)
        summary, rows = evaluate(pipe, list(recs), mode=mode)  # type: ignore[arg-type]
    except (QuestionFileError, _planner_error()) as e:
        raise _fail(str(e)) from None
    finally:
        pipe.close()
    if rows_out:
        write_jsonl(rows_out, rows)
    typer.echo(_json.dumps(summary))


def _eval_report(questions, fmt, retriever, generator, base_model, adapters, frozen_retriever,
                 limit, offset, out_dir, methods, modes, sweep, sample_seed, annotations,
                 retrieval, generator_type=None, planner=None) -> None:
    """`talent eval --report DIR` (talent_core.report)."""
    import shlex

    from talent_core.pipeline import Pipeline
    from talent_core.questions import QuestionFileError
    from talent_core.report import ReportError, ReportOptions, run_report

    if frozen_retriever:
        raise _fail("--frozen-retriever: with --report use --modes frozen")
    if fmt is None:
        fmt = ("explagraphs" if questions[0].suffix.lower() == ".tsv"
               else _question_format(None, questions[0]))
    config = _retrieval_config(retrieval)
    try:
        options = ReportOptions.parse(questions, fmt, methods, modes, sweep, config, limit,
                                      offset, sample_seed, annotations)
    except ReportError as e:
        raise _fail(str(e)) from None
    expla = fmt == "explagraphs"
    qfmt = None if expla else fmt
    store = None
    if expla:  # the graph of each example is S: no store is read
        from talent_core.store.memory import MemoryStore

        store = MemoryStore()
    if options.llm:
        pipe = _pipeline(config, retriever, generator, base_model, adapters, False, None,
                         qfmt, store=store, generator_type=generator_type, planner=planner)
        _frozen_notice([r for r in pipe.frozen_roles
                        if r == "generator" or set(options.modes) & {"full"}])
    else:
        pipe = Pipeline(retrieval=config, question_format=qfmt, store=store)
    command = "talent " + shlex.join(sys.argv[1:]) if sys.argv[1:] else None
    try:
        rep = run_report(pipe, options, out_dir, command=command)
    except (ReportError, QuestionFileError, _planner_error()) as e:
        raise _fail(str(e)) from None
    finally:
        pipe.close()
    typer.echo(_json.dumps({"report": str(out_dir / "report.md"), "rows": rep["run"]["rows"],
                            "computed": rep["run"]["computed"], "plots": rep["plots"]}))


server_app = typer.Typer(no_args_is_help=True, help=(
    "The embedded FalkorDB server. A command that needs it starts it and leaves it running "
    "(the next command skips the ~20 s start); it stops by itself after "
    "TALENT_SERVER_IDLE_TIMEOUT seconds without a client (default 1800; 0: it stops with "
    "the command that started it)."))
app.add_typer(server_app, name="server")


def _server_status(srv, json_out: bool) -> None:
    from talent_core.store.falkordb_server import status_text

    st = srv.status()
    typer.echo(_json.dumps(st) if json_out else printable(status_text(st)))


StatusJson = Annotated[bool, typer.Option("--json", help="print JSON")]


@server_app.command("start")
def server_start(
    idle_timeout: Annotated[float | None, typer.Option(
        "--idle-timeout", min=0, help="stop after this many seconds without a client "
        "(default: run until `talent server stop`)")] = None,
    json: StatusJson = False,
) -> None:
    """Start the embedded server and leave it running (commands then reuse it)."""
    from talent_core.store.falkordb_server import EmbeddedServer

    s = get_settings_()
    srv = EmbeddedServer.for_dir(s.data_dir)
    if idle_timeout:
        srv.idle_timeout = idle_timeout
    else:
        srv.keep_alive = True
    srv.ensure_running()
    _server_status(srv, json)


@server_app.command("stop")
def server_stop() -> None:
    """Stop the embedded server now, cleanly (AOF compacted)."""
    from talent_core.store.falkordb_server import EmbeddedServer

    srv = EmbeddedServer.for_dir(get_settings_().data_dir)
    typer.echo(_json.dumps({"stopped": srv.shutdown(), "data_dir": str(srv.data_dir)}))


@server_app.command("status")
def server_status(json: StatusJson = False) -> None:
    """Where the store of TALENT_DATA_DIR is, and whether its server runs (pid, since
    when, when it stops)."""
    from talent_core.store.falkordb_server import EmbeddedServer

    _server_status(EmbeddedServer.for_dir(get_settings_().data_dir), json)


def get_settings_():
    from talent_core.config import get_settings

    s = get_settings()
    if s.store != "embedded":
        raise _fail("TALENT_STORE is not 'embedded': there is no embedded server to manage")
    return s


@app.command("app")
def run_app(
    port: Annotated[int, typer.Option(help="port")] = 8501,
    address: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
) -> None:
    """Start the Streamlit UI (uploads up to TALENT_MAX_UPLOAD_MB)."""
    from talent_core.config import get_settings

    cmd = [sys.executable, "-m", "streamlit", "run", str(REPO / "app" / "main.py"),
           "--server.port", str(port), "--server.address", address,
           "--server.maxUploadSize", str(get_settings().max_upload_mb),
           "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "minimal"]
    sys.stdout.flush()
    sys.stderr.flush()
    # Streamlit replaces this process: Ctrl-C or a supervisor's SIGTERM reaches it (as a
    # child it kept serving after the `talent app` that started it was terminated)
    os.execv(cmd[0], cmd)


@app.command()
def demo(
    port: Annotated[int, typer.Option(help="port")] = 8501,
    address: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    no_app: Annotated[
        bool, typer.Option("--no-app", help="load only; do not start the UI")
    ] = False,
) -> None:
    """Load the bundled MetaQA KB (movies; CC BY 3.0) if the store is empty, prepare the
    language models (one-time conversion of the base model), then start the UI."""
    from loaders.api import load_path
    from talent_core.store import open_store

    _logging(True)
    store = open_store()
    try:
        if store.stats().triples == 0:
            typer.echo(f"loading the bundled MetaQA KB ({DEMO_KG.name}, 133,582 triples; "
                       "embedding 43k names takes about 2 minutes on 2 cores) ...")
            report = load_path(str(DEMO_KG), "metaqa", store=store, progress=True)
            typer.echo(f"loaded: {report.loaded:,} triples in {report.seconds:.0f} s")
        typer.echo(_json.dumps(store.stats().model_dump()))
    finally:
        store.close()
    prepare_models()
    if not no_app:
        run_app(port=port, address=address)


@app.command("export")
def export_cmd(
    neo4j_import: Annotated[Path, typer.Option(
        "--neo4j-import", metavar="DIR", help="write node/relationship CSVs (headers separate, "
        "vectors as float[]) for `neo4j-admin database import full`, with import.sh, "
        "schema.cypher and a README; the import itself runs on a Neo4j host, not here")],
    force: Annotated[bool, typer.Option(
        "--force", help="replace the contents of a non-empty DIR")] = False,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="rows (FalkorDB: node ids) read per query")] = 5000,
    part_rows: Annotated[int, typer.Option(
        "--part-rows", min=1, help="data rows per CSV part file")] = 1_000_000,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="no progress bars")] = False,
) -> None:
    """Export the configured store (TALENT_STORE) for Neo4j's offline bulk importer. DIR is
    written atomically (a temporary sibling renamed at the end); run DIR/import.sh on a
    host with neo4j-admin and a stopped Neo4j 5.x."""
    from talent_core.store import open_store
    from talent_core.store.export import ExportError, export_neo4j_import

    store = open_store()
    try:
        rep = export_neo4j_import(store, neo4j_import, force=force, batch_size=batch_size,
                                  part_rows=part_rows, progress=not no_progress)
    except ExportError as e:
        raise _fail(str(e)) from None
    finally:
        store.close()
    typer.echo(_json.dumps({"directory": rep.directory, "entities": rep.entities,
                            "relations": rep.relations, "triples": rep.triples,
                            "dimension": rep.dimension, "seconds": rep.seconds,
                            "import": str(Path(rep.directory) / "import.sh")}))


@app.command("prepare")
def prepare_models() -> None:
    """Convert the default base model once (GGUF -> safetensors, cached) so that no question
    waits for it, and say which adapters will answer (make install runs this)."""
    from talent_core.config import get_settings
    from talent_core.llm.models import resolve_base_model
    from talent_core.pipeline import resolve_adapters

    s = get_settings()
    typer.echo(f"preparing base model {s.base_model!r} (converted once, then cached) ...")
    path = resolve_base_model(s.base_model, s.model_cache_dir)
    r, g = resolve_adapters(s.adapters, s.base_model)
    typer.echo(f"base model ready: {path}; retriever adapter: {r or 'none (frozen)'}; "
               f"generator adapter: {g or 'none (frozen)'}")


if __name__ == "__main__":  # pragma: no cover
    app()
