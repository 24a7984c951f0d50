"""What the CLI, the UI and the HTTP API read of the KG around an answer: entity search by
name, one entity's neighbours, the question's topics the KG lacks, the out-of-candidate
names' edges into S, each answer's evidence paths from a seed, and the answer's export
(JSON, CSV).

Every store access goes through the store's GraphReader methods (parameterised Cypher in
each store); nothing here builds a query.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from talent_core.config import Settings
from talent_core.embedding import TextEmbedder
from talent_core.errors import DataDirError
from talent_core.models import (
    LEGACY_SOURCE_ID,
    LEGACY_SOURCE_NAME,
    Answer,
    Candidate,
    Entity,
    PlannedPath,
    Reading,
    Selection,
    Subgraph,
    Turn,
    plan_notice,
)
from talent_core.retrieval.linking import search
from talent_core.store.base import ExpansionCaps, GraphReader

# a click on a node adds this many more of its neighbours each time (a hub is not a hairball)
EXPAND_STEP = 10
# the centre of the Explore page
EXPLORE_CAPS = ExpansionCaps(fanout=50, max_nodes=80, max_edges=200)
# an out-of-candidate node's edges, of which those into S are kept
_JOIN_CAPS = ExpansionCaps(fanout=500, max_nodes=501, max_edges=500)


class Hop(NamedTuple):
    """One edge of an evidence path, as stored: the edge's own direction."""

    src: str
    rel: str
    dst: str


class EvidencePath(BaseModel):
    """A path from an anchor to an answer: the planned relation path in the KG
    (``planned``), or a path over S's edges from a seed (no hops: the answer is a seed)."""

    hops: list[Hop] = Field(default_factory=list)
    text: str  # `Seed —rel→ X ←rel— Answer`
    planned: bool = False
    names: dict[str, str] = Field(default_factory=dict)  # id -> name of its nodes


class Evidence(BaseModel):
    """One answer, the KG id it names (None: not found) and its evidence paths."""

    answer: str
    id: str | None
    paths: list[EvidencePath] = Field(default_factory=list)


class EntityMatch(BaseModel):
    """An entity found for a typed name, how, and its score (fuzzy: the name similarity;
    vector: the cosine)."""

    entity: Entity
    # "fuzzy": close enough that Ask's linking reads the name as it; "similar name": not
    how: Literal["exact name", "fuzzy", "similar name", "fulltext", "vector"]
    score: float | None = None

    @property
    def linked(self) -> bool:
        """Ask would read the typed name as this entity (an exact or a fuzzy link)."""
        return self.how in ("exact name", "fuzzy")


# --- readable names -----------------------------------------------------------------------
_CVT = re.compile(r"^[mg]\.[0-9a-z_]+$")


def is_cvt(name: str) -> bool:
    """A Freebase machine id (`m.0abc`, `g.11x`) used as a name: a CVT or unnamed node."""
    return bool(_CVT.match(name or ""))


def readable_label(name: str, rels: Iterable[str] = ()) -> str:
    """The name, or for a CVT node `⟨type⟩ m.0abc` with the type its incident relations
    share (`film.performance.actor` -> `film.performance`)."""
    if not is_cvt(name):
        return name
    types = Counter(r.rsplit(".", 1)[0] for r in rels if "." in r)
    return f"⟨{types.most_common(1)[0][0]}⟩ {name}" if types else f"⟨CVT⟩ {name}"


def node_names(answer: Answer) -> dict[str, str]:
    """KG id -> readable label (CVT nodes named by their relations' type)."""
    rels: dict[str, list[str]] = {}
    for e in answer.candidate.edges:
        rels.setdefault(e.src, []).append(e.rel)
        rels.setdefault(e.dst, []).append(e.rel)
    return {n.id: readable_label(n.name, rels.get(n.id, ())) for n in answer.candidate.nodes}


# --- evidence paths -----------------------------------------------------------------------
def answer_ids(answer: Answer) -> dict[str, list[str]]:
    """Each answer name -> the KG ids it names (ranked decoding gives the id; free decoding
    is matched by name to S's nodes, then to grounded out-of-candidate names)."""
    by_name: dict[str, list[str]] = {}
    for n in answer.candidate.nodes:
        by_name.setdefault(n.name.lower(), []).append(n.id)
    for o in answer.selection.out_of_candidate if answer.selection else []:
        if o.grounded and o.id:
            by_name.setdefault((o.kg_name or o.name).lower(), []).append(o.id)
    ranked = {r.name: r.id for r in answer.ranked if r.id}
    given = dict(zip(answer.answer, answer.answer_ids)) if answer.answer_ids else {}
    out: dict[str, list[str]] = {}
    for a in answer.answer:
        out[a] = ([given[a]] if a in given else [ranked[a]] if a in ranked
                  else by_name.get(a.lower(), []))
    return out


def turn_of(answer: Answer) -> Turn:
    """The turn a follow-up to ``answer`` refers to: its question, its anchors (by the
    names S gives them) and its answers with their KG ids (an answer with no id in the KG
    is left out)."""
    cand = answer.candidate
    names = {n.id: n.name for n in cand.nodes} | {s.id: s.name for s in cand.seeds}
    topic = [Entity(id=a, name=names.get(a, a)) for a in cand.anchors]
    answers = [Entity(id=i, name=name) for name, ids in answer_ids(answer).items()
               for i in ids]
    return Turn(question=answer.question, topic=topic, answers=answers)


def planned_hops(store: GraphReader, anchors: Sequence[str], rels: Sequence[str],
                 targets: Iterable[str], limit: int = 2000) -> dict[str, list[Hop]]:
    """For each target the relation path ``rels`` reaches from an anchor, one such path's
    hops in their own direction (the supporting facts of a planned answer): one `follow`
    per relation, as the planner walks (never through an anchor), then one
    `triples_among` to orient the hops. Targets the path does not reach are left out."""
    anchor_set = set(anchors)
    parents: list[dict[str, str]] = []
    current = sorted(anchor_set)
    for rel in rels:
        step: dict[str, str] = {}
        for src, dst in store.follow(current, rel, limit) if current else []:
            if dst not in anchor_set:
                step.setdefault(dst, src)
        parents.append(step)
        current = sorted(step)
    chains: dict[str, list[str]] = {}
    for t in targets:
        if not parents or t not in parents[-1]:
            continue
        chain = [t]
        for step in reversed(parents):
            chain.append(step[chain[-1]])
        chains[t] = chain[::-1]
    on_paths = sorted({n for c in chains.values() for n in c})
    oriented = {(e.src, e.dst, e.rel) for e in store.triples_among(on_paths, list(set(rels)))}
    out: dict[str, list[Hop]] = {}
    for t, chain in chains.items():
        out[t] = [Hop(a, rel, b) if (a, b, rel) in oriented else Hop(b, rel, a)
                  for (a, b), rel in zip(zip(chain, chain[1:]), rels)]
    return out


def evidence_paths(candidate: Candidate, target: str, max_paths: int = 3,
                   max_hops: int = 4) -> list[list[Hop]]:
    """The shortest paths (at most ``max_paths``, at most ``max_hops`` edges) from any seed of
    S to ``target`` over S's edges, either direction; [] when none (a seed answer gives
    one empty path)."""
    seeds = [n.id for n in candidate.nodes if n.seed] or [s.id for s in candidate.seeds]
    adj: dict[str, list[Hop]] = {}
    for e in candidate.edges:
        hop = Hop(e.src, e.rel, e.dst)
        adj.setdefault(e.src, []).append(hop)
        adj.setdefault(e.dst, []).append(hop)
    if target in seeds:
        return [[]]
    dist = {s: 0 for s in seeds if s in adj}
    parents: dict[str, list[tuple[str, Hop]]] = {}
    queue = deque(dist)
    while queue:
        u = queue.popleft()
        if dist[u] >= max_hops or (target in dist and dist[u] >= dist[target]):
            continue
        for hop in adj.get(u, []):
            v = hop.dst if hop.src == u else hop.src
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
            if dist[v] == dist[u] + 1:
                parents.setdefault(v, []).append((u, hop))
    if target not in dist:
        return []
    paths: list[list[Hop]] = []

    def back(node: str, tail: list[Hop]) -> None:
        if len(paths) >= max_paths:
            return
        if dist[node] == 0:
            paths.append(list(reversed(tail)))
            return
        for prev, hop in parents.get(node, []):
            back(prev, [*tail, hop])

    back(target, [])
    return paths


def path_text(path: Sequence[Hop], names: dict[str, str], target: str) -> str:
    """`Seed —rel→ X ←rel— Answer`: each hop written in the edge's own direction."""
    node = target
    for src, _, dst in reversed(path):  # walk back from the answer to the seed
        node = src if dst == node else dst
    out = [names.get(node, node)]
    for src, rel, dst in path:
        if src == node:
            out.append(f"—{rel}→ {names.get(dst, dst)}")
            node = dst
        else:
            out.append(f"←{rel}— {names.get(src, src)}")
            node = src
    return " ".join(out) + ("" if path else " (a seed)")


def answer_evidence(answer: Answer, store: GraphReader | None = None, max_paths: int = 3,
                    max_answers: int = 20) -> list[Evidence]:
    """Each answer with its KG id and its evidence: with a ``store``, the planned relation
    path that reached it (`Answer.answer_path`, the supporting facts, for the first
    ``max_answers`` answers); else, and for answers the plan did not reach, paths from a seed
    over S's edges."""
    cand = answer.candidate
    names = node_names(answer)
    ids_of = answer_ids(answer)
    planned: dict[str, list[Hop]] = {}
    if store is not None and answer.answer_path and cand.anchors:
        targets = [i for a in answer.answer[:max_answers] for i in ids_of.get(a, [])[:1]]
        planned = planned_hops(store, cand.anchors, answer.answer_path.split(" > "), targets)
        missing = sorted({n for hops in planned.values() for h in hops
                          for n in (h.src, h.dst)} - set(names))
        names.update({e.id: readable_label(e.name) for e in store.entities_by_id(missing)})
    out = []
    for a, ids in ids_of.items():
        ev = Evidence(answer=a, id=ids[0] if ids else None)
        if ev.id in planned:
            hops = planned[ev.id]
            ev.paths.append(EvidencePath(
                hops=hops, text=path_text(hops, names, ev.id), planned=True,
                names={n: names.get(n, n) for h in hops for n in (h.src, h.dst)}))
        for i in ids if not ev.paths else []:
            for p in evidence_paths(cand, i, max_paths - len(ev.paths)):
                ev.paths.append(EvidencePath(hops=p, text=path_text(p, names, i)))
            if len(ev.paths) >= max_paths:
                break
        out.append(ev)
    return out


def evidence_names(answer: Answer, evidence: Sequence[Evidence],
                   store: GraphReader) -> dict[str, Entity]:
    """The entities on evidence paths that S does not hold (drawn beside S)."""
    s_ids = {n.id for n in answer.candidate.nodes}
    ids = sorted({n for e in evidence for p in e.paths for h in p.hops
                  for n in (h.src, h.dst)} - s_ids)
    return {e.id: e for e in store.entities_by_id(ids)}


# --- the store: look-ups, one entity's neighbours, joins ---------------------------------
def evidence_sources(store: Any, evidence: Sequence[Evidence]) -> list[str]:
    """The names of the sources (loads) asserting the answers' evidence edges, sorted
    (`SourceStore.triple_sources`; legacy triples: "legacy"): the Ask page says when an
    answer's evidence comes from several."""
    hops = sorted({(h.src, h.rel, h.dst) for ev in evidence for p in ev.paths for h in p.hops})
    if not hops:
        return []
    ids = {i for v in store.triple_sources(hops).values() for i in v}
    names = {r.id: r.name for r in store.source_records()}
    return sorted(names.get(i, LEGACY_SOURCE_NAME if i == LEGACY_SOURCE_ID else f"source {i}")
                  for i in ids)


def entities_named(store: GraphReader, names: Sequence[str]) -> list[Entity]:
    """The entities named one of ``names`` (exact, case-insensitive)."""
    return store.entities_by_name(list(names))


def find_entities(store: GraphReader, embedder: TextEmbedder | None, text: str, k: int = 10,
                  fuzzy_threshold: float | None = None) -> list[EntityMatch]:
    """Entities for a typed name, each once: exact name; with ``fuzzy_threshold``, the
    entity linking's fuzzy matches by similarity ("tom hanx" lists Tom Hanks first; the
    Ask page's linking); then fulltext and vector matches."""
    text = text.strip()
    if not text:
        return []
    out: dict[str, EntityMatch] = {}
    for e in entities_named(store, [text]):
        out.setdefault(e.id, EntityMatch(entity=e, how="exact name"))
    if fuzzy_threshold is not None:
        for lk in search(store, text, fuzzy_threshold, k):
            if lk.id is not None and lk.id not in out:
                how = {"exact": "exact name", "fuzzy": "fuzzy"}.get(lk.how or "",
                                                                     "similar name")
                out[lk.id] = EntityMatch(entity=Entity(id=lk.id, name=lk.name or lk.id),
                                         how=how, score=round(lk.score, 2))
    try:
        for e in store.search_names(text, k):
            out.setdefault(e.id, EntityMatch(entity=e, how="fulltext"))
    except Exception:  # a fulltext query syntax the engine refuses: vector still answers
        pass
    if embedder is not None:
        vec = embedder.encode([text])[0]
        for s in store.top_entities(vec, k):
            out.setdefault(s.entity.id, EntityMatch(entity=s.entity, how="vector",
                                                    score=round(float(s.score), 3)))
    return list(out.values())


def missing_topics(store: GraphReader, embedder: TextEmbedder | None, topics: Sequence[str],
                   k: int = 5) -> dict[str, list[str]]:
    """Topic entities of the question the KG does not hold (exact, case-insensitive),
    each with the closest names (fulltext, then vector)."""
    missing: dict[str, list[str]] = {}
    for t in topics:
        if entities_named(store, [t]):
            continue
        close = [m.entity.name for m in find_entities(store, embedder, t, k)]
        missing[t] = list(dict.fromkeys(close))[:k]
    return missing


def fill_closest(store: GraphReader, embedder: TextEmbedder | None, answer: Answer) -> None:
    """Give each mention the answer abstained on, and that no name came close to, the KG's
    closest names by fulltext and vector (`missing_topics`), in place."""
    for lk in answer.candidate.links:
        if lk.mention in answer.not_in_kg and not lk.closest:
            lk.closest = missing_topics(store, embedder, [lk.mention]).get(lk.mention, [])


def shared_name_note(link: Any) -> str | None:
    """A mention whose name several KG entities share, in words (all of them anchor)."""
    if not link.shared:
        return None
    ids = [link.id, *link.shared]
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return (f"'{link.name}' names {len(ids)} entities in the KG ({shown}); the answer starts "
            "from all of them")


def link_notes(answer: Answer) -> list[str]:
    """The entity linking in words, one line each: "reading 'Incepton' as Inception" for a
    fuzzy link (with close alternatives), a name several entities share (`shared_name_note`),
    "not in the KG" with the closest names for a
    mention the answer abstained on (the CLI's lines; the UI words them the same)."""
    out = []
    for lk in answer.candidate.links:
        if lk.how == "fuzzy":
            alts = "; ".join(a.name for a in lk.alternatives)
            out.append(f"reading '{lk.mention}' as {lk.name} (similarity {lk.score:.2f})"
                       + (f"; close alternatives: {alts}" if alts else ""))
        note = shared_name_note(lk)
        if note:
            out.append(note)
    for mention in answer.not_in_kg:
        close = next((lk.closest for lk in answer.candidate.links if lk.mention == mention), [])
        out.append(f"not in the KG: '{mention}'"
                   + (f"; closest names: {'; '.join(close)}" if close else ""))
    return out


def one_hop(store: GraphReader, entity_id: str, caps: ExpansionCaps) -> Subgraph:
    """The 1-hop neighbourhood of one entity, within ``caps`` (store.neighbourhood)."""
    return store.neighbourhood([entity_id], 1, caps)


def limit_caps(n: int) -> ExpansionCaps:
    """The caps of an entity's first ``n`` neighbours (by the store's stable key)."""
    return ExpansionCaps(fanout=n, max_nodes=n + 1, max_edges=n)


def expand_step(store: GraphReader, entity_id: str, times: int) -> Subgraph:
    """What the ``times``-th click on a node shows of its neighbours: the first ``times`` x
    `EXPAND_STEP` (chosen by the store's stable key, so each click adds to the last);
    ``truncated``: more remain."""
    return one_hop(store, entity_id, limit_caps(EXPAND_STEP * max(1, times)))


def out_of_candidate_joins(store: GraphReader, answer: Answer) -> list[Hop]:
    """The KG edges joining each grounded out-of-candidate node to S's nodes, sorted."""
    s_ids = {n.id for n in answer.candidate.nodes}
    joins: set[Hop] = set()
    for o in answer.selection.out_of_candidate if answer.selection else []:
        if not (o.grounded and o.id) or o.id in s_ids:
            continue
        sub = store.neighbourhood([o.id], 1, _JOIN_CAPS)
        joins |= {Hop(e.src, e.rel, e.dst) for e in sub.edges
                  if (e.src == o.id and e.dst in s_ids) or (e.dst == o.id and e.src in s_ids)}
    return sorted(joins)


def store_problem(settings: Settings) -> str | None:
    """Why the configured store's data dir is unsafe to open (another user controls it),
    or None: checked before anything opens the store."""
    if settings.store != "embedded":
        return None
    # the embedded server's module imports redis: only the embedded store needs it
    from talent_core.store.falkordb_server import check_data_dir

    try:
        check_data_dir(Path(settings.data_dir))
    except DataDirError as e:
        return str(e)
    return None


# --- export ---------------------------------------------------------------------------------
def evidence_json(answer: Answer, evidence: Sequence[Evidence]) -> list[dict[str, Any]]:
    """Each answer with its id and its paths (hops named and with their ids, and as text):
    the export's `answers` and `talent ask --json`'s `evidence`."""
    names = {n.id: n.name for n in answer.candidate.nodes}
    return [{"answer": e.answer, "id": e.id, "evidence": [
        [{"src": p.names.get(s, names.get(s, s)), "rel": r,
          "dst": p.names.get(d, names.get(d, d)), "src_id": s, "dst_id": d}
         for s, r, d in p.hops] for p in e.paths],
        "evidence_text": [p.text for p in e.paths],
        "planned": [p.planned for p in e.paths]} for e in evidence]


def export_json(answer: Answer, evidence: Sequence[Evidence]) -> str:
    """The answer, its evidence, S, the selection and the timings as one JSON document."""
    names = {n.id: n.name for n in answer.candidate.nodes}
    sel = answer.selection
    data = {
        "question": answer.question,
        "method": answer.candidate.method,
        "decode": answer.decode,
        "answers": evidence_json(answer, evidence),
        "seeds": [s.model_dump() for s in answer.candidate.seeds],
        "selected": [{"id": n.id, "name": n.name} for n in sel.selected] if sel else [],
        "out_of_candidate": [o.model_dump() for o in sel.out_of_candidate] if sel else [],
        "candidate": {"nodes": [n.model_dump() for n in answer.candidate.nodes],
                      "edges": [e.model_dump() for e in answer.candidate.edges]},
        "generator_edges": [{"src": names.get(e.src, e.src), "rel": e.rel,
                             "dst": names.get(e.dst, e.dst)} for e in answer.edges],
        "ranked": [r.model_dump() for r in answer.ranked],
        "plan": [p.model_dump() for p in answer.plan],
        "frozen": answer.frozen,
        "timings_ms": answer.timings_ms,
    }
    return json.dumps(data, ensure_ascii=False, indent=1)


def export_csv(answer: Answer, evidence: Sequence[Evidence]) -> str:
    """One row per hop of each evidence path (an answer without a path: one row)."""
    names = {n.id: n.name for n in answer.candidate.nodes}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["question", "answer", "answer_id", "path", "step", "src", "rel", "dst"])
    for e in evidence:
        if not e.paths:
            w.writerow([answer.question, e.answer, e.id or "", "", "", "", "", ""])
        for i, p in enumerate(e.paths, 1):
            for j, (s, r, d) in enumerate(p.hops or [("", "", "")], 1):
                w.writerow([answer.question, e.answer, e.id or "", i, j,
                            p.names.get(s, names.get(s, s)), r,
                            p.names.get(d, names.get(d, d))])
    return buf.getvalue()


def candidate_json(candidate: Candidate) -> dict[str, Any]:
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


def selection_json(sel: Selection | None) -> dict[str, Any]:
    """The LLM retriever's selection as the answer document holds it (and the SSE
    ``selection`` event sends it as soon as the retriever is done)."""
    return {"selected": [{"id": n.id, "name": n.name} for n in sel.selected] if sel else [],
            "out_of_candidate": [o.model_dump() for o in sel.out_of_candidate] if sel else [],
            "retriever_ranked": [r.model_dump() for r in sel.ranked] if sel else []}


def plan_json(paths: Sequence[PlannedPath], planner: str | None, confidence: float | None,
              runner_up: PlannedPath | None, joint: Sequence[str],
              answered: str | None = None) -> dict[str, Any]:
    """The relation-path plan as the answer document holds it (and the SSE ``plan`` event
    sends it as soon as the plan is made; ``answered``: the answer's path, once known)."""
    return {"plan": [p.model_dump() for p in paths], "planner": planner,
            "plan_confidence": confidence,
            "plan_runner_up": runner_up.model_dump() if runner_up else None,
            "plan_notice": plan_notice(paths, confidence, runner_up, answered),
            "plan_joint": list(joint)}


def reading_json(reading: Reading | None) -> dict[str, Any] | None:
    """A follow-up's reading with the line the UI and CLI show for it."""
    return None if reading is None else {**reading.model_dump(), "text": reading.text}


def answer_json(ans: Answer, evidence: Sequence[Evidence] | None = None) -> dict[str, Any]:
    """The `talent ask --json` shape; `evidence` (default: paths over S only) is the UI
    export's `answers` (the same paths, in the same order, as the Ask page shows)."""
    names = {n.id: n.name for n in ans.candidate.nodes}
    sel = ans.selection
    return {
        "question": ans.question,
        "answer": ans.answer,
        "raw": ans.raw,
        "method": ans.candidate.method,
        "candidate": [{"id": n.id, "name": n.name, "prize": n.prize, "seed": n.seed}
                      for n in ans.candidate.nodes],
        **selection_json(sel),
        "edges": [{"src": names.get(e.src, e.src), "rel": e.rel, "dst": names.get(e.dst, e.dst)}
                  for e in ans.edges],
        "decode": ans.decode,
        "ranked": [r.model_dump() for r in ans.ranked],
        "frozen": ans.frozen,
        "generator": ans.generator,
        **plan_json(ans.plan, ans.planner, ans.plan_confidence, ans.plan_runner_up,
                    ans.plan_joint, ans.answer_path),
        "answer_path": ans.answer_path,
        "links": [lk.model_dump() for lk in ans.candidate.links],
        "reading": reading_json(ans.candidate.reading),
        # what a follow-up sends back as the last turn of its ``history``
        "turn": turn_of(ans).model_dump(),
        "not_in_kg": ans.not_in_kg,
        # a count / filter / superlative / comparison / yes-no: typed answer, the set it
        # read, the store queries and their parameters
        "operation": ans.operation.model_dump() if ans.operation else None,
        # which language models answered: backend ("local" / "openai"), model per role,
        # how names were ranked
        "backend": ans.models.model_dump() if ans.models else None,
        "evidence": evidence_json(ans, answer_evidence(ans) if evidence is None else evidence),
        "timings_ms": ans.timings_ms,
    }
