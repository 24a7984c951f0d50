"""The stance task (ExplaGraphs) as a user meets it: two arguments, optionally their
explanation graph, in; ``support`` / ``counter`` with per-label scores and evidence out.

The candidate S is the user's graph when given (the paper's setting: the whole explanation
graph), else what the loaded KG retrieves for the two arguments, else nothing (the answer
then says it was answered without a graph). The label task needs label-task adapters
(trained on ExplaGraphs): the pipeline's own when they are label-task ones (given by flag),
else the ExplaGraphs adapters shipped for the base model
(``adapters/<base>/explagraphs/{retriever,generator,generator-graph}``), attached to the
weights the pipeline already loaded (a second LoRA pair on one base model); only when neither
exists, or the pipeline was asked for no adapters (``--adapters none``,
``--frozen-retriever``), does the frozen base model answer, and the answer says so
(``frozen``, ``notes``): a KGQA adapter
prompted for a stance is neither the trained model nor the base one. ``adapters`` names
what answered in each role.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from talent_core.answer import Mode
from talent_core.answer import answer as answer_stage
from talent_core.errors import GraphSyntaxError, TextInputError
from talent_core.llm.explagraphs import graph_candidate
from talent_core.llm.prompts import explagraphs_question
from talent_core.models import Answer, Candidate, GeneratorType
from talent_core.questions import LABELS, parse_graph
from talent_core.text import char_problem, check_question

if TYPE_CHECKING:
    from talent_core.config import Settings
    from talent_core.llm.generator import GeneratorModel
    from talent_core.llm.retriever import RetrieverModel
    from talent_core.pipeline import Pipeline

log = logging.getLogger(__name__)

GraphSource = Literal["given", "kg", "none"]
NO_GRAPH_NOTE = "answered without a graph"
LABEL_DIR = "explagraphs"  # the shipped label-task adapters, under the base model's dir
LABEL_ADAPTER = "explagraphs-{role}"  # their names on the pipeline's LoadedLM
ROLES = ("retriever", "generator", "generator-graph")  # directories, as the KGQA ones


class StanceRequest(BaseModel):
    arg1: str
    arg2: str
    graph: str | None = None  # `(a; rel; b)(c; rel; d)`; None / blank: none given
    # "full" (the retriever selects evidence) or "no-retriever"; None: settings.stance_mode
    mode: Mode | None = None
    use_kg: bool = True  # with no graph: retrieve one from the loaded KG


class LabelScore(BaseModel):
    label: str
    score: float  # log-likelihood of the label as the generator's reply + its offset (if any)
    prob: float  # softmax of the scores over the labels


class StanceAnswer(BaseModel):
    arg1: str
    arg2: str
    label: str  # "support" or "counter"
    scores: list[LabelScore]  # best first
    evidence: list[str] = Field(default_factory=list)  # the retriever's selected nodes
    evidence_edges: list[tuple[str, str, str]] = Field(default_factory=list)  # shown to G
    graph_source: GraphSource = "none"
    graph_nodes: int = 0
    generator: GeneratorType = "text"
    frozen: list[str] = Field(default_factory=list)  # roles that ran without an adapter
    adapters_task: str | None = None  # the task the pipeline's adapters were trained on
    adapters: dict[str, str] = Field(default_factory=dict)  # role -> what answered in it
    notes: list[str] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    answer: Answer | None = None  # the answer stage's output (None: from `talent serve`)


def stance_candidate(pipe: Pipeline, request: StanceRequest) -> tuple[Candidate, GraphSource]:
    """S for a stance request and where it came from. Bad graph text raises
    `TextInputError` ("graph: not an explanation graph: <where and what>")."""
    question = explagraphs_question(request.arg1, request.arg2)
    if request.graph is not None and request.graph.strip():
        try:
            triples = parse_graph(request.graph)
        except GraphSyntaxError as e:
            raise TextInputError(f"graph: {e}") from None
        return graph_candidate(question, triples), "given"
    if request.use_kg and pipe.stats().triples > 0:
        text = f"{request.arg1.strip()} {request.arg2.strip()}"
        found = pipe.retrieve(text)
        if found.nodes:
            # unlinked mentions do not make a stance abstain: S is evidence, not the answer
            return found.model_copy(update={"question": question, "links": []}), "kg"
    return Candidate(question=question, method="none"), "none"


def bundled_label_dirs(base_model: str) -> dict[str, Path]:
    """The shipped ExplaGraphs (label-task) adapter directories for ``base_model``, by
    directory name (``ROLES``; none: an empty dict)."""
    from talent_core.pipeline import bundled_adapters_dir

    root = bundled_adapters_dir(base_model) / LABEL_DIR
    return {role: root / role for role in ROLES if (root / role / "talent_meta.json").is_file()}


def _described(role: RetrieverModel | GeneratorModel) -> str:
    """What answers in a role, for the answer: the adapter's directory (the package's
    relative to it) and dataset, or "frozen"."""
    if role.adapter is None:
        return "frozen base model"
    path = role.lm.paths.get(role.adapter)
    meta = role.meta
    where = str(path) if path is not None else role.adapter
    package = Path(__file__).resolve().parent
    if path is not None and path.resolve().is_relative_to(package):
        where = "bundled " + path.resolve().relative_to(package.parent).as_posix()
    return where + (f" ({meta.dataset}, task {meta.task})" if meta and meta.dataset else "")


def label_models(pipe: Pipeline) -> tuple[RetrieverModel, GeneratorModel, str | None]:
    """The retriever and generator for the label task and the pipeline's adapters' task
    (None: no adapter). Per role: the pipeline's own when trained on the label task; else
    the shipped ExplaGraphs adapter (attached once to the loaded weights) unless the
    pipeline was told to use none (``--adapters none``; ``--frozen-retriever`` for the
    retriever); else the frozen base model prompted for the label task. The generator's
    directory follows the pipeline's generator type (``generator-graph/`` for the
    graph-prompt one)."""
    from talent_core.llm.generator import GeneratorModel
    from talent_core.llm.retriever import RetrieverModel
    from talent_core.pipeline import GENERATOR_ROLE_DIR

    r, g = pipe.models
    trained = next((m.meta.task for m in (g, r) if m.meta is not None), None)
    if r.task == "label" and g.task == "label":
        return r, g, trained
    s = pipe.settings
    spec = pipe.adapters_spec
    shipped = {} if spec == "none" else bundled_label_dirs(r.lm.base_name)
    if pipe.frozen_retriever:
        shipped.pop("retriever", None)
    names: dict[str, str | None] = {}
    dirs = {"retriever": "retriever", "generator": GENERATOR_ROLE_DIR[pipe.generator_type]}
    for role, own in (("retriever", r), ("generator", g)):
        if own.adapter is not None and own.meta is not None and own.meta.task == "label":
            names[role] = own.adapter
        elif dirs[role] in shipped:
            names[role] = LABEL_ADAPTER.format(role=dirs[role])
            r.lm.ensure_adapter(names[role], shipped[dirs[role]])
        else:
            names[role] = None
    return (RetrieverModel(r.lm, names["retriever"], "label", s.retriever_max_new_tokens),
            GeneratorModel(g.lm, names["generator"], "label", s.generator_max_new_tokens,
                           embed=lambda texts: pipe.embedder.encode(texts), store=pipe.store),
            trained)


def check_stance(request: StanceRequest, settings: Settings) -> None:
    """A stance request's text checked before any model work (the API does it before a model
    slot is taken): both arguments as questions are, the graph's length
    (``max_graph_triples`` triples of at most a question's length each), characters and
    syntax; TextInputError naming the part."""
    max_chars = settings.max_question_chars
    for name, text in (("argument 1", request.arg1), ("argument 2", request.arg2)):
        try:
            check_question(text, max_chars)
        except TextInputError as e:
            raise TextInputError(f"{name}: {e}") from None
    graph = request.graph
    if graph is None or not graph.strip():
        return
    most = settings.max_graph_triples
    if len(graph) > most * max_chars:
        raise TextInputError(f"graph: {len(graph):,} characters; the maximum is "
                             f"{most * max_chars:,}")
    problem = char_problem(graph)
    if problem is not None:
        raise TextInputError(f"graph: {problem}")
    n = graph.count("(")
    if n > most:
        raise TextInputError(f"graph: {n:,} triples; the maximum is {most:,} "
                             "(TALENT_MAX_GRAPH_TRIPLES)")
    try:
        parse_graph(graph)
    except GraphSyntaxError as e:
        raise TextInputError(f"graph: {e}") from None


def answer_stance(pipe: Pipeline, request: StanceRequest) -> StanceAnswer:
    """Support / counter for two arguments (see the module docstring)."""
    t0 = time.perf_counter()
    check_stance(request, pipe.settings)
    candidate, source = stance_candidate(pipe, request)
    retriever, generator, trained = label_models(pipe)
    wanted: Mode = request.mode or pipe.settings.stance_mode
    mode: Mode = wanted if candidate.nodes else "no-retriever"
    ans = answer_stage(candidate, mode, "ranked", retriever, generator, pipe.store, t0=t0)
    # the retriever only ran in mode "full" (`Pipeline.frozen_in`)
    ans.frozen = [r for r in ans.frozen if mode == "full" or r == "generator"]
    scored = {r.name: r.score for r in ans.ranked}
    if set(scored) != set(LABELS):
        raise RuntimeError(f"the generator scored {sorted(scored)}, not the labels {LABELS}")
    top = max(scored.values())
    z = sum(math.exp(v - top) for v in scored.values())
    scores = sorted((LabelScore(label=k, score=round(v, 4), prob=round(math.exp(v - top) / z, 4))
                     for k, v in scored.items()), key=lambda x: -x.score)
    notes = []
    if source == "none":
        notes.append(NO_GRAPH_NOTE + (" (none given, and the loaded KG gave none)"
                                      if request.use_kg else " (none given)"))
    elif source == "kg":
        notes.append(f"no graph given: the candidate ({len(candidate.nodes)} nodes) was "
                     "retrieved from the loaded KG")
    if ans.frozen:
        notes.append("no ExplaGraphs (label-task) adapters: the frozen base model answered as "
                     + " and ".join(ans.frozen)
                     + (f" (the loaded adapters were trained for {trained!r})"
                        if trained not in (None, "label") else ""))
    used = {"generator": _described(generator)}
    if mode == "full":
        used = {"retriever": _described(retriever), **used}
    names = {n.id: n.name for n in candidate.nodes}
    evidence = ([n.name for n in ans.selection.selected] if ans.selection is not None else [])
    edges = [(names.get(e.src, e.src), e.rel, names.get(e.dst, e.dst)) for e in ans.edges]
    log.info("stance %s (%s graph, frozen: %s)", scores[0].label, source, ans.frozen)
    return StanceAnswer(
        arg1=request.arg1.strip(), arg2=request.arg2.strip(), label=scores[0].label,
        scores=scores, evidence=evidence, evidence_edges=edges, graph_source=source,
        graph_nodes=len(candidate.nodes), generator=ans.generator, frozen=ans.frozen,
        adapters_task=trained, adapters=used, notes=notes, timings_ms=ans.timings_ms, answer=ans,
    )


def stance_json(out: StanceAnswer) -> dict:
    """The `talent ask --stance --json` shape (the full Answer left out)."""
    return out.model_dump(exclude={"answer"})
