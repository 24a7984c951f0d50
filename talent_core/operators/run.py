"""Operators computed over the planned set in the store (`apply`): the plan gives the set
(its anchors and relation path), the store counts it (`count_follow`: no node fetched)
or reads one relation's values of its members (`member_values`), and the literals are
compared here as numbers or dates (`values`; Neo4j and FalkorDB parse date strings
differently, so the comparison is one pure function for every store). The relation whose
values are compared is the one the planner's matcher scores best against the question's
words among the members' relations with comparable values: no word list per KG."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from talent_core.explore import is_cvt
from talent_core.models import Candidate, Operation, OperationResult, StoreQuery, path_text
from talent_core.operators.recognise import unbracketed
from talent_core.operators.values import comparable_share, holds, value_key
from talent_core.planning import Plan
from talent_core.planning.beam import grow
from talent_core.planning.paths import PathT, plan_text, walk
from talent_core.planning.plan import MatcherPlanner, text_scorers
from talent_core.store import GraphReader
from talent_core.store.cypher import DIALECTS, statement

log = logging.getLogger(__name__)

LISTED = 50  # names of the plain list kept in a result
SAMPLE = 50  # members read to tell which relations have comparable values
SHOWN = 10  # ids of a list parameter shown in the evidence
CLOSE = 0.05  # two value relations within this cosine of each other: unsure
READINGS = 3  # planned paths a filter or superlative may read (the first whose members compare)
# a count's path: the plan's best COUNTED paths by ln p + NOUN_WEIGHT x the cosine of the
# counted noun with NOUN_NAMES of the path's ends' names (chosen on dev: bench/README)
COUNTED = 4
NOUN_WEIGHT = 6.0
NOUN_NAMES = 30


@dataclass
class PlainSet:
    """The set the plain pipeline answered: its ids and names, and the plan's path."""

    ids: list[str]
    names: list[str]
    path: str | None


def apply(op: Operation, store: GraphReader, planner: MatcherPlanner, candidate: Candidate,
          plan: Plan, plain: PlainSet) -> OperationResult:
    """The typed answer of ``op`` over the plan of ``candidate``; a comparison or yes/no
    question with fewer than two linked entities gets a notice and no answer (the plain
    answer stands)."""
    if op.op in ("compare", "exists"):
        groups = mention_groups(candidate)
        if len(groups) < 2:
            found = " ".join(n for n, _ in groups) or "none"
            return OperationResult(
                op=op.op, answer_type="yes/no" if op.yes_no else "entities",
                members=len(groups), notice=f"read as a {op.op} of two entities, but the "
                f"KG matched one ({found}): the plain answer is shown")
        if op.op == "exists":
            return _exists(op, store, planner, groups[:2])
        if op.by_count:
            return _compare_counts(op, store, planner, groups[:2])
        return _compare_values(op, store, planner, groups[:2])
    rels = _rels_of(plan, plain.path)
    members = plain.ids or sorted(plan.ends.get(plan.paths[0].text, set()) if plan.paths
                                  else set())
    if op.op == "count":
        return _count(op, store, planner, candidate, plan, rels, members, plain)
    return _by_value(op, store, planner, _readings_with_values(plan, rels, members), plain)


def answered_in_store(candidate: Candidate) -> bool:
    """The question compares or joins two linked entities (compare / exists): the operator
    answers from the store alone, S needs no plan and no language model runs."""
    op = candidate.operation
    return (op is not None and op.op in ("compare", "exists")
            and len(mention_groups(candidate)) >= 2)


def mention_groups(candidate: Candidate) -> list[tuple[str, list[str]]]:
    """The anchors as one group per mention (case variants of a name together), in the
    order the question names them: (name, ids)."""
    names = {s.id: s.name for s in candidate.seeds}
    groups: dict[str, tuple[str, list[str]]] = {}
    for a in candidate.anchors:
        name = names.get(a, a)
        groups.setdefault(name.casefold(), (name, []))[1].append(a)
    question = candidate.question
    low = question.casefold()
    out = []
    for name, ids in groups.values():
        # the spelling the question wrote ("Tom Hanks", not the tag "tom hanks") when a
        # case variant has it: a tag's own paths are not what the question asks of the name
        exact = [i for i in ids if names.get(i, i) in question]
        out.append((name if not exact else names.get(exact[0], name), exact or ids))
    return sorted(out, key=lambda g: low.find(g[0].casefold()) % (len(low) + 1))


def _rels_of(plan: Plan, path: str | None) -> list[str]:
    for pp in plan.paths:
        if path is None or pp.text == path:
            return list(pp.rels)
    return []


def store_query(store: GraphReader, name: str, params: dict) -> StoreQuery:
    """The evidence of one store query: its statement in the store's dialect (the
    in-memory reference store runs the same operation in Python) and its parameters."""
    dialect = store.dialect
    cypher = (statement(name, dialect) if dialect in DIALECTS else
              f"(in-memory reference store: GraphReader.{name} in Python)")
    shown: dict[str, object] = {}
    sizes: dict[str, int] = {}
    for k, v in params.items():
        if isinstance(v, list | tuple):
            shown[k], sizes[k] = list(v)[:SHOWN], len(v)
        else:
            shown[k] = v
    return StoreQuery(name=name, cypher=cypher, params=shown, sizes=sizes)


def count_path(store: GraphReader, anchors: Sequence[str], rels: Sequence[str],
               limit: int) -> tuple[int, list[StoreQuery]]:
    """How many nodes a relation path reaches from ``anchors`` (the anchors not counted,
    as the planner's walk): its prefix walked (`paths.walk`), its last hop counted in the
    store."""
    frontier = set(anchors)
    if len(rels) > 1:
        walked, _ = walk(store.follow, anchors, [tuple(rels[:-1])], limit=limit)
        frontier = walked[tuple(rels[:-1])]
    params = {"ids": sorted(frontier), "rel": rels[-1], "exclude": sorted(anchors)}
    n = store.count_follow(params["ids"], rels[-1], params["exclude"])
    return n, [store_query(store, "count_follow", params)]


def _count(op: Operation, store: GraphReader, planner: MatcherPlanner, candidate: Candidate,
           plan: Plan, rels: list[str], members: list[str], plain: PlainSet) -> OperationResult:
    noun = op.noun or "answers"
    out = OperationResult(op="count", answer_type="number", listed=plain.names[:LISTED])
    if rels and not plan.joint:
        counted = counted_path(store, planner, plan, op.noun) or rels
        if counted != rels:  # the list shown is the set counted
            ids = sorted(plan.ends.get(path_text(counted), set()))[:LISTED]
            out.listed = [n for n in _names(store, ids).values() if not is_cvt(n)]
        rels = counted
        n, out.queries = count_path(store, candidate.anchors, rels, planner.beam.walk_limit)
    else:  # several mentions meeting: the set is their intersection, counted here
        n = len(members)
        if not rels:
            out.notice = "no relation path was planned: counted the answers listed"
    out.path = path_text(rels) or None
    out.members = n
    out.answer = [str(n)]
    out.text = f"{n} {noun}"
    return out


def counted_path(store: GraphReader, planner: MatcherPlanner, plan: Plan, noun: str
                 ) -> list[str]:
    """The path a count counts: a count names what it counts ("how many *professions*")
    and the right path's ends look like it, where the planner's top path may read a
    co-member path ("the other holders of X's professions": `profession > profession`,
    people) at a close probability. Of the plan's best COUNTED paths, the one with the
    largest ln p + NOUN_WEIGHT x mean cos(noun, the names of its first NOUN_NAMES ends)
    (the matcher's encoder); [] without a noun or a plan."""
    paths = [pp for pp in plan.paths[:COUNTED] if plan.ends.get(pp.text)]
    if not noun or not paths:
        return []
    if len(paths) == 1:
        return list(paths[0].rels)
    q = planner.matcher.encode_question(noun)
    first = {pp.text: sorted(plan.ends[pp.text])[:NOUN_NAMES] for pp in paths}
    named = _names(store, sorted({i for ids in first.values() for i in ids}))
    texts = sorted({n for n in named.values() if n and not is_cvt(n)})
    cos = dict(zip(texts, (_unit(np.asarray(planner.matcher.embedder.encode(texts),
                                            dtype=np.float32)) @ q).tolist())) if texts else {}
    best, best_score = [], -math.inf
    for pp in paths:  # one name lookup and one encoder pass for all the paths
        names = [named[i] for i in first[pp.text] if named.get(i) in cos]
        like = float(np.mean([cos[n] for n in names])) if names else 0.0
        score = math.log(max(pp.prob, 1e-6)) + NOUN_WEIGHT * like
        if score > best_score:
            best, best_score = list(pp.rels), score
    return best


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def _value_relation(store: GraphReader, planner: MatcherPlanner, ids: Sequence[str],
                    text: str) -> tuple[str | None, str | None]:
    """The relation at ``ids`` whose values compare (most parse as numbers or dates) that
    the matcher scores best against ``text``, and a notice when another is close."""
    sample = list(ids)[:SAMPLE]
    comparable = [r for r in sorted(store.relations_at(sample))
                  if comparable_share(sample, store.member_values(sample, r)) >= 0.5]
    if not comparable:
        return None, "no relation of these entities holds numbers or dates to compare"
    _, quick = text_scorers(planner, text)
    score = dict(zip(comparable, quick(comparable)))
    order = sorted(comparable, key=lambda r: (-score[r], r))
    notice = None
    if len(order) > 1 and score[order[0]] - score[order[1]] < CLOSE:
        notice = (f"unsure which relation the question compares: read '{order[0]}' "
                  f"(cosine {score[order[0]]:.2f}); '{order[1]}' is close "
                  f"({score[order[1]]:.2f})")
    return order[0], notice


def _keyed(store: GraphReader, ids: Sequence[str], rel: str
           ) -> tuple[dict[str, list[tuple[float, str]]], StoreQuery]:
    """Each member's comparable values of ``rel``: id -> [(key, value text)]."""
    rows = store.member_values(list(ids), rel)
    out: dict[str, list[tuple[float, str]]] = {}
    for i, _, v in rows:
        k = value_key(v)
        if k is not None:
            out.setdefault(i, []).append((k, v))
    return out, store_query(store, "member_values", {"ids": list(ids), "rel": rel})


def _names(store: GraphReader, ids: Sequence[str]) -> dict[str, str]:
    return {e.id: e.name for e in store.entities_by_id(list(ids))}


def _readings_with_values(plan: Plan, rels: list[str], members: list[str]
                          ) -> list[tuple[list[str], list[str]]]:
    """The sets a filter or superlative may read: the plain answer's path and members
    first, then the plan's other paths (likeliest first, at most ``READINGS`` in all)."""
    out = [(rels, members)]
    for pp in plan.paths:
        if len(out) >= READINGS:
            break
        if list(pp.rels) != rels and not plan.joint:
            out.append((list(pp.rels), sorted(plan.ends.get(pp.text, set()))))
    return out


def _by_value(op: Operation, store: GraphReader, planner: MatcherPlanner,
              readings: list[tuple[list[str], list[str]]], plain: PlainSet) -> OperationResult:
    """A filter or a superlative over the members of the first reading whose members hold
    values that compare (numbers or dates): a set of people read for "films released
    before 2010" holds no year, the next reading's films do (said in the notice)."""
    rels, members = readings[0]
    out = OperationResult(op=op.op, answer_type="entities", path=path_text(rels) or None,
                          members=len(members), listed=plain.names[:LISTED])
    if not members:
        out.notice = "the planned set is empty: nothing to " + (
            "filter" if op.op == "filter" else "compare")
        return out
    text = f"{op.clause} {op.cue}".strip()
    rel, out.notice = _value_relation(store, planner, members, text)
    for other, ids in readings[1:] if rel is None else []:
        rel, notice = _value_relation(store, planner, ids, text) if ids else (None, None)
        if rel is not None:
            out.notice = "; ".join(x for x in (
                f"the planned set ('{path_text(rels)}') holds no numbers or dates to "
                f"compare: read '{path_text(other)}', the plan's next reading whose members "
                "do", notice) if x)
            rels, members = other, ids
            out.path, out.members = path_text(rels), len(members)
            break
    if rel is None:
        return out
    out.relation = rel
    keyed, query = _keyed(store, members, rel)
    out.queries = [query]
    if op.op == "filter":
        bound = value_key(op.value or "")
        assert bound is not None and op.comparator is not None  # the recogniser parsed it
        comparator = op.comparator
        kept = {i: max(kv for kv in ks if holds(kv[0], comparator, bound))
                for i, ks in keyed.items() if any(holds(k, comparator, bound) for k, _ in ks)}
    else:
        best = {i: (max(ks) if op.most else min(ks)) for i, ks in keyed.items()}
        top = (max if op.most else min)((k for k, _ in best.values()), default=None)
        kept = {i: kv for i, kv in best.items() if kv[0] == top}
    names = _names(store, list(kept))
    order = sorted(kept, key=lambda i: (kept[i][0], names.get(i, i)))
    order = [i for i in order if not is_cvt(names.get(i, i))]
    out.answer_ids = order
    out.answer = [names.get(i, i) for i in order]
    out.values = {names.get(i, i): kept[i][1] for i in order}
    if op.op == "filter":  # the names follow in the answer list
        out.text = f"{len(order)} of {len(members)} with {rel} {op.cue}"
    elif order:
        shown = ", ".join(f"{names.get(i, i)} ({kept[i][1]})" for i in order[:5])
        more = f" and {len(order) - 5} more" if len(order) > 5 else ""
        out.text = f"{op.cue} by {rel}: {shown}{more}"
    else:
        out.text = f"no {rel} values"
    return out


def _decide(op: Operation, out: OperationResult, groups: list[tuple[str, list[str]]],
            keys: Sequence[float], why: str, yes_no_why: str | None = None) -> bool:
    """``out``'s answer from the two entities' keys (a value or a count): yes when the
    first has the larger (``op.most``, else smaller) key, else the entity that has it
    (both on a tie); ``why`` in the text (``yes_no_why`` for a yes/no when given). Returns
    whether the keys tie."""
    pick = (max if op.most else min)(range(2), key=lambda j: keys[j])
    tie = keys[0] == keys[1]
    if op.yes_no:
        out.answer = ["yes" if not tie and pick == 0 else "no"]
        out.text = yes_no_why or why
    else:
        chosen = [j for j in range(2) if tie or j == pick]
        out.answer = [groups[j][0] for j in chosen]
        out.answer_ids = [groups[j][1][0] for j in chosen]
        out.text = f"{' and '.join(out.answer)} ({why})"
    return tie


def _compare_values(op: Operation, store: GraphReader, planner: MatcherPlanner,
                    groups: list[tuple[str, list[str]]]) -> OperationResult:
    """Which of two entities has the larger (smaller) value of one relation."""
    ids = [i for _, g in groups for i in g]
    out = OperationResult(op="compare", answer_type="yes/no" if op.yes_no else "entities",
                          members=len(groups))
    rel, out.notice = _value_relation(store, planner, ids, f"{op.clause} {op.cue}".strip())
    if rel is None:
        return out
    out.relation = rel
    keyed, query = _keyed(store, ids, rel)
    out.queries = [query]
    best: list[tuple[float, str]] = []  # (key, value) per entity
    for name, g in groups:
        ks = [kv for i in g for kv in keyed.get(i, [])]
        if not ks:
            out.notice = f"{name} has no {rel} value in the KG"
            return out
        best.append(max(ks) if op.most else min(ks))
        out.values[name] = best[-1][1]
    facts = "; ".join(f"{n}: {v}" for n, v in out.values.items())
    if _decide(op, out, groups, [k for k, _ in best], f"{op.cue} by {rel}: {facts}",
               f"{rel}: {facts}"):
        out.notice = f"both have {rel} {best[0][1]}"
    return out


def best_path(store: GraphReader, planner: MatcherPlanner, anchors: list[str], text: str
               ) -> tuple[PathT, float] | None:
    """The planner's best path from ``anchors`` for ``text`` (the beam's top, as the
    planner's re-ranker orders it where it has one) and its score."""
    score, quick = text_scorers(planner, text)
    grown = grow(store, anchors, score, planner.beam, quick)
    scores = planner.reranked(text, grown.scores)
    best = min(scores, key=lambda t: (-scores[t], len(t), t), default=None)
    return None if best is None else (best, scores[best])


def _compare_counts(op: Operation, store: GraphReader, planner: MatcherPlanner,
                    groups: list[tuple[str, list[str]]]) -> OperationResult:
    """Which of two entities reaches more (fewer) nodes over the path the question asks
    for (planned from the first, counted from both)."""
    out = OperationResult(op="compare", answer_type="yes/no" if op.yes_no else "entities",
                          members=len(groups))
    text = plan_text(unbracketed(op.clause), [n for n, _ in groups])
    best = best_path(store, planner, groups[0][1], text)
    if best is None:
        out.notice = f"no relation path from {groups[0][0]} fits the question"
        return out
    t = best[0]
    out.path = path_text(t)
    counts = []
    for name, g in groups:
        n, qs = count_path(store, g, t, planner.beam.walk_limit)
        counts.append(n)
        out.queries.extend(qs)
        out.values[name] = str(n)
    facts = "; ".join(f"{n}: {c}" for n, c in out.values.items())
    _decide(op, out, groups, counts, f"{out.path}: {facts}")
    return out


def _exists(op: Operation, store: GraphReader, planner: MatcherPlanner,
            groups: list[tuple[str, list[str]]]) -> OperationResult:
    """Whether the path the question asks for leads from one entity to the other: each
    entity plans it (the matcher's top path from it), and yes when either reading reaches
    the other entity (Freebase holds many facts under one of an inverse pair only:
    `tourist_attractions` from the city or `near_travel_destination` from the
    attraction). Measured limit: an entity that lacks the asked relation plans its best
    available one, which may reach the other ("did [an actor] direct [a film whose
    director the KG lacks]" reads `starred_actors`: a wrong yes; bench/README)."""
    out = OperationResult(op="exists", answer_type="yes/no", members=len(groups))
    text = plan_text(unbracketed(op.base), [n for n, _ in groups])
    sides = []
    for (name, g), (other, targets) in ((groups[0], groups[1]), (groups[1], groups[0])):
        best = best_path(store, planner, g, text)
        if best is None:
            continue
        t, score = best
        walked, _ = walk(store.follow, g, [t], limit=planner.beam.walk_limit)
        reach = bool(set(targets) & walked[t])
        out.queries.append(store_query(store, "follow_relation", {"ids": list(g),
                                                                  "rel": t[0]}))
        sides.append((score, reach, name, other, t))
    if not sides:
        out.answer = ["no"]
        out.text = "no relation path from either entity"
        return out
    score, reach, name, other, t = max(sides, key=lambda x: (x[1], x[0]))
    out.path = path_text(t)
    out.answer = ["yes" if reach else "no"]
    out.text = (f"{name} > {out.path} > {other}" if reach else
                f"{other} is not at the end of '{out.path}' from {name}")
    return out
