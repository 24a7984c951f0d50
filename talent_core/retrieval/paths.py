"""Question-aware expansion: a beam search over relation paths from the anchor seeds.

A *path type* is a sequence of relation texts followed from the anchors, direction ignored
(`("directed_by", "directed_by", "starred_actors")`: the actors of the films of the
anchor's director). Its *ends* are the nodes it reaches, each with its *support*: the number
of distinct walks of that type from the anchors to it. Walks never pass through or end at
an anchor again.

Scoring (relation-path scoring). With s(r) the question-to-relation score
(`relations.RelationScorer`, token max-sim) and tau the mean of s over every relation met
so far in the expansion,

    score(P) = sum over the DISTINCT relations r of P of (s(r) - tau)

so a path gains for each further relation the question talks about, loses for each it does
not, and repeating a relation (film -> actor -> film) neither helps nor hurts. At every
depth only the `beam` best extensions P + r are followed: the expansion stays small and
question-shaped instead of fanning out through every relation of a hub.

Pure apart from the two callables it is given: `one_hop(ids) -> Subgraph` (the store's
1-hop neighbourhood of the frontier; called once per depth) and
`rel_scores(rels) -> {rel: s(r)}`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from talent_core.models import Edge, Subgraph

log = logging.getLogger(__name__)


@dataclass
class PathType:
    rels: tuple[str, ...]
    score: float
    ends: np.ndarray  # local node indices, by support (desc), then discovery order
    support: np.ndarray  # matching supports
    edges: np.ndarray  # local edge indices used by this type's walks at its last hop


@dataclass
class PathExpansion:
    ids: list[str] = field(default_factory=list)  # local node index -> KG id
    names: list[str] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)  # local edge index -> edge
    endpoints: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    anchors: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    types: list[PathType] = field(default_factory=list)  # best first
    rel_scores: dict[str, float] = field(default_factory=dict)
    tau: float = 0.0
    truncated: bool = False
    store_calls: int = 0

    def used_edges(self) -> np.ndarray:
        if not self.types:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.concatenate([t.edges for t in self.types]))


def path_score(rels: Sequence[str], s: dict[str, float], tau: float) -> float:
    return float(sum(s[r] - tau for r in set(rels)))


def _top_support(sup: np.ndarray, m: int) -> np.ndarray:
    nz = np.flatnonzero(sup)
    if nz.size <= m:
        return sup
    keep = nz[np.lexsort((nz, -sup[nz]))[:m]]
    out = np.zeros_like(sup)
    out[keep] = sup[keep]
    return out


def _rank_key(p: tuple[tuple[str, ...], float]) -> tuple[float, int, tuple[str, ...]]:
    rels, score = p
    # best score first; on ties the longer path (its prefixes' ends lie on its walks anyway)
    return (-score, -len(rels), rels)


def expand_paths(
    anchors: Sequence[tuple[str, str]],
    one_hop: Callable[[list[str]], Subgraph],
    rel_scores: Callable[[list[str]], dict[str, float]],
    *,
    hops: int = 2,
    beam: int = 10,
    frontier_per_path: int = 0,
    extend: int = 0,
) -> PathExpansion:
    """Beam search over relation paths of length 1..hops from `anchors` ((id, name) pairs).

    `frontier_per_path` > 0: a kept path type passes only its best-supported ends (at most
    that many) on to the next depth; its other ends stay ends. This bounds the store work
    of the last hop (the frontier is at most beam * frontier_per_path nodes).
    `extend` > 0: only the best `extend` kept types of a depth are extended to the next
    depth; the others stay ends (and compete for prizes). Most of the store work of a
    deeper hop is the hubs that low-ranked types reach (a film's genre, year, language)."""
    out = PathExpansion()
    index: dict[str, int] = {}

    def node(i: str, name: str) -> int:
        j = index.get(i)
        if j is None:
            j = index[i] = len(out.ids)
            out.ids.append(i)
            out.names.append(name)
        return j

    for i, name in anchors:
        node(i, name)
    out.anchors = np.array(sorted({index[i] for i, _ in anchors}), dtype=np.int64)
    if not anchors or hops < 1 or beam < 1:
        return out

    edge_index: dict[tuple[str, str, str], int] = {}
    ends_src: list[int] = []
    ends_dst: list[int] = []
    # directed incidence of expanded nodes: U -> V over edge EI with relation id RL
    inc_u: list[np.ndarray] = []
    inc_v: list[np.ndarray] = []
    inc_r: list[np.ndarray] = []
    inc_e: list[np.ndarray] = []
    rel_ids: dict[str, int] = {}
    rel_names: list[str] = []
    expanded: set[int] = set()
    s: dict[str, float] = {}

    frontier: dict[tuple[str, ...], np.ndarray] = {}  # type -> support over local nodes
    start = np.zeros(len(out.ids), dtype=np.float64)
    start[out.anchors] = 1.0
    frontier[()] = start
    found: list[tuple[tuple[str, ...], np.ndarray, np.ndarray]] = []  # (rels, support, edges)

    for _depth in range(hops):
        if frontier_per_path > 0 and _depth > 0:
            frontier = {p: _top_support(sup, frontier_per_path) for p, sup in frontier.items()}
        need = sorted({int(j) for sup in frontier.values() for j in np.flatnonzero(sup)} - expanded)
        if need:
            sub = one_hop([out.ids[j] for j in need])
            out.store_calls += 1
            out.truncated |= sub.truncated
            names = {n.id: n.name for n in sub.nodes}
            need_set = set(need)
            u_l, v_l, r_l, e_l = [], [], [], []
            for e in sub.edges:
                a = node(e.src, names.get(e.src, e.src))
                b = node(e.dst, names.get(e.dst, e.dst))
                key = (e.src, e.rel, e.dst)
                k = edge_index.get(key)
                if k is None:
                    k = edge_index[key] = len(out.edges)
                    out.edges.append(e)
                    ends_src.append(a)
                    ends_dst.append(b)
                r = rel_ids.get(e.rel)
                if r is None:
                    r = rel_ids[e.rel] = len(rel_names)
                    rel_names.append(e.rel)
                for x, y in ((a, b), (b, a)):
                    if x in need_set:
                        u_l.append(x)
                        v_l.append(y)
                        r_l.append(r)
                        e_l.append(k)
            expanded.update(need)
            inc_u.append(np.array(u_l, dtype=np.int64))
            inc_v.append(np.array(v_l, dtype=np.int64))
            inc_r.append(np.array(r_l, dtype=np.int64))
            inc_e.append(np.array(e_l, dtype=np.int64))
        U = np.concatenate(inc_u) if inc_u else np.zeros(0, dtype=np.int64)
        V = np.concatenate(inc_v) if inc_v else np.zeros(0, dtype=np.int64)
        RL = np.concatenate(inc_r) if inc_r else np.zeros(0, dtype=np.int64)
        EI = np.concatenate(inc_e) if inc_e else np.zeros(0, dtype=np.int64)
        n = len(out.ids)

        new_rels = [r for r in rel_names if r not in s]
        if new_rels:
            s.update(rel_scores(new_rels))
            for r in new_rels:
                s.setdefault(r, 0.0)
        tau = float(np.mean(list(s.values()))) if s else 0.0

        cands: dict[tuple[str, ...], tuple[tuple[str, ...], int]] = {}
        weights: dict[tuple[str, ...], np.ndarray] = {}
        for rels, sup in frontier.items():
            sup = np.pad(sup, (0, n - sup.size))
            frontier[rels] = sup
            w = sup[U] if U.size else np.zeros(0)
            weights[rels] = w
            for r in np.unique(RL[w > 0]).tolist():
                cands[rels + (rel_names[r],)] = (rels, r)
        if not cands:
            break
        scored = sorted(((p, path_score(p, s, tau)) for p in cands), key=_rank_key)[:beam]
        nxt: dict[tuple[str, ...], np.ndarray] = {}
        for p, _score in scored:
            parent, r = cands[p]
            w = weights[parent]
            m = (w > 0) & (RL == r)
            sup = np.bincount(V[m], weights=w[m], minlength=n).astype(np.float64)
            # walks do not return to an anchor: "films sharing a director with X" are not
            # X, and X's own actors must not gain support from the walk back through X
            sup[out.anchors] = 0.0
            if not sup.any():
                continue
            found.append((p, sup, np.unique(EI[m])))
            if extend <= 0 or len(nxt) < extend:
                nxt[p] = sup
        frontier = nxt

    out.endpoints = np.array([ends_src, ends_dst], dtype=np.int64).T.reshape(-1, 2)
    out.rel_scores = dict(s)
    out.tau = float(np.mean(list(s.values()))) if s else 0.0
    types = []
    for rels, sup, edges in found:
        ends = np.flatnonzero(sup)
        order = np.lexsort((ends, -sup[ends]))  # support desc, then discovery order
        ends = ends[order]
        types.append(
            PathType(
                rels=rels,
                score=path_score(rels, s, out.tau),
                ends=ends,
                support=sup[ends],
                edges=edges,
            )
        )
    types.sort(key=lambda t: _rank_key((t.rels, t.score)))
    out.types = types
    return out
