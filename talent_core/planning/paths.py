"""Relation paths: the pure definitions planning uses (direction ignored throughout).

A KGQA question names a path of relations from its topic entity to its answers ("who
directed the films starring [X]": starred_actors, directed_by). RoG (Luo et al. 2024,
"Reasoning on Graphs") plans such paths with a fine-tuned LLM and answers from the nodes they
reach; here a question <-> path matcher ranks the paths the anchors really have
(`planning.matcher`, `planning.beam`), and the plan re-weights the LLM generator's ranked
answers; beyond the TaLenT paper (its free decoding never reads it), off with
``--planner none``.

* A path T = (r_1, .., r_L): relation names followed from the anchors, direction ignored,
  never passing through or ending at an anchor. ends(T): the nodes it reaches (`walk`: one
  `GraphReader.follow` call per distinct prefix, at most ``limit`` neighbours per node).
* The plan: softmax of the paths' scores, the most probable in order until their mass
  reaches ``mass`` (at most ``top``), renormalised (`top_plan`).
* Node prior (`node_prior`): pi(c) = sum over planned T of p(T | q) [c in ends(T)].
* Ranked answers (`rescore`): score(c) = log p_LM(c) + w log(pi(c) + eps); the answer set is
  then the planned path's ends or the generator's margin (`answer.answer_set`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from talent_core.models import PlannedPath
from talent_core.retrieval.relations import strip_mentions

PathT = tuple[str, ...]
Follow = Callable[[Sequence[str], str, int], list[tuple[str, str]]]


def plan_text(question: str, anchor_names: Iterable[str]) -> str:
    """What the planner embeds: the question without its anchors' mentions (the path a
    question asks for does not depend on which film it names)."""
    return strip_mentions(question, anchor_names)


def walk(follow: Follow, anchors: Sequence[str], paths: Iterable[PathT], limit: int,
         max_frontier: int = 5000) -> tuple[dict[PathT, set[str]], bool]:
    """(ends of each path, whether a cap cut a walk): one ``follow`` call per distinct
    prefix; a frontier past ``max_frontier`` nodes is cut (in id order)."""
    anchor_set = set(anchors)
    reached: dict[PathT, set[str]] = {(): set(anchors)}
    truncated = False
    for path in paths:
        for d in range(1, len(path) + 1):
            prefix = path[:d]
            if prefix in reached:
                continue
            frontier = sorted(reached[path[: d - 1]])
            if len(frontier) > max_frontier:
                frontier, truncated = frontier[:max_frontier], True
            got: set[str] = set()
            per_node: dict[str, int] = defaultdict(int)
            for src, dst in follow(frontier, path[d - 1], limit + 1) if frontier else []:
                per_node[src] += 1
                if per_node[src] > limit:
                    truncated = True
                    continue
                if dst not in anchor_set:
                    got.add(dst)
            reached[prefix] = got
    return {p: reached[p] for p in paths}, truncated


def node_prior(plan: Sequence[tuple[PathT, float]], ends: Mapping[PathT, set[str]]
               ) -> dict[str, float]:
    """pi(c) = sum of p(T) over the planned types T whose ends hold c."""
    prior: dict[str, float] = defaultdict(float)
    for path, p in plan:
        for node in ends.get(path, ()):
            prior[node] += p
    return dict(prior)


def node_paths(plan: Sequence[tuple[PathT, float]], ends: Mapping[PathT, set[str]]
               ) -> dict[str, PathT]:
    """The likeliest planned type reaching each node (the answer's evidence)."""
    out: dict[str, PathT] = {}
    for path, _ in sorted(plan, key=lambda x: -x[1]):
        for node in ends.get(path, ()):
            out.setdefault(node, path)
    return out


def top_plan(scores: Mapping[PathT, float], mass: float = 0.95, top: int = 5
             ) -> list[tuple[PathT, float]]:
    """softmax(scores) truncated: the likeliest paths until their
    mass reaches ``mass`` (at most ``top``), renormalised; ties in type order."""
    if not scores:
        return []
    types = sorted(scores, key=lambda t: (-scores[t], len(t), t))
    z = np.array([scores[t] for t in types], dtype=np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    keep: list[tuple[PathT, float]] = []
    total = 0.0
    for t, q in zip(types, p.tolist()):
        keep.append((t, q))
        total += q
        if total >= mass or len(keep) >= top:
            break
    return [(t, q / total) for t, q in keep]


def rescore(score: float, prior: float, weight: float, eps: float) -> float:
    """The ranked answer score with the plan: log p_LM + w log(pi + eps)."""
    return score + weight * math.log(prior + eps)


def planned(plan: Sequence[tuple[PathT, float]], ends: Mapping[PathT, set[str]]
            ) -> list[PlannedPath]:
    """The plan as the Answer reports it."""
    return [PlannedPath(rels=list(t), prob=round(p, 4), ends=len(ends.get(t, ())))
            for t, p in plan]
