"""The planning stage: which relation paths from its anchors a question asks for, walked in
the store (`retrieval.planner` holds the pure definitions and the model), and S joined by
the planned paths' ends (RoG answers from them; planning moves ahead of the language
models, so the retriever and the generator see them)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from talent_core.explore import is_cvt, planned_hops
from talent_core.models import Candidate, CandidateEdge, CandidateNode, PlannedPath, path_text
from talent_core.retrieval.planner import (
    PathT,
    anchor_types,
    choose_planner,
    node_paths,
    node_prior,
    path_words,
    plan_scores,
    plan_text,
    planned,
    top_plan,
    trained_types,
    walk,
    zero_shot_planner,
)
from talent_core.store import GraphReader
from talent_core.store.base import ExpansionCaps

if TYPE_CHECKING:
    from talent_core.embedding import Embedder
    from talent_core.retrieval.planner import PlannerModel

log = logging.getLogger(__name__)

@dataclass
class Plan:
    """A question's planned relation paths, the prior pi(node id) they give and the
    likeliest planned path reaching each node (all empty: no planner or no anchors)."""

    paths: list[PlannedPath] = field(default_factory=list)
    prior: dict[str, float] = field(default_factory=dict)
    via: dict[str, str] = field(default_factory=dict)
    ends: dict[str, set[str]] = field(default_factory=dict)  # path text -> the ids it reaches
    model: PlannerModel | None = None  # the planner that planned (`choose_planner`)
    kind: str | None = None  # `PlannerModel.kind` of the one that planned


# the anchors' own path types are enumerated in one capped expansion (`plan_paths`)
ANCHOR_CAPS = ExpansionCaps(fanout=200, max_nodes=5000, max_edges=20000)


def plan_paths(planner: PlannerModel | None, known: set[str], embedder: Embedder,
               store: GraphReader, candidate: Candidate) -> Plan:
    """The planned relation paths from ``candidate``'s anchors, over the paths the anchors
    really have. A trained planner ranks those of its types whose first relation the
    anchors have (`planner.trained_types`): the likeliest `consider` are walked in the
    store (none reaching a node: the next 2 x `consider`), empty ones dropped, p
    renormalised. When none reaches a node, or with no trained planner, the zero-shot
    planner ranks the anchors' own types by their words' similarity to the question
    (`zero_shot_plan`). On a store several bundled planners fit, the one whose relations
    S's anchor edges use (`planner.choose_planner`)."""
    if planner is None or not candidate.anchors:
        return Plan()
    if planner.alternatives:
        anchors = set(candidate.anchors)
        rels = {e.rel for e in candidate.edges if e.src in anchors or e.dst in anchors}
        planner, known = choose_planner(planner, known, rels)
    names = {s.id: s.name for s in candidate.seeds}
    text = plan_text(candidate.question, [names.get(a, "") for a in candidate.anchors])
    x = embedder.encode([text])[0]
    first = store.relations_at(candidate.anchors)
    if not planner.zero_shot and planner.weight.shape[1] != len(x):
        log.warning("planner %s: trained on %d-dimensional embeddings, the question's has "
                    "%d; planning zero-shot", planner.meta.get("name", "?"),
                    planner.weight.shape[1], len(x))
    elif not planner.zero_shot:
        p = planner.probabilities(x)
        index = planner.path_index
        types = trained_types(planner, p, first, known)
        ends = {}
        for batch in (types[: planner.consider], types[planner.consider: 3 * planner.consider]):
            walked, _ = walk(store.follow, candidate.anchors, batch, limit=planner.walk_limit)
            ends = {t: e for t, e in walked.items() if e}
            if ends:  # else the next likeliest (a toy KG's short paths, an odd anchor)
                break
        mass = sum(float(p[index[t]]) for t in ends)
        if mass > 0:
            log_prior = {t: math.log(float(p[index[t]]) / mass) for t in ends}
            similarity = ({t: 0.0 for t in ends} if planner.similarity_weight == 0 else
                          type_similarity(embedder, x, list(ends)))
            steps = top_plan(plan_scores(log_prior, similarity, planner.similarity_weight))
            return _plan(steps, ends, planner)
    return zero_shot_plan(zero_shot_planner(planner.meta.get("embedding_model", "")),
                          embedder, x, store, candidate.anchors, first)


def zero_shot_plan(model: PlannerModel, embedder: Embedder, x: np.ndarray,
                   store: GraphReader, anchors: list[str], first: set[str]) -> Plan:
    """The zero-shot plan: the anchors' types (`anchor_types` of one capped expansion, plus
    every relation at an anchor as a one-hop type) scored by similarity; the likeliest
    ``WALKED`` are walked in the store, those reaching only CVT nodes dropped."""
    sub = store.neighbourhood(anchors, model.anchor_hops, ANCHOR_CAPS)
    cvt = {n.id for n in sub.nodes if is_cvt(n.name)}
    own: set[PathT] = set(anchor_types(sub.edges, anchors, model.anchor_hops, cvt))
    own |= {(r,) for r in first}
    scores = plan_scores({}, type_similarity(embedder, x, sorted(own)), model.similarity_weight)
    likeliest = sorted(scores, key=lambda t: (-scores[t], len(t), t))[:WALKED]
    walked, _ = walk(store.follow, anchors, likeliest, limit=model.walk_limit)
    reached = sorted({n for e in walked.values() for n in e} - cvt)
    cvt |= {e.id for e in store.entities_by_id(reached) if is_cvt(e.name)}
    ends = {t: e - cvt for t, e in walked.items() if e - cvt}
    return _plan(top_plan({t: scores[t] for t in ends}), ends, model)


WALKED = 10  # zero-shot types walked per question (the likeliest by similarity)


def _plan(steps: list[tuple[PathT, float]], ends: dict[PathT, set[str]],
          model: PlannerModel) -> Plan:
    via = {n: path_text(t) for n, t in node_paths(steps, ends).items()}
    return Plan(planned(steps, ends), node_prior(steps, ends), via,
                {path_text(t): ends.get(t, set()) for t, _ in steps}, model, model.kind)


# path words -> unit vector, per embedder (the same types recur from question to question)
_WORD_VECTORS: dict[tuple[int, str], np.ndarray] = {}


def type_similarity(embedder: Embedder, x: np.ndarray, types: list[PathT]
                    ) -> dict[PathT, float]:
    """cos(question vector ``x``, the words of each path type) (`planner.path_words`)."""
    if not types:
        return {}
    words = [path_words(t) for t in types]
    missing = sorted({w for w in words if (id(embedder), w) not in _WORD_VECTORS})
    if missing:
        if len(_WORD_VECTORS) > 50_000:
            _WORD_VECTORS.clear()
        got = np.asarray(embedder.encode(missing), dtype=np.float32)
        got /= np.maximum(np.linalg.norm(got, axis=1, keepdims=True), 1e-12)
        _WORD_VECTORS.update({(id(embedder), w): g for w, g in zip(missing, got)})
    v = np.stack([_WORD_VECTORS[(id(embedder), w)] for w in words])
    q = np.asarray(x, dtype=np.float32)
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    return dict(zip(types, (v @ q).tolist()))


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
