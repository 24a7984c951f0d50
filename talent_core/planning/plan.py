"""The planning stage: which relation paths from its anchors a question asks for, walked in
the store, and S joined by the planned paths' ends (RoG answers from them; planning moves
ahead of the language models, so the retriever and the generator see them).

The planner (`MatcherPlanner`): `beam.grow` over the anchors' own paths, scored by the
question <-> path matcher (`matcher.PathMatcher`: ``scale`` x the cosine of the question
with the path's words); where the matcher directory holds a re-ranker
(`reranker.PathReranker`; none is shipped), the beam's best ``rerank`` paths are scored
again (`MatcherPlanner.reranked`) and only they are kept; the plan is the softmax over the
paths kept, truncated as `paths.top_plan`. Several mentions plan each on its own and meet
(`joint_plan`).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from talent_core.conversation import without_words
from talent_core.explore import planned_hops
from talent_core.models import Candidate, CandidateEdge, CandidateNode, PlannedPath, path_text
from talent_core.planning.beam import BeamSettings, complete, grow
from talent_core.planning.matcher import (
    META_FILE,
    PathMatcher,
    bundled_base,
    load_matcher,
    matcher_directory,
)
from talent_core.planning.paths import PathT, node_paths, node_prior, plan_text, planned, top_plan
from talent_core.planning.reranker import RERANKER_DIR, PathReranker, load_reranker
from talent_core.store import GraphReader

if TYPE_CHECKING:
    from talent_core.embedding import Embedder

log = logging.getLogger(__name__)

@dataclass
class Plan:
    """A question's planned relation paths, the prior pi(node id) they give and the
    likeliest planned path reaching each node (all empty: no planner or no anchors)."""

    paths: list[PlannedPath] = field(default_factory=list)
    prior: dict[str, float] = field(default_factory=dict)
    via: dict[str, str] = field(default_factory=dict)
    ends: dict[str, set[str]] = field(default_factory=dict)  # path text -> the ids it reaches
    kind: str | None = None  # the planner's `kind`: "matcher (name)" / "zero-shot"
    confidence: float | None = None  # p of the top path before truncation
    runner_up: PlannedPath | None = None  # the second likeliest path, p before truncation
    joint: list[str] = field(default_factory=list)  # mentions whose paths meet (`joint_plan`)


# chosen on validation questions (bench/README.md, "The path re-ranker")
RERANK = 5
RERANK_WEIGHT = 1.0


@dataclass
class MatcherPlanner:
    """The matcher as a planner: the beam's settings and how its plan weighs answers."""

    matcher: PathMatcher
    beam: BeamSettings = field(default_factory=BeamSettings)
    # the size of the store's vectors (its embedder's): the relation index is asked
    # (`missing_relation`) only by a matcher of that size; None: never
    index_dim: int | None = None
    answer_weight: float = 20.0  # w of `paths.rescore` (bench/README: the planner's w)
    eps: float = 1e-3
    join_limit: int = 50  # planned ends that join the candidate answers
    mass: float = 0.95
    top: int = 5
    reranker: PathReranker | None = None
    rerank: int = RERANK  # the matcher's best paths the re-ranker scores again
    rerank_weight: float = RERANK_WEIGHT  # lambda: the matcher's weight beside the re-ranker

    @property
    def kind(self) -> str:
        kind = self.matcher.kind
        return kind if self.reranker is None else f"{kind} + re-ranker"

    def reranked(self, text: str, scores: dict[PathT, float]) -> dict[PathT, float]:
        """``scores`` (the beam's, by the matcher) as the planner ranks them: with a
        re-ranker, its best `rerank` only, each scored (logit + lambda x the matcher's) /
        (1 + lambda): the two scorers' weighted mean, so the plan's softmax is no sharper
        than either's (the sum was over-confident on validation questions)."""
        if self.reranker is None or not scores:
            return scores
        order = sorted(scores, key=lambda t: (-scores[t], len(t), t))[: self.rerank]
        logits = self.reranker.score(text, order)
        lam = self.rerank_weight
        return {t: (float(z) + lam * scores[t]) / (1 + lam) for t, z in zip(order, logits)}


def matcher_plan(planner: MatcherPlanner, store: GraphReader, candidate: Candidate) -> Plan:
    """The plan over the anchors' own paths grown by the beam under the matcher's score.
    Anchors of two or more mentions (not the case variants of one name, as "Heat" and the
    tag "heat") plan each on its own: where the top paths of all of them reach common
    nodes, those are the plan's ends (`joint_plan`); else the anchors plan together."""
    names = {s.id: s.name for s in candidate.seeds}
    matcher = planner.matcher
    groups: dict[str, list[str]] = {}
    for a in candidate.anchors:
        groups.setdefault(names.get(a, a).casefold(), []).append(a)
    question = candidate.question
    if candidate.reading is not None:  # a follow-up's referents plan as one set
        groups = {candidate.reading.words: list(candidate.anchors)}
        question = without_words(question, candidate.reading.words)
    if len(groups) > 1:
        parts = mention_texts(candidate.question, [names.get(g[0], g[0])
                                                   for g in groups.values()])
        scorers = [_scorers(matcher, matcher.encode_question(t)) for t in parts]
        joint = joint_plan(store, list(groups.values()), names, scorers, planner, parts)
        if joint is not None:
            return joint
    text = plan_text(question, [names.get(a, "") for a in candidate.anchors])
    q = matcher.encode_question(text)
    score, quick = _scorers(matcher, q)
    grown = grow(store, candidate.anchors, score, planner.beam, quick)
    by_matcher = grown.scores
    grown.scores = planner.reranked(text, by_matcher)
    order, p = _softmax(grown.scores)
    steps = top_plan(grown.scores, planner.mass, planner.top)
    complete(store, candidate.anchors, grown, [t for t, _ in steps] + order[1:2],
             planner.beam.walk_limit)
    steps = [(t, q) for t, q in steps if grown.ends.get(t)]
    total = sum(q for _, q in steps)
    plan = _plan([(t, q / total) for t, q in steps], grown.ends, planner)
    if order:
        plan.confidence = round(float(p[0]), 4)
        if len(order) > 1:
            plan.runner_up = PlannedPath(rels=list(order[1]), prob=round(float(p[1]), 4),
                                         ends=len(grown.ends[order[1]]))
        if (plan.paths and tuple(plan.paths[0].rels) == order[0]
                and planner.index_dim == q.shape[0]):
            plan.paths[0].missing = missing_relation(store, matcher, q,
                                                     by_matcher[order[0]] / matcher.scale)
    return plan


MISSING_GAP = 0.2  # cosine by which a relation the anchors lack must beat their best path
MISSING_K = 50  # the store's relations nearest the question that are compared


def missing_relation(store: GraphReader, matcher: PathMatcher, q: np.ndarray,
                     best: float) -> str | None:
    """The KG relation the question reads as, when the anchors lack it: of the store's
    `MISSING_K` relations nearest the question vector ``q`` (its relation index), the one
    the matcher scores highest as a path of its own, if that beats the anchors' best path
    (cosine ``best``) by `MISSING_GAP` (a relation the anchors have never does: it is one
    of their paths). Measured in bench/README.md (WebQSP dev: 22 of 400 questions, 19 of
    them answered wrong; MetaQA held-out: none). ``q`` must be of the store's vector size
    (`MatcherPlanner.index_dim`)."""
    rels = [r.name for r in store.top_relations(q.tolist(), MISSING_K)]
    if not rels:
        return None
    sims = matcher.similarity(q, [(r,) for r in rels])
    i = int(np.argmax(sims))
    return rels[i] if float(sims[i]) > best + MISSING_GAP else None


def reading_scorer(planner: MatcherPlanner, store: GraphReader, question: str, word: str
                   ) -> Callable[[list[str]], float]:
    """How well ``question`` (without its referring ``word``, embedded once) plans from a
    set of anchors: the matcher's best score over the paths the beam grows from them (-inf:
    none); what `conversation.read_follow_up` compares between the previous answers and
    topic."""
    score, quick = _scorers(planner.matcher,
                            planner.matcher.encode_question(without_words(question, word)))

    def best(anchors: list[str]) -> float:
        grown = grow(store, anchors, score, planner.beam, quick)
        return max(grown.scores.values(), default=-math.inf)

    return best


# words that join the mentions (the joint plan's intersection says them), never a relation's:
# "both" read by one mention's path is the co-member path ("films with both X and Y")
JOINING = frozenset({"and", "both"})


def mention_texts(question: str, mentions: list[str]) -> list[str]:
    """What each mention's path is scored against when several mentions plan together: the
    words before it back to the previous mention (the first: from the start), without the
    words that join mentions (`JOINING`; a mention left with none reads the previous
    one's: "which films feature both X and Y"), and the words after the last mention,
    which all share; without the names. Any mention not found in the question: the whole
    question (names removed) for each."""
    low = question.casefold()
    spans = []
    for name in mentions:
        at = low.find(name.casefold())
        if not name or at < 0:
            return [plan_text(question, mentions)] * len(mentions)
        spans.append((at, at + len(name)))
    order = sorted(range(len(mentions)), key=lambda i: spans[i][0])
    tail = question[max(e for _, e in spans):]
    out = [""] * len(mentions)
    start, before = 0, ""
    for i in order:
        own = " ".join(w for w in question[start:spans[i][0]].split()
                       if w.casefold() not in JOINING)
        if not own.strip(" ,"):  # "X and Y": Y reads the words X does
            own = before
        out[i] = plan_text(own + " " + tail, mentions)
        start, before = spans[i][1], own
    return out


def text_scorers(planner: MatcherPlanner, text: str) -> tuple[Any, Any]:
    """(path score, relation score) of ``text`` under the planner's matcher: what the
    operators rank paths and value relations with."""
    return _scorers(planner.matcher, planner.matcher.encode_question(text))


def _scorers(matcher: PathMatcher, q: np.ndarray) -> tuple[Any, Any]:
    """(path score, relation score) of a question vector under the matcher."""
    return ((lambda ts: (matcher.scale * matcher.similarity(q, ts)).tolist()),
            (lambda rels: matcher.similarity(q, [(r,) for r in rels]).tolist()))


def joint_plan(store: GraphReader, groups: list[list[str]], names: dict[str, str],
               scorers: list[tuple[Any, Any]], planner: MatcherPlanner,
               texts: list[str]) -> Plan | None:
    """Several mentions' plans meeting: of each group of anchors' ``JOINT_TOP`` likeliest
    paths (its own beam, scored against its own words, `mention_texts`), the combination
    with the highest total log-probability whose paths all reach a common node; those
    nodes are the ends of each, the mass shared equally. None when a group has no path or
    no combination meets."""
    options: list[list[tuple[PathT, set[str], float]]] = []
    for group, (score, quick), text in zip(groups, scorers, texts):
        grown = grow(store, group, score, planner.beam, quick)
        grown.scores = planner.reranked(text, grown.scores)
        order, p = _softmax(grown.scores)
        if not order:
            return None
        complete(store, group, grown, order[:JOINT_TOP], planner.beam.walk_limit)
        options.append([(t, grown.ends[t], float(q)) for t, q in
                        zip(order[:JOINT_TOP], p[:JOINT_TOP].tolist())])
    best: tuple[float, tuple, set[str]] | None = None
    for combo in itertools.product(*options):
        common = set.intersection(*(ends for _, ends, _ in combo))
        total = sum(math.log(max(q, 1e-12)) for *_, q in combo)
        if common and (best is None or total > best[0]):
            best = (total, combo, common)
    if best is None:
        return None
    _, combo, common = best
    mentions = [names.get(g[0], g[0]) for g in groups]
    paths = list(dict.fromkeys(t for t, _, _ in combo))
    plan = _plan([(t, 1.0 / len(paths)) for t in paths], {t: common for t in paths}, planner)
    by_path: dict[PathT, list[str]] = {}
    for name, (t, _, _) in zip(mentions, combo):
        by_path.setdefault(t, []).append(name)
    for pp in plan.paths:
        pp.anchor = ", ".join(by_path.get(tuple(pp.rels), []))
    plan.joint = mentions
    plan.confidence = round(math.exp(best[0]), 4)
    return plan


JOINT_TOP = 5  # paths per mention combined by `joint_plan`


def _softmax(scores: dict[PathT, float]) -> tuple[list[PathT], np.ndarray]:
    """The paths by score, best first (ties: shorter, then by name), and their softmax."""
    order = sorted(scores, key=lambda t: (-scores[t], len(t), t))
    if not order:
        return [], np.zeros(0)
    z = np.array([scores[t] for t in order])
    p = np.exp(z - z.max())
    return order, p / p.sum()


def resolve(spec: str, embedding_model: str, embedder: Embedder,
            data_dir: Path | None = None) -> MatcherPlanner | None:
    """The planner of a --planner choice: "none"; "zero-shot" (the store's embedder as the
    matcher, no training); "bundled" (the matcher `talent train planner --self` adapted to
    this store, in the data dir, else the shipped one; a store embedding with another model
    than the shipped matcher tunes plans zero-shot); or a matcher directory (`PlannerError`
    when unusable). A matcher directory's `RERANKER_DIR`, where it holds one, re-ranks."""
    if spec == "none":
        return None
    dim = getattr(embedder, "dimension", None)  # the store's vectors (its relation index)
    if spec == "bundled":
        own = data_dir / SELF_DIR if data_dir is not None else None
        if own is not None and (own / META_FILE).is_file():
            spec = str(own)
        elif bundled_base() != embedding_model:
            log.info("the shipped matcher tunes %s, the store embeds with %s: planning "
                     "zero-shot", bundled_base(), embedding_model)
            spec = "zero-shot"
    matcher = load_matcher(spec, embedding_model, embedder)
    reranker = None
    if spec != "zero-shot":  # a matcher directory's own re-ranker, where it has one
        reranker = load_reranker(matcher_directory(spec) / RERANKER_DIR, embedding_model)
    return MatcherPlanner(matcher, index_dim=dim, reranker=reranker)


SELF_DIR = "matcher"  # the data dir's own matcher (`talent train planner --self`)


def plan_paths(planner: MatcherPlanner | None, store: GraphReader, candidate: Candidate
               ) -> Plan:
    """The planned relation paths from ``candidate``'s anchors (empty: no planner, or no
    anchors)."""
    if planner is None or not candidate.anchors:
        return Plan()
    return matcher_plan(planner, store, candidate)


def _plan(steps: list[tuple[PathT, float]], ends: dict[PathT, set[str]],
          model: MatcherPlanner) -> Plan:
    via = {n: path_text(t) for n, t in node_paths(steps, ends).items()}
    return Plan(planned(steps, ends), node_prior(steps, ends), via,
                {path_text(t): ends.get(t, set()) for t, _ in steps}, model.kind)


def join_plan(store: GraphReader, candidate: Candidate, plan: Plan, budget: int) -> Candidate:
    """S joined by the planned paths' ends with the hops that reach them from an anchor
    (`explore.planned_hops`), likeliest path first, ends in id order, until ``budget`` new
    nodes; a node already in S costs nothing. Returns a new Candidate (``candidate`` as is
    when nothing joins)."""
    have = {n.id for n in candidate.nodes}
    new_ids: list[str] = []
    new_edges: set[tuple[str, str, str]] = set()
    for pp in sorted(plan.paths, key=lambda x: -x.prob):
        ends = sorted(plan.ends.get(path_text(pp.rels), set()) - have - set(new_ids))
        if not ends or len(new_ids) >= budget:
            continue
        hops = planned_hops(store, candidate.anchors, pp.rels, ends[:budget])
        for end in ends:
            path = hops.get(end)
            if not path:
                continue
            nodes = [n for h in path for n in (h.src, h.dst)
                     if n not in have and n not in new_ids]
            nodes = list(dict.fromkeys(nodes))
            if len(new_ids) + len(nodes) > budget:
                break
            new_ids.extend(nodes)
            new_edges.update((h.src, h.rel, h.dst) for h in path)
    if not new_ids:
        return candidate
    named = {e.id: e.name for e in store.entities_by_id(new_ids)}
    old_edges = {(e.src, e.rel, e.dst) for e in candidate.edges}
    return candidate.model_copy(update={
        "nodes": [*candidate.nodes, *(CandidateNode(id=i, name=named.get(i, i))
                                      for i in new_ids)],
        "edges": [*candidate.edges, *(CandidateEdge(src=a, rel=r, dst=b)
                                      for a, r, b in sorted(new_edges - old_edges))],
    })
