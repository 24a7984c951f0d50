"""What the models see of a graph: S for the retriever, (V-hat, E-hat) for the generator.
Pure. The CSV itself is `talent_core.llm.textualise.graph_csv` (Appendix E format).

* Local ids and names: `textualise.local_ids` (nodes numbered in the order of
  ``candidate.nodes``, names lowercase, nodes with equal names merged into one row). Ids are
  those of the full S even when a view is truncated, so the untruncated retriever view is
  exactly ``textualise(candidate)``. Out-of-S nodes named by the retriever are ``na1``,
  ``na2``, ... (the paper's E.2 convention).
* Generator context (eq. 14): the selected nodes of S, then the out-of-S names as isolated
  ``na`` nodes, then E-hat = every edge of S with at least one endpoint selected. The other
  endpoint of such an edge is not listed as a node unless ``include_endpoints`` (the paper's
  E.2 example does not list it); the context need not be connected.
* ``"paths"`` prompt style (a deviation from eq. 14's rows, see `anchor_paths`): each listed
  node is written as the relation path(s) of S that lead to it from the question's anchor
  entities, ending with its name, e.g. ``insomnia -starred_actors-> al pacino
  <-starred_actors- heat``. A causal model reads the whole path before the name it scores.

Truncation policy (prompt longer than the model's budget): rows of the graph are dropped,
never the question, the instructions or a training target.
* S (retriever prompt, no-retriever generator): nodes are ranked seeds first, then by prize,
  then by their order in S; the longest prefix of that ranking that fits is kept, with the
  edges among kept nodes. For training the target is built from the kept nodes only, so the
  model is never taught to name a node it was not shown. Gold answers get no protection
  (inference cannot know them either).
* Generator context: edges are dropped first (lowest prize first), then selected nodes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from talent_core.llm.graph_prompt import GraphInput
from talent_core.llm.parsing import clean_name
from talent_core.llm.textualise import graph_csv, graph_csv_named
from talent_core.llm.textualise import local_ids as _textualise_ids
from talent_core.models import Candidate, CandidateEdge, CandidateNode, Selection

T = TypeVar("T")


@dataclass(frozen=True)
class GraphView:
    """Rows shown to a model, with the KG objects they came from."""

    nodes: list[tuple[str, str]] = field(default_factory=list)  # (local id, lowercase name)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (local src, rel, dst)
    kg_nodes: list[CandidateNode] = field(default_factory=list)  # S nodes among `nodes`
    kg_edges: list[CandidateEdge] = field(default_factory=list)  # S edges among `edges`
    extra_names: list[str] = field(default_factory=list)  # out-of-S (na) names
    dropped_nodes: int = 0  # rows removed to fit the budget
    dropped_edges: int = 0
    names: dict[str, str] = field(default_factory=dict)  # every local id of S -> its name
    graph: GraphInput | None = None  # the untruncated graph, for a graph-prompt generator
    # with a text budget (rows cut on purpose): the KG nodes of the UNTRUNCATED context, the
    # names ranked decoding chooses the answer from (None: `kg_nodes`)
    answer_nodes: list[CandidateNode] | None = None
    # the S the view was cut from: only the "paths" style reads it (`paths`)
    candidate: Candidate | None = field(default=None, repr=False, compare=False)

    @cached_property
    def paths(self) -> dict[str, list[str]]:
        """local id -> the anchor paths of S that end at it (`anchor_paths`), computed when
        the "paths" style first asks, not for every view."""
        if self.candidate is None:
            return {}
        ids, names = local_ids(self.candidate)
        return anchor_paths(self.candidate, names, ids)

    def csv(self) -> str:
        return graph_csv(self.nodes, self.edges)

    def text(self, style: str = "paper") -> str:
        """The graph block of a prompt: Appendix E's id CSV; for the ``"named"`` style the
        same tables with every id replaced by its name (`graph_csv_named`); for ``"paths"``
        one line per anchor path of each listed node (a node no path reaches, or an
        out-of-S name: its name alone)."""
        if style == "paths":
            lines = [p for local, name in self.nodes for p in self.paths.get(local) or [name]]
            return "<DESC>\n" + "".join(f"{line}\n" for line in lines) + "</DESC>"
        if style != "named":
            return self.csv()
        names = {**self.names, **dict(self.nodes)}
        return graph_csv_named([name for _, name in self.nodes],
                               [(names[s], rel, names[d]) for s, rel, d in self.edges])


def local_ids(candidate: Candidate) -> tuple[dict[str, str], dict[str, str]]:
    """(KG id -> local id, local id -> lowercase name) as `textualise` numbers them."""
    rows, id_map = _textualise_ids(candidate, lowercase=True)
    return {k: str(v) for k, v in id_map.items()}, {str(i): str(name) for i, name in rows}


SOURCE_PRIORITY = ("topic", "name", "fulltext", "vector")
MAX_PATHS = 2  # anchor paths written per node ("paths" style)


def path_anchors(candidate: Candidate) -> list[str]:
    """The KG ids paths start from: the seeds in S found by the best source present (topic
    entities, else exact name matches, else fulltext, else vector seeds), as the expansion's
    anchors are chosen (`retrieval.seeds`)."""
    in_s = {n.id for n in candidate.nodes}
    seeds = [s for s in candidate.seeds if s.id in in_s]
    for source in SOURCE_PRIORITY:
        found = [s.id for s in seeds if source in s.sources]
        if found:
            return found
    return [n.id for n in candidate.nodes if n.seed]


def anchor_paths(candidate: Candidate, names: dict[str, str], ids: dict[str, str],
                 max_paths: int = MAX_PATHS) -> dict[str, list[str]]:
    """local id -> up to ``max_paths`` shortest paths of S from an anchor (`path_anchors`)
    to that node, each written ``a -rel-> b <-rel- c`` with the nodes' (lowercase) names;
    an anchor's own path is its name. Pure; breadth-first over S's edges in both directions,
    in S's edge order, so the paths are deterministic."""
    adj: dict[str, list[tuple[str, str]]] = {}
    for e in candidate.edges:
        if e.src in ids and e.dst in ids:
            adj.setdefault(e.src, []).append((f"-{e.rel}->", e.dst))
            adj.setdefault(e.dst, []).append((f"<-{e.rel}-", e.src))
    depth: dict[str, int] = {}
    found: dict[str, list[str]] = {}
    queue: deque[str] = deque()
    for a in path_anchors(candidate):
        if a in ids and a not in depth:
            depth[a] = 0
            found[a] = [names[ids[a]]]
            queue.append(a)
    while queue:
        u = queue.popleft()
        for arrow, v in adj.get(u, []):
            if depth.get(v, depth[u] + 1) != depth[u] + 1:
                continue  # not a shortest path to v
            depth[v] = depth[u] + 1
            if v not in found:
                found[v] = []
                queue.append(v)
            for p in found[u]:
                if len(found[v]) < max_paths:
                    found[v].append(f"{p} {arrow} {names[ids[v]]}")
    out: dict[str, list[str]] = {}
    for kg_id, paths in found.items():
        local = out.setdefault(ids[kg_id], [])
        local.extend(p for p in paths if p not in local and len(local) < max_paths)
    return out


def _dedup_edges(edges: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for e in edges:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out


def _node_rows(ids: dict[str, str], names: dict[str, str], nodes: list[CandidateNode]
               ) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    seen: set[str] = set()
    for n in nodes:
        local = ids[n.id]
        if local not in seen:
            seen.add(local)
            rows.append((local, names[local]))
    return rows


def node_priority(candidate: Candidate) -> list[int]:
    """Indices of ``candidate.nodes``, most important first: seeds, prize, order in S."""
    return sorted(
        range(len(candidate.nodes)),
        key=lambda i: (not candidate.nodes[i].seed, -candidate.nodes[i].prize, i),
    )


def restrict(candidate: Candidate, keep_ids: set[str]) -> Candidate:
    """S limited to ``keep_ids`` (and the edges among them), order preserved."""
    return candidate.model_copy(
        update={
            "nodes": [n for n in candidate.nodes if n.id in keep_ids],
            "edges": [e for e in candidate.edges if e.src in keep_ids and e.dst in keep_ids],
        }
    )


def candidate_view(candidate: Candidate, keep_ids: set[str] | None = None) -> GraphView:
    """S as the retriever sees it (optionally only ``keep_ids``)."""
    ids, names = local_ids(candidate)
    keep = set(ids) if keep_ids is None else keep_ids & set(ids)
    nodes = [n for n in candidate.nodes if n.id in keep]
    edges = [e for e in candidate.edges if e.src in keep and e.dst in keep]
    all_edges = sum(1 for e in candidate.edges if e.src in ids and e.dst in ids)
    return GraphView(
        nodes=_node_rows(ids, names, nodes),
        edges=_dedup_edges([(ids[e.src], e.rel, ids[e.dst]) for e in edges]),
        kg_nodes=nodes,
        kg_edges=edges,
        dropped_nodes=len(candidate.nodes) - len(nodes),
        dropped_edges=all_edges - len(edges),
        names=names,
        candidate=candidate,
    )


def truncated_candidate_view(
    candidate: Candidate, keep: int | None = None
) -> tuple[GraphView, Candidate]:
    """The view keeping the ``keep`` highest-priority nodes, and S restricted the same way."""
    if keep is None or keep >= len(candidate.nodes):
        return candidate_view(candidate), candidate
    keep_ids = {candidate.nodes[i].id for i in node_priority(candidate)[:keep]}
    return candidate_view(candidate, keep_ids), restrict(candidate, keep_ids)


def generator_view(
    candidate: Candidate,
    selection: Selection | None,
    include_endpoints: bool = False,
    max_edges: int | None = None,
    max_nodes: int | None = None,
) -> GraphView:
    """Eq. 14 context; ``selection=None`` is the no-retriever ablation (all of S)."""
    if selection is None:
        view, _ = truncated_candidate_view(candidate, max_nodes)
        return view
    ids, names = local_ids(candidate)
    chosen = {n.id for n in selection.selected if n.id in ids}
    s_nodes = [n for n in candidate.nodes if n.id in chosen]
    if max_nodes is not None and max_nodes < len(s_nodes):
        order = sorted(range(len(s_nodes)), key=lambda i: (not s_nodes[i].seed, i))
        keep = {s_nodes[i].id for i in order[:max_nodes]}
        s_nodes = [n for n in s_nodes if n.id in keep]
    selected_ids = {n.id for n in s_nodes}
    edges = [
        e for e in candidate.edges
        if (e.src in selected_ids or e.dst in selected_ids) and e.src in ids and e.dst in ids
    ]
    total_edges = len(edges)
    if max_edges is not None and max_edges < len(edges):
        order = sorted(range(len(edges)), key=lambda i: (-edges[i].prize, i))
        keep_idx = set(order[:max_edges])
        edges = [e for i, e in enumerate(edges) if i in keep_idx]
    listed = list(s_nodes)
    if include_endpoints:
        shown = {n.id for n in listed}
        ends = {x for e in edges for x in (e.src, e.dst)} - shown
        listed = [n for n in candidate.nodes if n.id in shown or n.id in ends]
    rows = _node_rows(ids, names, listed)
    seen = {name for _, name in rows}
    extra: list[str] = []
    for o in selection.out_of_candidate:
        name = clean_name(o.name)
        if name and name not in seen:
            seen.add(name)
            extra.append(name)
    rows += [(f"na{i}", name) for i, name in enumerate(extra, start=1)]
    return GraphView(
        nodes=rows,
        edges=_dedup_edges([(ids[e.src], e.rel, ids[e.dst]) for e in edges]),
        kg_nodes=listed,
        kg_edges=edges,
        extra_names=extra,
        dropped_nodes=len(chosen) - len(s_nodes),
        dropped_edges=total_edges - len(edges),
        names=names,
        candidate=candidate,
    )


def fit_largest(n: int, build: Callable[[int], T], size: Callable[[T], int], budget: int
                ) -> tuple[T, int]:
    """The largest k in [0, n] with size(build(k)) <= budget (size non-decreasing in k),
    by binary search; k = 0 is returned even when it does not fit (the caller decides)."""
    best_k, best = 0, None
    full = build(n)
    if size(full) <= budget:
        return full, n
    lo, hi = 0, n - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        item = build(mid)
        if size(item) <= budget:
            best_k, best, lo = mid, item, mid + 1
        else:
            hi = mid - 1
    if best is None:
        best = build(0)
    return best, best_k
