"""What the pages draw of the KG, kept out of Streamlit so that it is tested directly: node
roles, the graph component's elements (opaque ids, KG text as it is) and the nodes and edges
drawn beyond S. The data (evidence paths, neighbours, look-ups, export) comes from
`talent_core.explore`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from talent_core.explore import (
    Evidence,
    GraphReader,
    answer_ids,
    expand_step,
    node_names,
    readable_label,
)
from talent_core.models import Answer, Entity, Subgraph

# --- roles --------------------------------------------------------------------------------
# (role, colour, legend text), in legend order; a node takes the first role that fits
ROLES: list[tuple[str, str, str]] = [
    ("answer", "#ff7f0e", "answer"),
    ("seed", "#1f77b4", "seed (where retrieval started)"),
    ("selected", "#2ca02c", "selected by the LLM retriever"),
    ("candidate", "#9e9e9e", "candidate subgraph S"),
    ("grounded", "#9467bd", "named outside S, found in the KG"),
    ("missing", "#d62728", "named outside S, NOT in the KG"),
    ("path", "#f5c38f", "on an answer's planned path, outside S"),
    ("expanded", "#c9b38a", "neighbour added by a click"),
]
ROLE_COLOUR = {r: c for r, c, _ in ROLES}
# Explore's words for the roles it draws (it retrieves nothing: its centre is no "seed")
EXPLORE_LEGEND = {"seed": "the entity you opened", "candidate": "its neighbours",
                  "expanded": "neighbour added by a double-click",
                  "S": "an edge of the KG"}  # an edge group: its panel's words
EDGE_GROUPS: list[tuple[str, str]] = [("S", "#b0b0b0"), ("EVIDENCE", "#ff7f0e"),
                                      ("JOIN", "#9467bd"), ("EXPANDED", "#c9b38a")]


class ComponentIds:
    """Opaque ids for the graph component (nodes ``n0``, ``n1``, ..., edges ``e0``, ...) and
    the KG ids they stand for: a KG id is never a Cytoscape id or selector (any text may be
    one), and a clicked node maps back to its KG id. A node keeps its id for the
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


# --- the graph component's elements ---------------------------------------------------------
@dataclass
class Extra:
    """Nodes and edges drawn beyond S: out-of-candidate joins and click expansions."""

    nodes: dict[str, Entity] = field(default_factory=dict)
    edges: set[tuple[str, str, str]] = field(default_factory=set)
    expanded: list[str] = field(default_factory=list)  # ids expanded, in order

    def expand(self, store: GraphReader, node: str, drawn: set[str]) -> str:
        """A click on ``node``: its next `EXPAND_STEP` neighbours from the store, and the
        line that tells the analyst what changed: how many neighbours were added to the
        drawing (``drawn``: the page's own nodes; those of earlier clicks count as drawn
        too), and whether it has more."""
        shown = drawn | set(self.nodes)
        self.expanded.append(node)
        sub = expand_step(store, node, self.expanded.count(node))
        self.add(sub)
        new = len(set(self.nodes) - shown)
        return ((f"{new} neighbour(s) added around the node you opened" if new else
                 "every neighbour of the node you opened is drawn already")
                + ("; double-click it again for more" if sub.truncated else ""))

    def add(self, sub: Subgraph) -> None:
        for n in sub.nodes:
            self.nodes.setdefault(n.id, n)
        self.edges |= {(e.src, e.rel, e.dst) for e in sub.edges}


def roles(answer: Answer) -> dict[str, str]:
    """KG id (or `missing:<name>`) -> role, for S and the out-of-candidate names."""
    out: dict[str, str] = {}
    ans = {i for ids in answer_ids(answer).values() for i in ids}
    selected = {n.id for n in answer.selection.selected} if answer.selection else set()
    # seeds drawn: what the question's mentions linked to (not a tag that shares the name,
    # nor a vector look-alike); without linking, where the expansion started
    cand = answer.candidate
    linked = ({lk.id for lk in cand.links if lk.id} or set(cand.anchors)
              or {n.id for n in cand.nodes if n.seed})
    for n in cand.nodes:
        out[n.id] = ("answer" if n.id in ans else "seed" if n.id in linked else
                     "selected" if n.id in selected else "candidate")
    for o in answer.selection.out_of_candidate if answer.selection else []:
        if o.grounded and o.id:
            out.setdefault(o.id, "answer" if o.id in ans else "grounded")
        else:
            out[f"missing:{o.name}"] = "missing"
    for i in sorted(ans - out.keys()):  # reached past S (a planned path's end)
        out[i] = "answer"
    return out


def elements(answer: Answer, extra: Extra | None = None,
             evidence: Sequence[Evidence] = (), ids: ComponentIds | None = None
             ) -> dict[str, Any]:
    """`{"nodes": [...], "edges": [...]}` for the graph component: ids from ``ids`` (opaque),
    `role` (its colour), `name` the caption, `kg_id` (empty for a name not in the KG),
    `expandable`; edges `group` (S, EVIDENCE, JOIN, EXPANDED) and `rel`. KG text as it is:
    the component sets it as text, never as HTML."""
    extra = extra or Extra()
    ids = ids if ids is not None else ComponentIds()
    role = roles(answer)
    names = node_names(answer)
    oc = {o.id: o for o in (answer.selection.out_of_candidate if answer.selection else [])
          if o.id}
    ev_edges = {h for e in evidence for p in e.paths for h in p.hops}
    nodes: list[dict[str, Any]] = []
    seen: set[tuple[str, bool]] = set()  # (KG id, True) or (missing name, False)

    def node(nid: str, name: str, r: str, in_kg: bool = True) -> None:
        if (nid, in_kg) in seen:
            return
        seen.add((nid, in_kg))
        nodes.append({"data": {"id": ids.node(nid, in_kg), "name": name, "role": r,
                               "kg_id": nid if in_kg else "", "expandable": in_kg}})

    for n in answer.candidate.nodes:
        node(n.id, names.get(n.id, n.name), role[n.id])
    for nid, r in role.items():
        if nid.startswith("missing:"):
            name = nid.removeprefix("missing:")
            node(name, name + " (not in KG)", r, in_kg=False)
        elif (nid, True) not in seen:
            o = oc.get(nid)
            name = ((o.kg_name or o.name) if o else extra.nodes[nid].name if nid in extra.nodes
                    else nid)
            node(nid, name, r)
    extra_rels: dict[str, list[str]] = {}
    for s, rel, d in extra.edges:
        extra_rels.setdefault(s, []).append(rel)
        extra_rels.setdefault(d, []).append(rel)
    on_paths = {n for h in ev_edges for n in (h[0], h[2])}
    for nid, ent in extra.nodes.items():
        node(nid, readable_label(ent.name, extra_rels.get(nid, ())),
             "path" if nid in on_paths else "expanded")
    edges: list[dict[str, Any]] = []
    keys: set[tuple[str, str, str]] = set()

    def edge(s: str, rel: str, d: str, group: str) -> None:
        if (s, rel, d) in keys or (s, True) not in seen or (d, True) not in seen:
            return
        keys.add((s, rel, d))
        edges.append({"data": {"id": ids.edge(s, rel, d), "source": ids.node(s),
                               "target": ids.node(d), "group": group, "rel": rel}})

    for e in answer.candidate.edges:
        edge(e.src, e.rel, e.dst, "EVIDENCE" if (e.src, e.rel, e.dst) in ev_edges else "S")
    s_ids = {n.id for n in answer.candidate.nodes}
    for s, rel, d in sorted(extra.edges):
        join = (s in oc and d in s_ids) or (d in oc and s in s_ids)
        edge(s, rel, d, "EVIDENCE" if (s, rel, d) in ev_edges else
             "JOIN" if join else "EXPANDED")
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
    out_nodes = [{"data": {"id": ids.node(k), "role": r, "kg_id": k, "expandable": True,
                           "name": readable_label(name, inc.get(k, ()))}}
                 for k, (name, r) in nodes.items()]
    out_edges, seen = [], set()
    for s, rel, d in edges:
        if (s, rel, d) in seen or s not in nodes or d not in nodes:
            continue
        seen.add((s, rel, d))
        out_edges.append({"data": {"id": ids.edge(s, rel, d), "source": ids.node(s),
                                   "target": ids.node(d), "group": "S", "rel": rel}})
    return {"nodes": out_nodes, "edges": out_edges}


# --- layout: the evidence read left to right ---------------------------------------------

COLUMN_GAP = 240.0  # layout units between BFS columns (room for a caption)
ROW_GAP = 56.0  # between the nodes of one column
ASPECT = 1.5  # width / height the layout aims at: the Ask column at the default height
ROLE_ORDER = {"answer": 0, "path": 1, "selected": 2, "grounded": 3, "seed": 4,
              "candidate": 5, "expanded": 6, "missing": 7}


def layered(elements: dict[str, Any], aspect: float = ASPECT, height_px: float = 680.0,
            label_px: float = 13.0) -> tuple[dict[str, Any], float]:
    """(``elements`` with a preset `position` per node, caption font in layout units).

    Columns by hop distance from the seeds (breadth-first over the edges, direction
    ignored; a part no seed reaches starts from its best-connected node), so an answer's
    evidence reads left to right; nodes in a column follow their neighbours in the column
    before (fewer crossings); a tall column wraps into sub-columns, the row count chosen so
    the drawing is about ``aspect`` wide per unit of height and fills the component. The
    font is what renders at ``label_px`` once the drawing is fitted to ``height_px``.
    Why: Cytoscape's force layouts drew the usual star of answers as a tall blob in the
    middle third of the column, with 4-7 px captions."""
    nodes = elements.get("nodes", [])
    if not nodes:
        return elements, label_px
    ids = [n["data"]["id"] for n in nodes]
    role = {n["data"]["id"]: n["data"].get("role", "candidate") for n in nodes}
    name = {n["data"]["id"]: str(n["data"].get("name", "")) for n in nodes}
    adj: dict[str, set[str]] = {i: set() for i in ids}
    for e in elements.get("edges", []):
        s, d = e["data"]["source"], e["data"]["target"]
        if s in adj and d in adj and s != d:
            adj[s].add(d)
            adj[d].add(s)
    depth: dict[str, int] = {}
    frontier = [i for i in ids if role[i] == "seed"]
    while len(depth) < len(ids):
        if not frontier:  # a part no seed reaches: from its best-connected node
            rest = [i for i in ids if i not in depth]
            frontier = [max(rest, key=lambda i: (len(adj[i]), -ids.index(i)))]
        for i in frontier:
            depth.setdefault(i, 0)
        while frontier:
            nxt = []
            for i in frontier:
                for j in sorted(adj[i], key=ids.index):
                    if j not in depth:
                        depth[j] = depth[i] + 1
                        nxt.append(j)
            frontier = nxt
    columns: list[list[str]] = [[] for _ in range(max(depth.values()) + 1)]
    for i in ids:
        columns[depth[i]].append(i)
    rank: dict[str, float] = {}
    for col in columns:
        def key(i: str) -> tuple[float, int, str]:
            before = [rank[j] for j in adj[i] if j in rank and depth[j] < depth[i]]
            return (sum(before) / len(before) if before else 0.0,
                    ROLE_ORDER.get(role[i], 9), name[i].lower())
        col.sort(key=key)
        for r, i in enumerate(col):
            rank[i] = r / max(len(col), 1)

    def extent(rows: int) -> tuple[float, float]:
        subs = sum(math.ceil(len(c) / rows) for c in columns)
        return subs * COLUMN_GAP, rows * ROW_GAP

    tallest = max(len(c) for c in columns)
    rows = min(range(1, tallest + 1),
               key=lambda r: abs(math.log(max(extent(r)[0], 1) / extent(r)[1] / aspect)))
    x = 0.0
    out = []
    pos: dict[str, dict[str, float]] = {}
    for col in columns:
        subs = math.ceil(len(col) / rows)
        per = math.ceil(len(col) / subs)
        for k, i in enumerate(col):
            sub, r = divmod(k, per)
            top = (rows - min(per, len(col) - sub * per)) / 2  # centre a short column
            pos[i] = {"x": x + sub * COLUMN_GAP, "y": (top + r) * ROW_GAP}
        x += subs * COLUMN_GAP
    for n in nodes:
        out.append({**n, "position": pos[n["data"]["id"]]})
    width, height = extent(rows)
    zoom = min(height_px / max(height, ROW_GAP), height_px * aspect / max(width, COLUMN_GAP))
    return {**elements, "nodes": out, "edges": captioned(elements.get("edges", []))}, \
        label_px / zoom


def captioned(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``edges`` with the caption the graph draws (`caption`): the relation name, drawn once
    for a fan of edges with one end and one relation in common (a star of 32
    `starred_actors` edges gets one caption, in its middle), so captions do not pile up."""
    fans: dict[tuple[str, str], list[int]] = {}
    for k, e in enumerate(edges):
        d = e["data"]
        for end in (d["source"], d["target"]):
            fans.setdefault((end, str(d.get("rel", ""))), []).append(k)
    quiet = set()
    for members in fans.values():
        if len(members) > 2:
            quiet.update(m for m in members if m != members[len(members) // 2])
    return [{**e, "data": {**e["data"], "caption": "" if k in quiet else e["data"].get("rel", "")}}
            for k, e in enumerate(edges)]
