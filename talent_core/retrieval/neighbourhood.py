"""Stage 2: the n-hop neighbourhood of the anchors, through the store only.

`neighbourhood` is the plain expansion (the paper rule's graph): one
`store.neighbourhood(anchors, hops, caps)` call (`RetrievalConfig.caps()`).

`OneHop` is what the default rule's question-aware expansion (`paths.expand_paths`) calls
once per depth: the 1-hop neighbourhood of the current frontier, with the same per-node
fan-out and what is left of the total node/edge budgets; it remembers whether any call was
truncated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from talent_core.models import Edge, Entity, Seed, Subgraph
from talent_core.retrieval.settings import MAX_HOPS, MIN_HOPS
from talent_core.store.base import ExpansionCaps, GraphReader

log = logging.getLogger(__name__)

def check_hops(hops: int) -> int:
    if not MIN_HOPS <= int(hops) <= MAX_HOPS:
        raise ValueError(f"hops must be between {MIN_HOPS} and {MAX_HOPS}, got {hops}")
    return int(hops)


def neighbourhood(
    store: GraphReader, anchor_ids: Sequence[str], hops: int, caps: ExpansionCaps
) -> Subgraph:
    check_hops(hops)
    if not anchor_ids:
        return Subgraph()
    sub = store.neighbourhood(list(anchor_ids), hops, caps)
    if sub.truncated:
        log.debug("neighbourhood of %d anchors truncated by a cap", len(anchor_ids))
    return sub


class OneHop:
    """Frontier -> its 1-hop neighbourhood, within a shared node/edge budget."""

    def __init__(self, store: GraphReader, caps: ExpansionCaps):
        self.store = store
        self.caps = caps
        self.nodes: set[str] = set()
        self.edges = 0
        self.truncated = False
        self.calls = 0

    def __call__(self, frontier: list[str]) -> Subgraph:
        left_nodes = self.caps.max_nodes - len(self.nodes)
        left_edges = self.caps.max_edges - self.edges
        if not frontier or left_nodes <= 0 or left_edges <= 0:
            if frontier:
                self.truncated = True
            return Subgraph(truncated=bool(frontier))
        self.calls += 1
        # the frontier itself is already counted; the store counts it again in its cap
        left = self.caps.model_copy(
            update={"max_nodes": left_nodes + len(frontier), "max_edges": left_edges}
        )
        sub = self.store.neighbourhood(frontier, 1, left)
        self.nodes.update(n.id for n in sub.nodes)
        self.edges += len(sub.edges)
        self.truncated |= sub.truncated
        return sub


@dataclass
class Region:
    """The anchors' neighbourhood in local index space (entities 0..N-1, distinct triples
    0..E-1): what the paper rule's PCST, GRAG and SubgraphRAG read."""

    ids: list[str]
    names: list[str]
    head: np.ndarray  # (E,) int64
    rel: np.ndarray  # (E,) int64, index into `relations`
    tail: np.ndarray  # (E,) int64
    relations: list[str]
    topic: np.ndarray  # (N,) bool: the anchors
    truncated: bool = False

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def endpoints(self) -> np.ndarray:
        """(E, 2) local [head, tail] per triple."""
        return np.stack([self.head, self.tail], axis=1).reshape(-1, 2)

    def edge(self, k: int) -> Edge:
        return Edge(src=self.ids[int(self.head[k])], rel=self.relations[int(self.rel[k])],
                    dst=self.ids[int(self.tail[k])])


def region_of(sub: Subgraph, anchors: Sequence[Entity | Seed]) -> Region:
    """`sub`'s distinct triples and entities, plus the anchors it lacks (an isolated anchor
    is still a node), with the anchors flagged."""
    ids = [n.id for n in sub.nodes]
    names = [n.name for n in sub.nodes]
    index = {i: j for j, i in enumerate(ids)}
    for a in anchors:
        if a.id not in index:
            index[a.id] = len(ids)
            ids.append(a.id)
            names.append(a.name)
    triples = list(dict.fromkeys(
        (e.src, e.rel, e.dst) for e in sub.edges if e.src in index and e.dst in index
    ))
    relations = sorted({r for _, r, _ in triples})
    rindex = {r: k for k, r in enumerate(relations)}
    head = np.array([index[h] for h, _, _ in triples], dtype=np.int64)
    rel = np.array([rindex[r] for _, r, _ in triples], dtype=np.int64)
    tail = np.array([index[t] for _, _, t in triples], dtype=np.int64)
    topic = np.zeros(len(ids), dtype=bool)
    topic[[index[a.id] for a in anchors]] = True
    return Region(ids, names, head, rel, tail, relations, topic, sub.truncated)


def region(
    store: GraphReader, anchors: Sequence[Entity | Seed], hops: int, caps: ExpansionCaps
) -> Region:
    """`region_of` the anchors' `hops`-hop neighbourhood (`neighbourhood`)."""
    return region_of(neighbourhood(store, [a.id for a in anchors], hops, caps), anchors)


def vector_rows(
    keys: Sequence[str], vectors: dict[str, np.ndarray], dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """((len(keys), dim) float32 rows of ``vectors`` by key, zeros where a key has none or
    one of another dimension; the mask of the keys found): a region's stored vectors
    (`GraphReader.entity_vectors` / `relation_vectors`) as the learned retrievers read them."""
    rows = np.zeros((len(keys), dim), dtype=np.float32)
    found = np.zeros(len(keys), dtype=bool)
    for j, k in enumerate(keys):
        v = vectors.get(k)
        if v is not None and v.shape[0] == dim:
            rows[j] = v
            found[j] = True
    return rows, found


def entity_similarity(
    store: GraphReader, embedder, ids: Sequence[str], names: Sequence[str], vector
) -> dict[str, float]:
    """Cosine of ``vector`` to each entity of ``ids``: the store's, and for an entity stored
    without an embedding (a load with `--vectors later` whose fill has not reached it) its
    name ``names[k]`` embedded here, so that a graph answers the same while its vectors
    fill (loaders.vectors)."""
    sims = store.entity_similarity(list(ids), vector) if len(ids) else {}
    new = _embedded_names(embedder, ids, names, sims)
    if new:
        q = np.asarray(vector, dtype=np.float32).ravel()
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        sims.update((i, float(v @ q)) for i, v in new.items())
    return sims


def entity_vectors(
    store: GraphReader, embedder, ids: Sequence[str], names: Sequence[str]
) -> dict[str, np.ndarray]:
    """The store's embeddings of ``ids`` (`GraphReader.entity_vectors`), an entity stored
    without one embedded from its name here (see `entity_similarity`); ``embedder`` None:
    the store's only."""
    vecs = store.entity_vectors(list(ids)) if len(ids) else {}
    if embedder is not None:
        vecs.update(_embedded_names(embedder, ids, names, vecs))
    return vecs


def _embedded_names(embedder, ids: Sequence[str], names: Sequence[str],
                    have: dict) -> dict[str, np.ndarray]:
    """The entities of ``ids`` that ``have`` lacks, each its name ``names[k]`` embedded."""
    missing = [(i, n) for i, n in zip(ids, names, strict=True) if i not in have]
    if not missing:
        return {}
    vecs = embedder.encode([n for _, n in missing])
    return {i: np.asarray(v, dtype=np.float32) for (i, _), v in zip(missing, vecs, strict=True)}


def ms_since(t: float) -> float:
    """Milliseconds since `time.perf_counter()` was ``t`` (the retrievers' stage timings)."""
    return (time.perf_counter() - t) * 1000.0
