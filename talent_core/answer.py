"""The answer stage on a candidate S: the relation-path plan, the KG grounding of names and
the generator's answers re-weighted by the plan (TaLenT's generator G_phi, with RoG's
planned paths as a prior). `Pipeline.answer` composes these; they receive their parts."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from talent_core.explore import is_cvt, plan_json, selection_json
from talent_core.llm.context import GraphView
from talent_core.llm.parsing import clean_name
from talent_core.llm.ranking import Scored
from talent_core.models import (
    Answer,
    AnswerSetRule,
    Candidate,
    CandidateEdge,
    Decode,
    Entity,
    ModelUse,
    OperationResult,
    RankedName,
    Selection,
)
from talent_core.operators import PlainSet, apply
from talent_core.operators.run import answered_in_store
from talent_core.planning import Plan, plan_paths
from talent_core.planning.paths import rescore
from talent_core.store import GraphReader
from talent_core.text import normalise_name

if TYPE_CHECKING:
    from talent_core.llm.generator import GeneratorModel
    from talent_core.llm.retriever import RetrieverModel
    from talent_core.planning.plan import MatcherPlanner

log = logging.getLogger(__name__)

Mode = Literal["full", "no-retriever", "retrieval"]
StageHook = Callable[[str, dict[str, Any]], None]  # (stage name, its data) as a stage ends
KgNames = dict[str, tuple[str, str]]  # the prompt's lowercase name -> (KG name, KG id)


def kg_names(context: GraphView, selection: Selection | None) -> KgNames:
    """The prompt's lowercase name -> (the KG's name, KG id) for every KG node of the
    generator's context (`GraphView.answer_nodes` when its rows were cut to a text budget)
    and every grounded out-of-candidate name (pure)."""
    out: KgNames = {}
    nodes = context.answer_nodes if context.answer_nodes is not None else context.kg_nodes
    for n in nodes:
        out.setdefault(clean_name(n.name), (n.name, n.id))
    for o in selection.out_of_candidate if selection else []:
        if o.grounded and o.id:
            out.setdefault(clean_name(o.name), (o.kg_name or o.name, o.id))
    return out


def join_planned(store: GraphReader, planner: MatcherPlanner | None, kg: KgNames,
                 prior: dict[str, float]) -> None:
    """Add to the candidate answers ``kg`` the nodes the planned paths reach outside the
    context, likeliest first, at most the planner's `join_limit` (RoG's answers are the
    planned paths' ends; a node of S the retriever left out, or one past S, can then still be
    the answer). A Freebase CVT node (`m.0abc`: paths walk through it) never joins."""
    have = {node for _, node in kg.values()}
    ids = sorted((i for i in prior if i not in have), key=lambda i: (-prior[i], i))
    for e in store.entities_by_id(ids[: planner.join_limit if planner else 0]):
        if not is_cvt(e.name):
            kg.setdefault(clean_name(e.name), (e.name, e.id))


def rescored(planner: MatcherPlanner, scored: list[Scored], kg: KgNames, plan: Plan
             ) -> tuple[list[RankedName], list[Scored]]:
    """Ranked answers re-weighted by the plan's prior (`planner.rescore`), best first."""
    rows = []
    for x in scored:
        name, node = kg.get(x.name, (x.name, None))
        p = plan.prior.get(node, 0.0) if node else 0.0
        rows.append((rescore(x.score, p, planner.answer_weight, planner.eps), x, name, node, p))
    rows.sort(key=lambda r: -r[0])
    ranked = [RankedName(name=name, score=round(s, 4), id=node, lm_score=round(x.score, 4),
                         prior=round(p, 4), path=plan.via.get(node) if node else None)
              for s, x, name, node, p in rows]
    return ranked, [Scored(x.name, s) for s, x, *_ in rows]


def answer_set(store: GraphReader, ranked: list[RankedName], plan: Plan
               ) -> tuple[list[tuple[str, str]], str | None]:
    """The complete answer set under a plan, as (name, id): every end of the planned path
    that reaches the best-ranked answer, ranked ones first in rank order, then the ends the
    generator did not score (beyond the join limit) by name. ([], None) when the best answer
    is on no planned path (the generator's margin then chooses)."""
    if not ranked or not ranked[0].path:
        return [], None
    path = ranked[0].path
    ends = plan.ends.get(path, set())
    top = [(r.name, r.id) for r in ranked if r.id in ends]
    seen = {i for _, i in top}
    rest = sorted((e.name, e.id) for e in store.entities_by_id(sorted(ends - seen))
                  if not is_cvt(e.name))
    return top + rest, path


def ground_names(store: GraphReader, names: list[str]) -> dict[str, Entity]:
    """Ground out-of-candidate names: normalised exact name match in the whole KG."""
    found = store.entities_by_name(list(names))
    by_norm = {normalise_name(e.name): e for e in found}
    return {n: by_norm[normalise_name(n)] for n in names if normalise_name(n) in by_norm}


def retrieval_timings(candidate: Candidate) -> dict[str, float]:
    """S's stage timings under the names an Answer reports them: ``retrieve_<stage>``."""
    return {f"retrieve_{k}": v for k, v in candidate.timings_ms.items()}


def answer(
    candidate: Candidate,
    mode: Mode,
    decode: Decode,
    retriever: RetrieverModel | None,
    generator: GeneratorModel | None,
    store: GraphReader,
    planner: MatcherPlanner | None = None,
    t0: float | None = None,
    answer_set_rule: AnswerSetRule = "path",
    made: Plan | None = None,
    on_stage: StageHook | None = None,
) -> Answer:
    """The language-model stages on S: the retriever's selection (mode "full"), the
    generator's context and its answers; ranked answers are KG nodes only, re-weighted by
    the plan of ``planner`` (None: no plan). ``t0``: when the question
    arrived (``total`` counts from there); ``answer_set_rule``: `Settings.answer_set`;
    ``made``: the plan retrieval already made for S with this ``planner``
    (`Pipeline.retrieve_planned`), used instead of planning again; ``on_stage(name, data)``:
    called as each stage ends ("selection", "plan": `explore.selection_json` /
    `plan_json`), so that a stream can send it then."""
    t0 = time.perf_counter() if t0 is None else t0
    question = candidate.question  # brackets removed
    timings = retrieval_timings(candidate)
    if mode == "retrieval":
        timings["total"] = (time.perf_counter() - t0) * 1000
        return Answer(question=question, candidate=candidate, timings_ms=timings)
    assert retriever is not None and generator is not None
    op = candidate.operation
    if planner is not None and decode == "ranked" and answered_in_store(candidate):
        # two entities compared or joined: the store answers, no language model
        t = time.perf_counter()
        result = apply(op, store, planner, candidate, Plan(), PlainSet([], [], None))
        timings["operator"] = (time.perf_counter() - t) * 1000
        timings["total"] = (time.perf_counter() - t0) * 1000
        return Answer(question=op.question, candidate=candidate, timings_ms=timings,
                      decode=decode, answer=result.answer, answer_ids=result.answer_ids,
                      operation=result)
    selection = None
    if mode == "full":
        t = time.perf_counter()
        selection = retriever.select(question, candidate,
                                     lookup=lambda names: ground_names(store, names),
                                     decode=decode)
        timings["retriever"] = (time.perf_counter() - t) * 1000
    if on_stage is not None:
        on_stage("selection", selection_json(selection))
    t = time.perf_counter()
    context = generator.context(question, candidate, selection)
    kg = kg_names(context, selection)
    ranked: list[RankedName] = []
    plan = Plan()
    raw = ""
    answers: list[str] = []
    answer_ids: list[str] = []
    answer_path: str | None = None
    if decode == "ranked":
        # candidate answers: the context's KG nodes (and grounded out-of-S names); never
        # a name the KG does not hold
        if generator.task != "label" and planner is not None:
            t_plan = time.perf_counter()
            plan = made if made is not None else plan_paths(planner, store, candidate)
            if plan.paths:
                join_planned(store, planner, kg, plan.prior)
            timings["planner"] = (time.perf_counter() - t_plan) * 1000
            if on_stage is not None and plan.paths:
                on_stage("plan", plan_json(plan.paths, plan.kind, plan.confidence,
                                           plan.runner_up, plan.joint))
        # a Freebase CVT node (`m.0abc`) is never an answer
        names = None if generator.task == "label" else [
            n for n, (kg_name, _) in kg.items() if not is_cvt(kg_name)]
        scored = generator.rank(question, context, names)
        if plan.paths and planner is not None:
            ranked, scored = rescored(planner, scored, kg, plan)
            if answer_set_rule == "path":
                chosen, answer_path = answer_set(store, ranked, plan)
                answers, answer_ids = [n for n, _ in chosen], [i for _, i in chosen]
        else:
            ranked = [RankedName(name=kg.get(x.name, (x.name, None))[0],
                                 score=round(x.score, 4), id=kg.get(x.name, (None, None))[1])
                      for x in scored]
        if not answers:
            answers = [kg.get(x.name, (x.name, None))[0] for x in generator.choose(scored)]
    else:
        found, raw = generator.answer(question, context)
        answers = [kg.get(a, (a, None))[0] for a in found]  # the KG's casing where known
    timings["generator"] = (time.perf_counter() - t) * 1000 - timings.get("planner", 0.0)
    result: OperationResult | None = None
    if op is not None and (planner is None or decode != "ranked"):
        result = OperationResult(op=op.op, answer_type="entities", notice=(
            f"read as a {op.op}, which needs the relation-path planner and ranked decoding "
            f"(here: {'no planner' if planner is None else decode + ' decoding'}): the plain "
            "answer is shown"))
    elif op is not None and planner is not None:
        t = time.perf_counter()
        ids = answer_ids or [i for i in (kg.get(clean_name(a), (None, None))[1]
                                         for a in answers) if i]
        result = apply(op, store, planner, candidate, plan, PlainSet(ids, answers, answer_path))
        timings["operator"] = (time.perf_counter() - t) * 1000
        if result.answer or result.relation:
            answers, answer_ids = result.answer, result.answer_ids
    timings["total"] = (time.perf_counter() - t0) * 1000
    frozen = [r for r, m in (("retriever", retriever), ("generator", generator)) if m.frozen]
    return Answer(
        question=op.question if op is not None else question,
        answer=answers,
        raw=raw,
        candidate=candidate,
        selection=selection,
        edges=[CandidateEdge.model_validate(e.model_dump()) for e in context.kg_edges],
        timings_ms=timings,
        decode=decode,
        ranked=ranked,
        frozen=frozen,
        generator=generator.kind,
        plan=plan.paths,
        planner=plan.kind if plan.paths else None,
        plan_confidence=plan.confidence if plan.paths else None,
        plan_runner_up=plan.runner_up if plan.paths else None,
        plan_joint=plan.joint if plan.paths else [],
        answer_path=answer_path,
        answer_ids=answer_ids,
        operation=result,
        models=ModelUse(backend=generator.lm.backend,
                        retriever=retriever.model if selection is not None else None,
                        generator=generator.model,
                        ranking=generator.lm.ranking if decode == "ranked" else "free"),
    )
