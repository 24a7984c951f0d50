"""`talent retrieve`, `talent ask` and `talent examples`: a question (or a question file)
through the Pipeline. Modules that take a while to import (the pipeline, GRAG) are imported
in the commands: `talent --help` imports this module."""

from __future__ import annotations

import json as _json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from tqdm import tqdm

from talent_core.commands.console import echo, fail, fail_with, setup_logging
from talent_core.commands.options import (
    DEFAULT_MODELS,
    ModelChoice,
    QuestionFormatOpt,
    Topic,
    Verbose,
    check_decode,
    model_choice,
    question_format,
    retrieval_config,
    retrieval_options,
)
from talent_core.commands.shared import empty_store_notice, frozen_notice, pipeline_for
from talent_core.config import get_settings
from talent_core.explore import (
    answer_evidence,
    answer_json,
    candidate_json,
    fill_closest,
    link_notes,
)
from talent_core.llm.data import TrainingExample, write_examples
from talent_core.models import Answer, OperationResult, Turn
from talent_core.questions import read_questions
from talent_core.retrieval.linking import not_in_kg
from talent_core.text import check_question, printable_json

log = logging.getLogger(__name__)
ANSWERS_SHOWN = 10  # answers printed before "… and N more" (--json gives all)


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
    verbose: Verbose = False,
    *,
    retrieval: dict[str, Any],
) -> None:
    """Candidate subgraph S for a question (or every question of --questions FILE)."""
    from talent_core.pipeline import Pipeline

    setup_logging(verbose)
    if (question is None) == (questions is None):
        raise fail("give either a QUESTION or --questions FILE")
    qfmt = question_format(fmt, questions)
    config = retrieval_config(retrieval)
    pipe = Pipeline(retrieval=config, question_format=qfmt)
    empty_store_notice(pipe)
    try:
        if question is not None:
            cand = pipe.retrieve(question, topic or None)
            if json:
                typer.echo(printable_json(candidate_json(cand)))
            else:
                _print_candidate(cand)
            return
        for rec in read_questions(questions, qfmt, limit):
            cand = pipe.retrieve(rec.question, rec.topic_entities or None)
            out = {"id": rec.id, "question": rec.question, "answers": rec.answers,
                   **candidate_json(cand)}
            typer.echo(printable_json(out))
    finally:
        pipe.close()



def _print_candidate(cand) -> None:
    names = {n.id: n.name for n in cand.nodes}
    for note in link_notes(Answer(question=cand.question, candidate=cand,
                                  not_in_kg=not_in_kg(cand.links))):
        echo(note)
    seeds = ", ".join(f"{s.name} ({'+'.join(s.sources)})" for s in cand.seeds)
    echo(f"seeds: {seeds}")
    typer.echo(f"S ({cand.method}): {len(cand.nodes)} nodes, {len(cand.edges)} edges"
               + (" (neighbourhood truncated by a cap)" if cand.truncated else ""))
    if cand.method == "grag":  # GRAG's text view: a tree per ego centre
        from talent_core.retrieval.grag import describe

        echo(describe(cand))
        typer.echo("timings_ms: " + ", ".join(f"{k}={v:.1f}" for k, v in cand.timings_ms.items()))
        return
    for e in cand.edges:
        echo(f"  {names.get(e.src, e.src)} --{e.rel}--> {names.get(e.dst, e.dst)}")
    isolated = names.keys() - {e.src for e in cand.edges} - {e.dst for e in cand.edges}
    for i in isolated:
        echo(f"  {names[i]}")
    typer.echo("timings_ms: " + ", ".join(f"{k}={v:.1f}" for k, v in cand.timings_ms.items()))


@retrieval_options
@model_choice
def ask(
    question: Annotated[str | None, typer.Argument(
        help="the question; names in square brackets are topic entities")] = None,
    stance: Annotated[tuple[str, str] | None, typer.Option(
        "--stance", metavar="ARG1 ARG2", help="the stance task (ExplaGraphs) instead of a "
        "question: do the two arguments support or counter each other? Answered in this "
        "process with the label-task adapters, or the frozen base model when none is loaded "
        "(said)")] = None,
    graph: Annotated[str | None, typer.Option(
        "--graph", help="--stance: the arguments' explanation graph, '(a; rel; b)(c; rel; "
        "d)' (the candidate S); without it S is retrieved from the loaded KG, or the answer "
        "comes without a graph (said)")] = None,
    no_retriever: Annotated[
        bool, typer.Option("--no-retriever", help="feed S straight to the generator (ablation)")
    ] = False,
    models: ModelChoice = DEFAULT_MODELS,
    fmt: QuestionFormatOpt = None,
    topic: Topic = None,
    json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    local: Annotated[bool, typer.Option(
        "--local", help="answer in this process even when a `talent serve` is up (by "
        "default a running server answers: TALENT_API_URL, or the one serving this data "
        "dir, with TALENT_API_KEY)")] = False,
    follow_up: Annotated[bool, typer.Option(
        "--follow-up", "-f", help="a follow-up of the previous `talent ask` (\"who directed "
        "them?\"): its referring words read as the previous answers or topic, up to 3 turns "
        "back; without it a question starts the conversation again")] = False,
    conversation: Annotated[str, typer.Option(
        "--conversation", metavar="NAME", help="which conversation --follow-up continues "
        "(kept in the data dir; default: 'default')")] = "default",
    verbose: Verbose = False,
    *,
    retrieval: dict[str, Any],
) -> None:
    """Answer a question with the full pipeline and show its evidence (through a running
    `talent serve` when there is one: no models loaded here); or, with --stance ARG1 ARG2
    [--graph TEXT], say whether two arguments support or counter each other."""
    from talent_core.commands.conversations import read_turns, save_turn
    from talent_core.errors import TalentError

    setup_logging(verbose)
    if no_retriever and models.retriever is not None:
        raise fail("--no-retriever and --retriever exclude each other")
    if stance is not None:
        if question is not None:
            raise fail("give either a QUESTION or --stance ARG1 ARG2")
        _ask_stance(stance, graph, no_retriever, json, verbose, retrieval=retrieval,
                    models=models.for_stance(), local=local)
        return
    if question is None:
        raise fail("give a QUESTION (or --stance ARG1 ARG2)")
    if graph is not None:
        raise fail("--graph needs --stance ARG1 ARG2")
    # before the store opens and the models load: an empty question is said at once
    settings = get_settings()
    check_question(question, settings.max_question_chars)
    try:
        history = read_turns(settings.data_dir, conversation) if follow_up else []
    except TalentError as e:
        raise fail_with(e) from None
    if follow_up and not history:
        log.warning("no previous question in conversation %r: answering without one",
                    conversation)
    config = retrieval_config(retrieval)
    mode = "no-retriever" if no_retriever else "full"
    # the server's one pipeline has its own models: a model choice here needs this process
    # (--decode is the server's to apply)
    model_options = models.given(without=("decode",)) + (["--format"] if fmt else [])
    got = None if local else _ask_server(question, topic or None, mode, models.decode,
                                         retrieval, model_options, history)
    if got is not None:
        ans, out = got
    else:
        pipe = pipeline_for(config, models, question_format(fmt, None))
        empty_store_notice(pipe)
        frozen_notice(pipe.frozen_in(mode))
        try:
            ans = pipe.ask(question, topic or None, mode=mode, history=history)
            evidence = answer_evidence(ans, pipe.store)
            fill_closest(pipe.store, pipe.embedder, ans)
        finally:
            pipe.close()
        out = answer_json(ans, evidence)
    try:
        save_turn(settings.data_dir, conversation, Turn.model_validate(out["turn"]),
                  follow_up)
    except TalentError as e:
        log.warning("%s: the next --follow-up will not see this answer", e)
    if json:
        typer.echo(printable_json(out))
        return
    if ans.candidate.reading is not None:
        echo(ans.candidate.reading.text)
    for note in link_notes(ans):
        echo(note)
    if ans.not_in_kg:
        echo("answer: (none: not in the KG)")
        return
    if ans.operation is not None:
        echo_operation(ans.operation)
    shown = ans.answer[:ANSWERS_SHOWN]
    more = len(ans.answer) - len(shown)
    echo(("answer: " if len(ans.answer) < 2 else f"{len(ans.answer)} answers: ")
         + (" | ".join(shown) or "(none)") + (f" … and {more} more (--json: all)" if more else "")
         + f"   [{ans.decode}, {ans.generator} generator]")
    if ans.answer_path and ans.operation is None:
        echo(f"  every end of the planned path {ans.answer_path}, best first")
    for r in ans.ranked[:5] if ans.operation is None else []:  # else the set's, above
        echo(f"  {r.score:9.3f}  {r.name}" + ("" if r.prior is None else
                                               f"   (model {r.lm_score:.3f}, path prior "
                                               f"{r.prior:.2f})"))
    if ans.plan:
        echo(f"planned relation paths ({ans.planner} planner): " + "; ".join(
            f"{p.text} ({p.prob:.2f}, {p.ends} nodes)" for p in ans.plan))
    if ans.plan_joint:
        echo("answers reached from each of: " + "; ".join(
            f"{p.anchor} ({p.text})" for p in ans.plan if p.anchor))
    if ans.plan_notice:
        echo(f"note: {ans.plan_notice}")
    for ev in out["evidence"]:
        for text in ev["evidence_text"]:
            echo(f"evidence: {ev['answer']}: {text}")
    echo(f"candidate ({ans.candidate.method}): {len(out['candidate'])} nodes; selected: "
          + ", ".join(n["name"] for n in out["selected"]))
    if ans.models is not None and ans.models.backend != "local":
        echo(f"language models ({ans.models.backend} backend): retriever "
             f"{ans.models.retriever or '(none ran)'}; generator {ans.models.generator}"
             + ("; ranked by the model's choice among the names (the server gives no "
                "log-probabilities)" if ans.models.ranking == "choice" else ""))
    for o in out["out_of_candidate"]:
        echo(f"  out of candidate: {o['name']} ({'in KG' if o['grounded'] else 'not in KG'})")


def echo_operation(op: OperationResult) -> None:
    """An operator's answer: its line, its notice, the set it read and the store's queries."""
    if op.text:
        echo(f"{op.op}: {op.text}")
    if op.notice:
        echo(f"note: {op.notice}")
    if op.listed and op.op in ("count", "filter", "superlative"):
        more = f" … ({op.members} in all)" if op.members > len(op.listed) else ""
        echo("  of: " + " | ".join(op.listed[:ANSWERS_SHOWN]) + more)
    for q in op.queries:
        echo(f"  store query {q.name}: " + ", ".join(
            f"{k}={v!r}" + (f" ({q.sizes[k]} in all)" if k in q.sizes and q.sizes[k] > len(v)
                            else "")
            for k, v in q.params.items()))


def _ask_stance(args: tuple[str, str], graph: str | None, no_retriever: bool, json: bool,
                verbose: bool, *, retrieval: dict[str, Any], models: ModelChoice,
                local: bool = False) -> None:
    """`talent ask --stance ARG1 ARG2 [--graph TEXT]` (`talent_core.stance`): by a running
    `talent serve` (POST /v1/stance) as a question is, else in this process."""
    from talent_core.errors import TalentError
    from talent_core.stance import StanceRequest, answer_stance, stance_json

    request = StanceRequest(arg1=args[0], arg2=args[1], graph=graph,
                            mode="no-retriever" if no_retriever else None)
    model_options = models.given()
    # /v1/stance takes no retrieval settings: given ones are answered here
    model_options += [f"--{k.replace('_', '-')}" for k in retrieval]
    out = None if local else _on_server(lambda c: c.stance(**request.model_dump()),
                                        model_options)
    if out is None:
        pipe = pipeline_for(retrieval_config(retrieval), models)
        try:
            out = answer_stance(pipe, request)
        except TalentError as e:
            raise fail_with(e) from None
        finally:
            pipe.close()
    if json:
        typer.echo(printable_json(stance_json(out)))
        return
    for note in out.notes:
        echo(f"note: {note}")
    frozen = f", frozen: {' and '.join(out.frozen)}" if out.frozen else ""
    echo(f"stance: {out.label}   [{out.generator} generator{frozen}]")
    for role, what in out.adapters.items():  # which adapters answered
        echo(f"  {role}: {what}")
    for sc in out.scores:
        echo(f"  {sc.score:9.3f}  {sc.label}  (p={sc.prob:.2f})")
    source = {"given": "the given graph", "kg": "retrieved from the KG", "none": "none"}
    echo(f"graph: {source[out.graph_source]} ({out.graph_nodes} nodes)")
    if out.evidence:
        echo("evidence nodes: " + ", ".join(out.evidence))
    for a, r, b in out.evidence_edges:
        echo(f"  {a} --{r}--> {b}")


def _ask_server(question: str, topics: list[str] | None, mode: str, decode: str | None,
                retrieval: dict[str, Any], model_options: list[str],
                history: list[Turn]) -> tuple[Answer, dict] | None:
    """The answer of a running `talent serve` (the Answer and the `--json` document), or
    None when there is none to use (said in one log line when one is up but cannot be used:
    no key, a model option given, unreachable). A server named by TALENT_API_URL that fails
    is an error; a discovered one that cannot be reached is passed over."""
    def call(client: Any) -> Any:
        empty_store_notice(client)
        return client.ask(question, topics, mode=mode, decode=check_decode(decode), view="cli",
                          history=history, **retrieval)

    got = _on_server(call, model_options)
    if got is None:
        return None
    frozen_notice(got.answer.frozen)
    return got.answer, got.document


def _on_server(call: Callable[[Any], Any], model_options: list[str]) -> Any:
    """``call(client)`` on a running `talent serve` (else on the data dir's warm model
    process, `api.local`, started if none runs), or None when there is none to use (said
    in one log line when one is up but cannot be used: no key, a model option given,
    unreachable). A server named by TALENT_API_URL that fails is an error; a discovered one
    or the warm process that cannot be reached is passed over."""
    from talent_core.api.client import ApiClient
    from talent_core.errors import ApiClientError

    settings = get_settings()
    try:
        client = ApiClient.from_settings(settings)
    except ApiClientError as e:
        raise fail_with(e) from None
    if client is None and not model_options:
        try:  # the data dir's warm model process (started now if none runs)
            client = ApiClient.local(settings)
        except ApiClientError as e:
            log.warning("%s; answering here", e)
            return None
    if client is None:
        return None
    if model_options:
        log.warning("not asking talent serve at %s: %s appl(y/ies) to this process only; "
                    "answering here", client.url, ", ".join(model_options))
        return None
    try:
        got = call(client)
    except ApiClientError as e:
        if e.status is None and not settings.api_url:
            log.warning("%s; answering here", e)
            return None
        raise fail_with(e) from None
    log.info("answered by talent serve at %s", client.url)
    return got


@retrieval_options
def examples(
    questions: Annotated[Path, typer.Argument(help="question file with gold answers")],
    output: Annotated[Path, typer.Option("--output", "-o", help="training JSONL to write")],
    fmt: QuestionFormatOpt = None,
    limit: Annotated[int | None, typer.Option(min=1)] = None,
    verbose: Verbose = False,
    *,
    retrieval: dict[str, Any],
) -> None:
    """Candidate subgraphs S + gold answers -> training examples for `talent train`."""
    from talent_core.pipeline import Pipeline

    setup_logging(verbose)
    qfmt = question_format(fmt, questions)
    pipe = Pipeline(retrieval=retrieval_config(retrieval), question_format=qfmt)
    try:
        recs = list(read_questions(questions, qfmt, limit))
        out = []
        for rec in tqdm(recs, desc="retrieve", unit="q"):
            cand = pipe.retrieve(rec.question, rec.topic_entities or None)
            out.append(TrainingExample(id=rec.id, question=rec.question, candidate=cand,
                                       answers=rec.answers))
        n = write_examples(output, out)
    finally:
        pipe.close()
    typer.echo(_json.dumps({"examples": n, "output": str(output)}))

