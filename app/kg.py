"""What the pages show of the KG, kept out of Streamlit so that it is tested directly:
node roles and the graph component's elements, readable labels for Freebase CVT nodes,
evidence paths from a seed to each answer over S's edges, the answer's export (JSON, CSV),
entity look-ups for the "not in the KG" notice, and one-entity neighbourhoods for Explore
and for a node click.

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
from dataclasses import dataclass, field
from typing import Any

from talent_core.models import Answer, Candidate, Entity, Subgraph
from talent_core.store.base import ExpansionCaps, GraphReader

# --- roles --------------------------------------------------------------------------------
# (role, colour, legend text), in legend order; a node takes the first role that fits
ROLES: list[tuple[str, str, str]] = [
    ("answer", "#ff7f0e", "answer"),
    ("seed", "#1f77b4", "seed (where retrieval started)"),
    ("selected", "#2ca02c", "selected by the LLM retriever"),
    ("candidate", "#9e9e9e", "candidate subgraph S"),
    ("grounded", "#9467bd", "named outside S, found in the KG"),
    ("missing", "#d62728", "named outside S, NOT in the KG"),
    ("expanded", "#c9b38a", "neighbour added by a click"),
]
ROLE_COLOUR = {r: c for r, c, _ in ROLES}
EDGE_GROUPS: list[tuple[str, str]] = [("S", "#b0b0b0"), ("EVIDENCE", "#ff7f0e"),
                                      ("JOIN", "#9467bd"), ("EXPANDED", "#c9b38a")]

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


def component_text(text: str) -> str:
    """KG text as the graph component may show it. Its info panel (st-link-analysis 0.4.0)
    writes every data field but ``label`` into a ``<p>`` with innerHTML, and Cytoscape draws
    the same field as canvas text: so no HTML escaping (the caption would show ``&lt;``) but
    look-alikes for ``<`` and ``>`` (no tag can open), and a zero-width space after ``&``
    (no character reference can start: ``&lt;b&gt;`` shows as itself, not as ``<b>``).
    Quotes stay: no field lands in an attribute."""
    return str(text).replace("&", "&\u200b").replace("<", "‹").replace(">", "›")


class ComponentIds:
    """Opaque ids for the graph component (nodes ``n0``, ``n1``, ..., edges ``e0``, ...) and
    the KG ids they stand for: a KG id never reaches the component's page (it writes node
    data as HTML), and a clicked node maps back to its KG id. A node keeps its id for the
    life of the map (the component adds an expansion's elements to those it holds, by id),
    so the pages keep one map per graph in the session."""

    def __init__(self) -> None:
        self._nodes: dict[tuple[str, str], str] = {}  # ("kg", id) / ("missing", name) -> nK
        self._back: dict[str, str | None] = {}  # nK -> KG id; None: a name not in the KG
        self._edges: dict[tuple[str, str, str], str] = {}  # (src, rel, dst) KG ids -> eK

    def node(self, kg_id: str, in_kg: bool = True) -> str:
        """The opaque id of a KG node (``in_kg=False``: of a name the KG lacks)."""
        key = ("kg" if in_kg else "missing", kg_id)
        if key not in self._nodes:
            self._nodes[key] = f"n{len(self._nodes)}"
            self._back[self._nodes[key]] = kg_id if in_kg else None
        return self._nodes[key]

    def edge(self, src: str, rel: str, dst: str) -> str:
        """The opaque id of the KG edge (src, rel, dst)."""
        return self._edges.setdefault((src, rel, dst), f"e{len(self._edges)}")

    def kg_id(self, opaque: object) -> str | None:
        """The KG id behind a component id; None for an unknown id or a name not in the KG."""
        return self._back.get(opaque) if isinstance(opaque, str) else None


# --- evidence paths -----------------------------------------------------------------------
Hop = tuple[str, str, str]  # (src id, rel, dst id) as stored: the edge's own direction


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
    out: dict[str, list[str]] = {}
    for a in answer.answer:
        out[a] = [ranked[a]] if a in ranked else by_name.get(a.lower(), [])
    return out


def evidence_paths(candidate: Candidate, target: str, max_paths: int = 3,
                   max_hops: int = 4) -> list[list[Hop]]:
    """The shortest paths (at most ``max_paths``, at most ``max_hops`` edges) from any seed of
    S to ``target`` over S's edges, either direction; [] when none (a seed answer gives
    one empty path)."""
    seeds = [n.id for n in candidate.nodes if n.seed] or [s.id for s in candidate.seeds]
    adj: dict[str, list[Hop]] = {}
    for e in candidate.edges:
        hop = (e.src, e.rel, e.dst)
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
            v = hop[2] if hop[0] == u else hop[0]
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


@dataclass
class Evidence:
    answer: str
    id: str | None
    paths: list[list[Hop]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)


def answer_evidence(answer: Answer, max_paths: int = 3) -> list[Evidence]:
    """Each answer with its KG id and its evidence paths from a seed over S's edges."""
    cand = answer.candidate
    names = node_names(answer)
    out = []
    for a, ids in answer_ids(answer).items():
        ev = Evidence(a, ids[0] if ids else None)
        for i in ids:
            for p in evidence_paths(cand, i, max_paths - len(ev.paths)):
                ev.paths.append(p)
                ev.text.append(path_text(p, names, i))
            if len(ev.paths) >= max_paths:
                break
        out.append(ev)
    return out


def node_names(answer: Answer) -> dict[str, str]:
    """KG id -> readable label (CVT nodes named by their relations' type)."""
    rels: dict[str, list[str]] = {}
    for e in answer.candidate.edges:
        rels.setdefault(e.src, []).append(e.rel)
        rels.setdefault(e.dst, []).append(e.rel)
    return {n.id: readable_label(n.name, rels.get(n.id, ())) for n in answer.candidate.nodes}


# --- the graph component's elements ---------------------------------------------------------
@dataclass
class Extra:
    """Nodes and edges drawn beyond S: out-of-candidate joins and click expansions."""

    nodes: dict[str, Entity] = field(default_factory=dict)
    edges: set[tuple[str, str, str]] = field(default_factory=set)
    expanded: list[str] = field(default_factory=list)  # ids expanded, in order

    def add(self, sub: Subgraph) -> int:
        before = len(self.nodes) + len(self.edges)
        for n in sub.nodes:
            self.nodes.setdefault(n.id, n)
        self.edges |= {(e.src, e.rel, e.dst) for e in sub.edges}
        return len(self.nodes) + len(self.edges) - before


def roles(answer: Answer) -> dict[str, str]:
    """KG id (or `missing:<name>`) -> role, for S and the out-of-candidate names."""
    out: dict[str, str] = {}
    ans = {i for ids in answer_ids(answer).values() for i in ids}
    selected = {n.id for n in answer.selection.selected} if answer.selection else set()
    for n in answer.candidate.nodes:
        out[n.id] = ("answer" if n.id in ans else "seed" if n.seed else
                     "selected" if n.id in selected else "candidate")
    for o in answer.selection.out_of_candidate if answer.selection else []:
        if o.grounded and o.id:
            out.setdefault(o.id, "answer" if o.id in ans else "grounded")
        else:
            out[f"missing:{o.name}"] = "missing"
    return out


def elements(answer: Answer, extra: Extra | None = None,
             evidence: Sequence[Evidence] = (), ids: ComponentIds | None = None
             ) -> dict[str, Any]:
    """`{"nodes": [...], "edges": [...]}` for st_link_analysis: ids from ``ids`` (opaque),
    `label` the role (its colour), `name` the caption; every KG text through
    `component_text`."""
    extra = extra or Extra()
    ids = ids if ids is not None else ComponentIds()
    role = roles(answer)
    names = node_names(answer)
    oc = {o.id: o for o in (answer.selection.out_of_candidate if answer.selection else [])
          if o.id}
    ev_edges = {h for e in evidence for p in e.paths for h in p}
    nodes: list[dict[str, Any]] = []
    seen: set[tuple[str, bool]] = set()  # (KG id, True) or (missing name, False)

    def node(nid: str, name: str, r: str, in_kg: bool = True) -> None:
        if (nid, in_kg) in seen:
            return
        seen.add((nid, in_kg))
        nodes.append({"data": {"id": ids.node(nid, in_kg), "label": r,
                               "name": component_text(name), "role": r,
                               "kg_id": component_text(nid if in_kg else "(not in the KG)")}})

    for n in answer.candidate.nodes:
        node(n.id, names.get(n.id, n.name), role[n.id])
    for nid, r in role.items():
        if nid.startswith("missing:"):
            name = nid.removeprefix("missing:")
            node(name, name + " (not in KG)", r, in_kg=False)
        elif (nid, True) not in seen:
            o = oc.get(nid)
            node(nid, (o.kg_name or o.name) if o else nid, r)
    extra_rels: dict[str, list[str]] = {}
    for s, rel, d in extra.edges:
        extra_rels.setdefault(s, []).append(rel)
        extra_rels.setdefault(d, []).append(rel)
    for nid, ent in extra.nodes.items():
        node(nid, readable_label(ent.name, extra_rels.get(nid, ())), "expanded")
    edges: list[dict[str, Any]] = []
    keys: set[tuple[str, str, str]] = set()

    def edge(s: str, rel: str, d: str, group: str) -> None:
        if (s, rel, d) in keys or (s, True) not in seen or (d, True) not in seen:
            return
        keys.add((s, rel, d))
        edges.append({"data": {"id": ids.edge(s, rel, d), "source": ids.node(s),
                               "target": ids.node(d), "label": group,
                               "rel": component_text(rel)}})

    for e in answer.candidate.edges:
        edge(e.src, e.rel, e.dst, "EVIDENCE" if (e.src, e.rel, e.dst) in ev_edges else "S")
    s_ids = {n.id for n in answer.candidate.nodes}
    for s, rel, d in sorted(extra.edges):
        join = (s in oc and d in s_ids) or (d in oc and s in s_ids)
        edge(s, rel, d, "JOIN" if join else "EXPANDED")
    return {"nodes": nodes, "edges": edges}


def neighbourhood_elements(centre: Entity, sub: Subgraph, rels: set[str] | None = None,
                           extra: Extra | None = None, ids: ComponentIds | None = None
                           ) -> dict[str, Any]:
    """Explore's graph: ``centre`` (role seed), its neighbours (candidate) and the nodes
    added by clicks (expanded); edges filtered to ``rels`` when given; ids from ``ids``."""
    ids = ids if ids is not None else ComponentIds()
    nodes: dict[str, tuple[str, str]] = {centre.id: (centre.name, "seed")}
    edges = [(e.src, e.rel, e.dst) for e in sub.edges]
    for n in sub.nodes:
        nodes.setdefault(n.id, (n.name, "candidate"))
    if extra:
        for n in extra.nodes.values():
            nodes.setdefault(n.id, (n.name, "expanded"))
        edges += sorted(extra.edges)
    if rels is not None:
        edges = [e for e in edges if e[1] in rels]
        keep = {centre.id} | {e[0] for e in edges} | {e[2] for e in edges}
        nodes = {k: v for k, v in nodes.items() if k in keep}
    inc: dict[str, list[str]] = {}
    for s, rel, d in edges:
        inc.setdefault(s, []).append(rel)
        inc.setdefault(d, []).append(rel)
    out_nodes = [{"data": {"id": ids.node(k), "label": r, "role": r,
                           "kg_id": component_text(k),
                           "name": component_text(readable_label(name, inc.get(k, ())))}}
                 for k, (name, r) in nodes.items()]
    out_edges, seen = [], set()
    for s, rel, d in edges:
        if (s, rel, d) in seen or s not in nodes or d not in nodes:
            continue
        seen.add((s, rel, d))
        out_edges.append({"data": {"id": ids.edge(s, rel, d), "source": ids.node(s),
                                   "target": ids.node(d), "label": "S",
                                   "rel": component_text(rel)}})
    return {"nodes": out_nodes, "edges": out_edges}


# --- the store: one entity's neighbourhood, look-ups ----------------------------------------
EXPAND_CAPS = ExpansionCaps(fanout=30, max_nodes=60, max_edges=120)


def one_hop(store: GraphReader, entity_id: str,
            caps: ExpansionCaps = EXPAND_CAPS) -> Subgraph:
    """The 1-hop neighbourhood of one entity, within ``caps`` (store.neighbourhood)."""
    return store.neighbourhood([entity_id], 1, caps)


def join_out_of_candidate(store: GraphReader, answer: Answer, extra: Extra) -> None:
    """Draw each grounded out-of-candidate node joined to its KG neighbours in S."""
    s_ids = {n.id for n in answer.candidate.nodes}
    for o in answer.selection.out_of_candidate if answer.selection else []:
        if not (o.grounded and o.id) or o.id in s_ids:
            continue
        sub = store.neighbourhood([o.id], 1, ExpansionCaps(fanout=500, max_nodes=501,
                                                             max_edges=500))
        extra.edges |= {(e.src, e.rel, e.dst) for e in sub.edges
                        if (e.src == o.id and e.dst in s_ids) or (e.dst == o.id and
                                                                   e.src in s_ids)}


def find_entities(store: GraphReader, embedder: Any, text: str, k: int = 10
                  ) -> list[tuple[Entity, str, float | None]]:
    """Entities for a typed name: exact name, fulltext and vector matches, each once, as
    (entity, how it was found, cosine score for vector matches)."""
    text = text.strip()
    if not text:
        return []
    out: dict[str, tuple[Entity, str, float | None]] = {}
    for e in store.entities_by_name([text]):
        out.setdefault(e.id, (e, "exact name", None))
    try:
        for e in store.search_names(text, k):
            out.setdefault(e.id, (e, "fulltext", None))
    except Exception:  # a fulltext query syntax the engine refuses: vector still answers
        pass
    if embedder is not None:
        vec = embedder.encode([text])[0]
        for s in store.top_entities(vec, k):
            out.setdefault(s.entity.id, (s.entity, "vector", round(float(s.score), 3)))
    return list(out.values())


def missing_topics(store: GraphReader, embedder: Any, topics: Sequence[str], k: int = 5
                   ) -> dict[str, list[str]]:
    """Topic entities of the question the KG does not hold (exact, case-insensitive),
    each with the closest names (fulltext, then vector)."""
    missing: dict[str, list[str]] = {}
    for t in topics:
        if store.entities_by_name([t]):
            continue
        close = [e.name for e, _, _ in find_entities(store, embedder, t, k)]
        missing[t] = list(dict.fromkeys(close))[:k]
    return missing


# --- export ---------------------------------------------------------------------------------
def export_json(answer: Answer, evidence: Sequence[Evidence]) -> str:
    names = {n.id: n.name for n in answer.candidate.nodes}
    sel = answer.selection
    data = {
        "question": answer.question,
        "method": answer.candidate.method,
        "decode": answer.decode,
        "answers": [{"answer": e.answer, "id": e.id, "evidence": [
            [{"src": names.get(s, s), "rel": r, "dst": names.get(d, d), "src_id": s,
              "dst_id": d} for s, r, d in p] for p in e.paths], "evidence_text": e.text}
            for e in evidence],
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
            for j, (s, r, d) in enumerate(p or [("", "", "")], 1):
                w.writerow([answer.question, e.answer, e.id or "", i, j,
                            names.get(s, s), r, names.get(d, d)])
    return buf.getvalue()
