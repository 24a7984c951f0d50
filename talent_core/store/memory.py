"""In-memory store: the read half of the store contract over numpy arrays, filled by the same
upserts as the database stores. The tests' reference store and the benches' in-memory
baseline (same retrieval code, no database).

Names, ids and the neighbourhood rules are the database stores': ids and relation names are
exact keys, names match by `normalise_name`, each node's edges come in the key order
(neighbour id, relation, direction) and `store.expand` applies the caps. Fulltext search
scores a name by how many distinct query words it holds (ties: shorter name, then id); a
fuzzy name search scans the words for those within each query word's edits (fewest inexact
words first, then shorter name, then id).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from talent_core.models import (
    LEGACY_SOURCE_ID,
    Edge,
    Entity,
    NameCollision,
    ScoredEntity,
    ScoredRelation,
    SourceRecord,
    StoreStats,
    Subgraph,
)
from talent_core.store._common import (
    check_edges,
    check_entities,
    check_keys,
    distinct_edges,
    last_per_key,
    lookup_keys,
    ordered_by_key,
    query_vector,
    raise_missing_endpoints,
)
from talent_core.store.base import ExpansionCaps, Vector
from talent_core.store.expand import HopRow, expand
from talent_core.text import (
    fuzzy_terms,
    identifier_tokens,
    normalise_name,
    search_tokens,
    within_edits,
)

log = logging.getLogger(__name__)

Adjacent = tuple[str, str, bool]  # (neighbour id, relation, stored direction is node -> it)


class _Vectors:
    """Unit vectors by key, as one matrix for cosine top-k and lookups."""

    def __init__(self, vectors: dict[str, np.ndarray]):
        self.keys = list(vectors)
        self.row = {k: i for i, k in enumerate(self.keys)}
        self.matrix = np.stack(list(vectors.values())) if vectors else np.zeros((0, 0))

    def top(self, vector: Vector, k: int) -> list[tuple[str, float]]:
        if k < 1 or not self.keys:
            return []
        sims = self.matrix @ _unit(query_vector(vector))
        k = min(k, sims.size)
        best = np.argpartition(-sims, k - 1)[:k].tolist()
        best.sort(key=lambda j: (-sims[j], self.keys[j]))
        return [(self.keys[j], float(sims[j])) for j in best]

    def similarity(self, keys: Sequence[str], vector: Vector) -> dict[str, float]:
        found = [k for k in lookup_keys(keys) if k in self.row]
        if not found:
            return {}
        sims = self.matrix[[self.row[k] for k in found]] @ _unit(query_vector(vector))
        return dict(zip(found, sims.tolist(), strict=True))


@dataclass
class _Index:
    """What reads use, built from the stored data on the first read after a write."""

    entities: _Vectors
    relations: _Vectors
    by_name: dict[str, list[str]]
    adjacent: dict[str, list[Adjacent]]
    sorted_nodes: set[str] = field(default_factory=set)
    words: dict[str, set[str]] | None = None  # word -> ids, built on the first search


class MemoryStore:
    """GraphReader in process memory; `upsert_*` fill it (see the module docstring)."""

    dialect = "memory"

    def __init__(self) -> None:
        self.clear()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._names)} entities, {len(self._edges)} triples)"

    def clear(self) -> None:
        self._names: dict[str, str] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._relations: dict[str, np.ndarray | None] = {}
        # triple -> the ids of the sources asserting it (None: legacy, see store.base)
        self._edges: dict[tuple[str, str, str], list[int] | None] = {}
        self._sources: dict[int, SourceRecord] = {}
        self._dimension: int | None = None
        self._index: _Index | None = None

    def close(self) -> None:
        """Nothing to release."""

    # --- filling it ----------------------------------------------------------------------
    def upsert_entities(self, rows: Sequence[tuple[str, str, Vector | None]]) -> None:
        rows = last_per_key(rows)
        check_entities(rows)
        vecs = {i: self._checked(v, i) for i, _, v in rows if v is not None}
        self._names.update((i, n) for i, n, _ in rows)
        self._vectors.update(vecs)
        self._index = None

    def entities_without_vectors(self, limit: int) -> list[tuple[str, str]]:
        ids = sorted(i for i in self._names if i not in self._vectors)
        return [(i, self._names[i]) for i in ids[: max(0, int(limit))]]

    def set_entity_vectors(self, rows: Sequence[tuple[str, Vector]]) -> int:
        rows = last_per_key(rows)
        check_keys("entity id", (r[0] for r in rows))
        vecs = {i: self._checked(v, i) for i, v in rows}
        new = {i: v for i, v in vecs.items() if i in self._names and i not in self._vectors}
        self._vectors.update(new)
        if new:
            self._index = None
        return len(new)

    def upsert_relations(self, rows: Sequence[tuple[str, Vector | None]]) -> None:
        rows = last_per_key(rows)
        check_keys("relation name", (r[0] for r in rows))
        vecs = {n: self._checked(v, n) for n, v in rows if v is not None}
        for n, _ in rows:
            self._relations.setdefault(n, None)
        self._relations.update(vecs)
        self._index = None

    def existing_relations(self, names: Sequence[str]) -> set[str]:
        """The relation types of ``names`` stored with an embedding (as the databases)."""
        return {n for n in names if self._relations.get(n) is not None}

    def upsert_triples(self, edges: Sequence[Edge], source: int | None = None) -> int:
        edges = distinct_edges(edges)
        check_edges(edges, source)
        keys = [(e.src, e.rel, e.dst) for e in edges]
        known = [k for k in keys if k[0] in self._names and k[2] in self._names]
        added = 0
        for k in known:
            if k not in self._edges:
                self._edges[k] = None if source is None else [source]
                added += source is not None
                continue
            have = self._edges[k]
            have = [LEGACY_SOURCE_ID] if have is None else have
            if source is not None and source not in have:
                self._edges[k] = [*have, source]
                added += 1
        self._index = None
        if len(known) < len(keys):
            raise_missing_endpoints(self, edges)
        return added

    # --- sources (store.base.SourceStore) --------------------------------------------------
    def _asserting(self, k: tuple[str, str, str]) -> list[int]:
        have = self._edges[k]
        return [LEGACY_SOURCE_ID] if have is None else have

    def source_records(self) -> list[SourceRecord]:
        return [self._sources[i].model_copy() for i in sorted(self._sources)]

    def source_counts(self) -> dict[int, tuple[int, int]]:
        out: dict[int, list[int]] = {}
        for k in self._edges:
            have = self._asserting(k)
            for s in have:
                c = out.setdefault(s, [0, 0])
                c[0] += 1
                c[1] += len(have) == 1
        return {s: (c[0], c[1]) for s, c in out.items()}

    def put_source(self, record: SourceRecord) -> None:
        self._sources[record.id] = record.model_copy()

    def delete_source(self, source: int) -> None:
        self._sources.pop(source, None)

    def next_source_id(self) -> int:
        return max(self._sources, default=LEGACY_SOURCE_ID) + 1

    def retract_all(self, source: int, batch: int,
                    touched: set[str] | None = None) -> tuple[int, int]:
        mine = [k for k in self._edges if source in self._asserting(k)]
        if touched is not None:
            touched.update(x for k in mine if len(self._asserting(k)) == 1 for x in (k[0], k[2]))
        return self.retract(source, mine)

    def retract(self, source: int, triples: Sequence[tuple[str, str, str]]) -> tuple[int, int]:
        deleted = shared = 0
        for k in triples:
            k = tuple(k)  # type: ignore[assignment]
            if k not in self._edges or source not in self._asserting(k):
                continue
            rest = [s for s in self._asserting(k) if s != source]
            if rest:
                self._edges[k] = rest
                shared += 1
            else:
                del self._edges[k]
                deleted += 1
        self._index = None
        return deleted, shared

    def source_triples(self, source: int) -> set[tuple[str, str, str]]:
        return {k for k in self._edges if source in self._asserting(k)}

    def triple_sources(self, triples: Sequence[tuple[str, str, str]]
                       ) -> dict[tuple[str, str, str], list[int]]:
        return {k: sorted(self._asserting(k)) for k in set(triples) if k in self._edges}

    def sweep_entities(self, batch: int, among: Sequence[str] | None = None) -> int:
        used = {x for h, _, t in self._edges for x in (h, t)}
        pool = self._names if among is None else [i for i in lookup_keys(among)
                                                  if i in self._names]
        gone = [i for i in pool if i not in used]
        for i in gone:
            del self._names[i]
            self._vectors.pop(i, None)
        self._index = None
        return len(gone)

    def sweep_relations(self) -> int:
        used = {r for _, r, _ in self._edges}
        gone = [n for n in self._relations if n not in used]
        for n in gone:
            del self._relations[n]
        self._index = None
        return len(gone)

    def name_collisions(self, ids_per_name: int = 5) -> list[NameCollision]:
        by: dict[str, list[str]] = defaultdict(list)
        for i, n in self._names.items():
            by[normalise_name(n)].append(i)
        names = {i: n for i, n in self._names.items()}
        out = [NameCollision(name=names[ids[0]], count=len(ids), ids=ids[:ids_per_name])
               for ids in by.values() if len(ids) > 1]
        keys = {c.ids[0]: normalise_name(c.name) for c in out}
        return sorted(out, key=lambda c: (-c.count, keys[c.ids[0]]))

    def _checked(self, vector: Vector, key: str) -> np.ndarray:
        v = np.asarray(vector, dtype=np.float32).ravel()
        if v.size == 0 or not np.isfinite(v).all():
            raise ValueError(f"{key!r} has an empty or non-finite embedding")
        if self._dimension is None:
            self._dimension = v.size
        elif v.size != self._dimension:
            raise ValueError(
                f"{key!r} has an embedding of dimension {v.size}, the store's {self._dimension}"
            )
        return _unit(v)

    # --- reads ---------------------------------------------------------------------------
    @property
    def _ix(self) -> _Index:
        if self._index is None:
            by_name: dict[str, list[str]] = defaultdict(list)
            for i, n in self._names.items():
                by_name[normalise_name(n)].append(i)
            adjacent: dict[str, list[Adjacent]] = defaultdict(list)
            for h, r, t in self._edges:
                adjacent[h].append((t, r, True))
                adjacent[t].append((h, r, False))
            rel_vecs = {n: v for n, v in self._relations.items() if v is not None}
            self._index = _Index(
                _Vectors(self._vectors), _Vectors(rel_vecs), dict(by_name), dict(adjacent)
            )
        return self._index

    def top_entities(self, vector: Vector, k: int) -> list[ScoredEntity]:
        return [
            ScoredEntity(entity=Entity(id=i, name=self._names[i]), score=s)
            for i, s in self._ix.entities.top(vector, k)
        ]

    def top_relations(self, vector: Vector, k: int) -> list[ScoredRelation]:
        return [ScoredRelation(name=n, score=s) for n, s in self._ix.relations.top(vector, k)]

    def entities_by_name(self, names: Sequence[str]) -> list[Entity]:
        keys = lookup_keys(normalise_name(n) for n in names)
        by_name = self._ix.by_name
        rows = [[k, i, self._names[i]] for k in keys for i in by_name.get(k, ())]
        return ordered_by_key(rows, keys)

    def entities_by_id(self, ids: Sequence[str]) -> list[Entity]:
        return [Entity(id=i, name=self._names[i]) for i in lookup_keys(ids) if i in self._names]

    def _words(self) -> dict[str, set[str]]:
        """Word -> ids of the names holding it (built on the first search); an identifier
        ("repo_men") is indexed whole as well as by its words, so a fuzzy term of either
        kind finds it (the database indexes hold it whole)."""
        ix = self._ix
        if ix.words is None:
            ix.words = defaultdict(set)
            for i, n in self._names.items():
                for w in (*search_tokens(n, max_tokens=1 << 30), *identifier_tokens(n)):
                    ix.words[w].add(i)
        return ix.words

    def search_names(self, text: str, k: int) -> list[Entity]:
        tokens = search_tokens(text)
        if not tokens or k < 1:
            return []
        words = self._words()
        score: dict[str, int] = defaultdict(int)
        for t in tokens:
            for i in words.get(t, ()):
                score[i] += 1
        best = sorted(score, key=lambda i: (-score[i], len(self._names[i]), i))[:k]
        return [Entity(id=i, name=self._names[i]) for i in best]

    def fuzzy_names(self, text: str, k: int) -> list[Entity]:
        terms = fuzzy_terms(text)
        if not terms or k < 1:
            return []
        words = self._words()
        ids: set[str] | None = None
        cost: dict[str, int] = defaultdict(int)
        for term, edits in terms:  # every word must match: intersect the ids
            hit: dict[str, int] = {}
            for w in words if edits else (term,):
                if w in words and within_edits(term, w, edits):
                    d = 0 if w == term else 1
                    for i in words[w]:
                        hit[i] = min(hit.get(i, d), d)
            ids = set(hit) if ids is None else ids & set(hit)
            for i, d in hit.items():
                cost[i] += d
            if not ids:
                return []
        best = sorted(ids or (), key=lambda i: (cost[i], len(self._names[i]), i))[:k]
        return [Entity(id=i, name=self._names[i]) for i in best]

    def neighbourhood(self, seed_ids: Sequence[str], hops: int, caps: ExpansionCaps) -> Subgraph:
        return expand(self.entities_by_id(seed_ids), self._fetch_hop, hops, caps)

    def _fetch_hop(self, frontier: list[str], limit: int) -> Iterator[HopRow]:
        ix = self._ix
        for fid in frontier:
            rows = ix.adjacent.get(fid, [])
            if fid not in ix.sorted_nodes:
                rows.sort()
                ix.sorted_nodes.add(fid)
            for mid, rel, out in rows[:limit]:
                yield (fid, out, rel, mid, self._names[mid])

    def relations_at(self, ids: Sequence[str]) -> set[str]:
        adjacent = self._ix.adjacent
        return {r for fid in lookup_keys(ids) for _, r, _ in adjacent.get(fid, ())}

    def entity_ids(self, after: str, limit: int) -> list[str]:
        return sorted(i for i in self._names if i > after)[: max(0, int(limit))]

    def follow(self, ids: Sequence[str], rel: str, limit: int) -> list[tuple[str, str]]:
        adjacent = self._ix.adjacent
        out: list[tuple[str, str]] = []
        for fid in lookup_keys(ids):
            mids = sorted({mid for mid, r, _ in adjacent.get(fid, ()) if r == rel})
            out.extend((fid, mid) for mid in mids[: max(0, int(limit))])
        return out

    def triples_among(self, ids: Sequence[str], rels: Sequence[str]) -> list[Edge]:
        keep, wanted = set(lookup_keys(ids)), set(rels)
        found = {(h, r, t) for h in keep for t, r, out in self._ix.adjacent.get(h, ())
                 if out and r in wanted and t in keep}
        return [Edge(src=h, rel=r, dst=t) for h, r, t in sorted(found)]

    def count_follow(self, ids: Sequence[str], rel: str, exclude: Sequence[str] = ()) -> int:
        adjacent, skip = self._ix.adjacent, set(exclude)
        return len({mid for fid in lookup_keys(ids) for mid, r, _ in adjacent.get(fid, ())
                    if r == rel and mid not in skip})

    def member_values(self, ids: Sequence[str], rel: str) -> list[tuple[str, str, str]]:
        adjacent = self._ix.adjacent
        return sorted({(fid, mid, self._names[mid]) for fid in lookup_keys(ids)
                       for mid, r, out in adjacent.get(fid, ()) if out and r == rel})

    def entity_similarity(self, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        return self._ix.entities.similarity(ids, vector)

    def relation_similarity(self, names: Sequence[str], vector: Vector) -> dict[str, float]:
        return self._ix.relations.similarity(names, vector)

    def entity_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {i: self._vectors[i] for i in lookup_keys(ids) if i in self._vectors}

    def relation_vectors(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        return {n: v for n in lookup_keys(names) if (v := self._relations.get(n)) is not None}

    def stats(self) -> StoreStats:
        return StoreStats(
            entities=len(self._names),
            entities_with_embedding=len(self._vectors),
            relations=len(self._relations),
            triples=len(self._edges),
            store=self.dialect,
        )


def _unit(v: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float32)
    n = float(np.linalg.norm(arr))
    return arr / n if n else arr
