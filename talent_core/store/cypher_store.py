"""What the two Cypher stores (FalkorDB, Neo4j) share: every statement is a file under
`cypher/<dialect>/`, every value a parameter, results are positional rows, writes are
batched idempotent MERGEs, and embeddings are checked before anything is written."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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
    chunks,
    distinct_edges,
    last_per_key,
    lookup_keys,
    ordered_by_key,
    query_vector,
    raise_missing_endpoints,
    spans,
)
from talent_core.store.base import ExpansionCaps, Vector
from talent_core.store.cypher import statement, statements
from talent_core.store.expand import expand
from talent_core.text import normalise_name

Row = Sequence[Any]


class CypherStore:
    """Base of the FalkorDB and Neo4j stores; a subclass supplies the `_run` ... `location`
    members below and its own schema/clear/close."""

    dialect: str
    batch_size: int
    vector_batch_size: int
    _dimension: int | None = None

    # --- supplied by each store --------------------------------------------------------------
    def _run(
        self, text: str, params: dict[str, Any] | None = None, write: bool = False
    ) -> list[Row]:
        """Run one statement; its result rows as positional sequences."""
        raise NotImplementedError

    def _create_schema(self, dimension: int) -> None:
        raise NotImplementedError

    def _fulltext_query(self, text: str) -> str:
        """The fulltext index's query for free text ("" when it has no words)."""
        raise NotImplementedError

    def _fuzzy_query(self, text: str) -> str:
        """The fulltext index's query for names holding every word of ``text`` within its
        edits (`text.fuzzy_terms`); "" when it has no words."""
        raise NotImplementedError

    def _vector_rows(self, fields: dict[str, list[str]], vectors: np.ndarray) -> Any:
        """The `$rows` parameter of an upsert with embeddings: one row per vector."""
        raise NotImplementedError

    def _rows_param(self, fields: dict[str, list[str]]) -> Any:
        """A `$rows` parameter of string-only rows, given column-wise."""
        names = list(fields)
        return [dict(zip(names, v, strict=True)) for v in zip(*fields.values(), strict=True)]

    def _keys_param(self, keys: Sequence[str]) -> Any:
        """A list-of-strings parameter (ids, names)."""
        return list(keys)

    @property
    def location(self) -> str:
        """`dialect:where` of this graph (stats, messages)."""
        raise NotImplementedError

    def _topk_params(self, k: int, vector: Vector) -> dict[str, Any]:
        return {"k": int(k), "vector": query_vector(vector)}

    # --- plumbing ----------------------------------------------------------------------------
    def _read(self, name: str, params: dict[str, Any] | None = None) -> list[Row]:
        return self._run(statement(name, self.dialect), params)

    def _write(self, name: str, params: dict[str, Any] | None = None) -> list[Row]:
        return self._run(statement(name, self.dialect), params, write=True)

    def _index_dimensions(self) -> set[int]:
        return {int(d) for _, d in self._read("vector_dimensions") if d is not None}

    def _checked_vectors(self, vectors: list[Vector], what: str, keys: list[str]) -> np.ndarray:
        """Embeddings as one float64 matrix: finite, one length, the indexes' dimension."""
        if not vectors:
            return np.zeros((0, 0))
        try:
            arr = np.asarray(vectors, dtype=np.float64)
        except ValueError as e:
            raise ValueError(f"{what} embeddings must all have the same length: {e}") from None
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise ValueError(f"{what} embeddings must be non-empty 1-d vectors of one length")
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            raise ValueError(f"{what} {keys[int(np.argmax(bad))]!r} has a non-finite embedding")
        if self._dimension is None:
            dims = self._index_dimensions()
            self._dimension = dims.pop() if len(dims) == 1 else None
        if self._dimension is not None and arr.shape[1] != self._dimension:
            raise ValueError(
                f"{what} embeddings have dimension {arr.shape[1]}, the store's vector indexes "
                f"{self._dimension}; nothing of this call was written"
            )
        return arr

    # --- schema ------------------------------------------------------------------------------
    def ensure_schema(self, dimension: int) -> None:
        if dimension < 1:
            raise ValueError(f"embedding dimension must be >= 1, got {dimension}")
        for label, dim in self._read("vector_dimensions"):
            if dim is not None and int(dim) != dimension:
                raise ValueError(
                    f"{self!r} has {label} embeddings of dimension {int(dim)}, but the model "
                    f"gives {dimension}: clear the store or use another graph"
                )
        self._create_schema(dimension)
        self._dimension = dimension

    # --- writes ------------------------------------------------------------------------------
    def upsert_entities(self, rows: Sequence[tuple[str, str, Vector | None]]) -> None:
        rows = last_per_key(rows)
        check_entities(rows)
        embedded = [r for r in rows if r[2] is not None]
        vecs = self._checked_vectors([r[2] for r in embedded], "entity", [r[0] for r in embedded])
        for chunk in chunks([r for r in rows if r[2] is None], self.batch_size):
            data = [{"id": i, "name": n, "name_lc": normalise_name(n)} for i, n, _ in chunk]
            self._write("upsert_entity_names", {"rows": data})
        for part in spans(len(embedded), self.vector_batch_size):
            names = [r[1] for r in embedded[part]]
            fields = {
                "id": [r[0] for r in embedded[part]],
                "name": names,
                "name_lc": [normalise_name(n) for n in names],
            }
            self._write("upsert_entities", {"rows": self._vector_rows(fields, vecs[part])})

    def entities_without_vectors(self, limit: int) -> list[tuple[str, str]]:
        rows = self._read("entities_without_vectors", {"limit": int(limit)})
        return [(str(i), str(n)) for i, n in rows]

    def set_entity_vectors(self, rows: Sequence[tuple[str, Vector]]) -> int:
        rows = last_per_key(rows)
        check_keys("entity id", (r[0] for r in rows))
        vecs = self._checked_vectors([r[1] for r in rows], "entity", [r[0] for r in rows])
        done = 0
        for part in spans(len(rows), self.vector_batch_size):
            fields = {"id": [r[0] for r in rows[part]]}
            res = self._write("set_entity_vectors", {"rows": self._vector_rows(fields, vecs[part])})
            done += int(res[0][0]) if res else 0
        return done

    def upsert_relations(self, rows: Sequence[tuple[str, Vector | None]]) -> None:
        rows = last_per_key(rows)
        check_keys("relation name", (r[0] for r in rows))
        embedded = [r for r in rows if r[1] is not None]
        names = [r[0] for r in embedded]
        vecs = self._checked_vectors([r[1] for r in embedded], "relation", names)
        for chunk in chunks([{"name": r[0]} for r in rows if r[1] is None], self.batch_size):
            self._write("upsert_relation_names", {"rows": list(chunk)})
        for part in spans(len(embedded), self.vector_batch_size):
            rows_param = self._vector_rows({"name": names[part]}, vecs[part])
            self._write("upsert_relations", {"rows": rows_param})

    def upsert_triples(self, edges: Sequence[Edge], source: int | None = None) -> int:
        # Duplicates go first: FalkorDB's MERGE emits one row for a pattern created twice in
        # one query, which would break the endpoint check below.
        edges = distinct_edges(edges)
        check_edges(edges, source)
        added = 0
        for chunk in chunks(edges, self.batch_size):
            rows = {"h": [e.src for e in chunk], "rel": [e.rel for e in chunk],
                    "t": [e.dst for e in chunk]}  # fmt: skip
            if source is None:  # a legacy write: the triples record no source
                written = self._write("upsert_triples", {"rows": self._rows_param(rows)})[0][0]
            else:
                params = {"rows": self._rows_param(rows), "source": int(source)}
                written, new = self._write("assert_triples", params)[0]
                added += int(new or 0)
            if written < len(chunk):
                raise_missing_endpoints(self, chunk)
        return added

    # --- sources (issue 33; the orchestration is loaders/sources.py) --------------------------
    def source_records(self) -> list[SourceRecord]:
        """The Source records, by id."""
        fields = list(SourceRecord.model_fields)
        return [
            SourceRecord(**{k: v for k, v in zip(fields, row, strict=True) if v is not None})
            for row in self._read("source_list")
        ]

    def source_counts(self) -> dict[int, tuple[int, int]]:
        """Source id -> (triples it asserts, triples only it asserts); id 0: legacy."""
        return {int(s): (int(n), int(o)) for s, n, o in self._read("source_counts")}

    def put_source(self, record: SourceRecord) -> None:
        """Create or update a Source record (idempotent)."""
        self._write("source_put", record.model_dump())

    def delete_source(self, source: int) -> None:
        self._write("source_delete", {"id": int(source)})

    def next_source_id(self) -> int:
        rows = self._read("source_max_id")
        top = rows[0][0] if rows else None
        return int(top) + 1 if top is not None else LEGACY_SOURCE_ID + 1

    def retract_all(self, source: int, batch: int,
                    touched: set[str] | None = None) -> tuple[int, int]:
        """Take every assertion of `source` back, `batch` triples a statement (each one
        atomic, so a killed run leaves a consistent store): (triples deleted, triples that
        other sources still assert). `touched` gets the endpoints of the deleted ones."""
        deleted = 0
        while True:
            rows = self._write("retract_only", {"source": int(source), "limit": int(batch)})
            deleted += len(rows)
            if touched is not None:
                touched.update(str(x) for r in rows for x in r)
            if not rows:
                break
        shared = self._loop("retract_shared", {"source": int(source)}, batch)
        return deleted, shared

    def retract(self, source: int, triples: Sequence[tuple[str, str, str]]) -> tuple[int, int]:
        """Take back `source`'s assertion of each of `triples`: (deleted, still asserted)."""
        deleted = shared = 0
        for chunk in chunks(list(triples), self.batch_size):
            rows = self._rows_param({"h": [x[0] for x in chunk], "rel": [x[1] for x in chunk],
                                     "t": [x[2] for x in chunk]})  # fmt: skip
            params = {"rows": rows, "source": int(source)}
            deleted += int(self._write("retract_triples_only", params)[0][0])
            shared += int(self._write("retract_triples_shared", params)[0][0])
        return deleted, shared

    def source_triples(self, source: int) -> set[tuple[str, str, str]]:
        """Every triple `source` asserts."""
        return {(str(h), str(r), str(t))
                for h, r, t in self._read("source_triples", {"source": int(source)})}

    def triple_sources(self, triples: Sequence[tuple[str, str, str]]
                       ) -> dict[tuple[str, str, str], list[int]]:
        out: dict[tuple[str, str, str], list[int]] = {}
        for chunk in chunks(sorted(set(triples)), self.batch_size):
            for h, r, t, src in self._read("triple_sources", {"triples": [list(x) for x in chunk]}):
                out[(str(h), str(r), str(t))] = sorted(int(i) for i in src)
        return out

    def sweep_entities(self, batch: int, among: Sequence[str] | None = None) -> int:
        """Delete the entities left without any triple (and their vectors): all of them
        (a scan), or those of `among` (look-ups)."""
        if among is None:
            return self._loop("sweep_entities", {}, batch)
        deleted = 0
        for chunk in chunks(lookup_keys(among), self.batch_size):
            ids = self._keys_param(chunk)
            deleted += int(self._write("sweep_entities_among", {"ids": ids})[0][0])
        return deleted

    def sweep_relations(self) -> int:
        """Delete the catalogue relations no triple uses."""
        used = {str(r[0]) for r in self._read("relations_used")}
        unused = sorted(str(r[0]) for r in self._read("relation_names") if r[0] not in used)
        deleted = 0
        for chunk in chunks(unused, self.batch_size):
            deleted += int(self._write("delete_relations", {"names": list(chunk)})[0][0])
        return deleted

    def name_collisions(self, ids_per_name: int = 5) -> list[NameCollision]:
        rows = self._read("name_collisions", {"ids": int(ids_per_name)})
        return [NameCollision(name=str(n), count=int(c), ids=[str(i) for i in ids])
                for n, c, ids in rows]

    def _loop(self, name: str, params: dict[str, Any], batch: int) -> int:
        """Run a `LIMIT $limit` write statement until it affects nothing; the total."""
        total = 0
        while True:
            n = int(self._write(name, {**params, "limit": int(batch)})[0][0])
            total += n
            if n == 0:
                return total

    def existing_entities(self, ids: Sequence[str]) -> set[str]:
        return self._existing("existing_entities", "ids", ids)

    def existing_relations(self, names: Sequence[str]) -> set[str]:
        return self._existing("existing_relations", "names", names)

    def _existing(self, name: str, param: str, keys: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for chunk in chunks(lookup_keys(keys), self.batch_size):
            out.update(r[0] for r in self._read(name, {param: self._keys_param(chunk)}))
        return out

    # --- reads -------------------------------------------------------------------------------
    def top_entities(self, vector: Vector, k: int) -> list[ScoredEntity]:
        if k < 1:
            return []
        rows = self._read("top_entities", self._topk_params(k, vector))
        return [ScoredEntity(entity=Entity(id=i, name=n), score=float(s)) for i, n, s in rows]

    def top_relations(self, vector: Vector, k: int) -> list[ScoredRelation]:
        if k < 1:
            return []
        rows = self._read("top_relations", self._topk_params(k, vector))
        return [ScoredRelation(name=n, score=float(s)) for n, s in rows]

    def entities_by_name(self, names: Sequence[str]) -> list[Entity]:
        keys = lookup_keys(normalise_name(n) for n in names)
        rows = self._read("entities_by_name", {"names": keys}) if keys else []
        return ordered_by_key(rows, keys)

    def entities_by_id(self, ids: Sequence[str]) -> list[Entity]:
        uniq = lookup_keys(ids)
        found: dict[str, Entity] = {}
        for chunk in chunks(uniq, self.batch_size):
            for i, n in self._read("entities_by_id", {"ids": list(chunk)}):
                found[i] = Entity(id=i, name=n)
        return [found[i] for i in uniq if i in found]

    def search_names(self, text: str, k: int) -> list[Entity]:
        return self._name_search("search_names", self._fulltext_query(text), k)

    def fuzzy_names(self, text: str, k: int) -> list[Entity]:
        return self._name_search("fuzzy_names", self._fuzzy_query(text), k)

    def _name_search(self, name: str, query: str, k: int) -> list[Entity]:
        """The top ``k`` entities of fulltext statement ``name`` for ``query`` (none for an
        empty query): the exact and the fuzzy name search differ only in query and file."""
        if not query or k < 1:
            return []
        rows = self._read(name, {"query": query, "k": int(k)})
        return [Entity(id=r[0], name=r[1]) for r in rows]

    def neighbourhood(self, seed_ids: Sequence[str], hops: int, caps: ExpansionCaps) -> Subgraph:
        def fetch(frontier: list[str], limit: int) -> list[Row]:
            scan = max(limit, caps.hub_scan)
            return self._read("neighbourhood_hop", {"ids": frontier, "limit": limit, "scan": scan})

        return expand(self.entities_by_id(seed_ids), fetch, hops, caps)

    def relations_at(self, ids: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for chunk in chunks(lookup_keys(ids), self.batch_size):
            out.update(str(r) for (r,) in self._read("relations_at", {"ids": list(chunk)}))
        return out

    def entity_ids(self, after: str, limit: int) -> list[str]:
        return [str(i) for (i,) in self._read("entity_ids", {"after": str(after),
                                                             "limit": int(limit)})]

    def follow(self, ids: Sequence[str], rel: str, limit: int) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for chunk in chunks(lookup_keys(ids), self.batch_size):
            rows = self._read("follow_relation", {"ids": list(chunk), "rel": rel,
                                                  "limit": int(limit)})
            out.extend((str(f), str(m)) for f, m in rows)
        return out

    def triples_among(self, ids: Sequence[str], rels: Sequence[str]) -> list[Edge]:
        keys = lookup_keys(ids)
        if not keys or not rels:
            return []
        rows = self._read("triples_among", {"ids": list(keys), "rels": sorted(set(rels))})
        return [Edge(src=s, rel=r, dst=d) for s, r, d in sorted({tuple(map(str, x)) for x in rows})]

    def count_follow(self, ids: Sequence[str], rel: str, exclude: Sequence[str] = ()) -> int:
        keys = lookup_keys(ids)
        if not keys:
            return 0
        # one statement for all ids: a DISTINCT count cannot be summed over chunks
        rows = self._read("count_follow", {"ids": list(keys), "rel": str(rel),
                                           "exclude": list(lookup_keys(exclude))})
        return int(rows[0][0]) if rows else 0

    def member_values(self, ids: Sequence[str], rel: str) -> list[tuple[str, str, str]]:
        out: set[tuple[str, str, str]] = set()
        for chunk in chunks(lookup_keys(ids), self.batch_size):
            rows = self._read("member_values", {"ids": list(chunk), "rel": str(rel)})
            out.update((str(i), str(v), str(n)) for i, v, n in rows)
        return sorted(out)

    def entity_similarity(self, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        return self._similarity("entity_similarity", "ids", ids, vector)

    def relation_similarity(self, names: Sequence[str], vector: Vector) -> dict[str, float]:
        return self._similarity("relation_similarity", "names", names, vector)

    def entity_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return self._vectors("entity_vectors", "ids", ids)

    def relation_vectors(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        return self._vectors("relation_vectors", "names", names)

    def _vectors(self, name: str, param: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        if not keys:
            return {}
        out: dict[str, np.ndarray] = {}
        for chunk in chunks(lookup_keys(keys), self.batch_size):
            for key, vec in self._read(name, {param: chunk}):
                v = np.asarray(vec, dtype=np.float32).ravel()
                n = float(np.linalg.norm(v))
                out[key] = v / n if n > 0 else v
        return out

    def _similarity(
        self, name: str, param: str, keys: Sequence[str], vector: Vector
    ) -> dict[str, float]:
        if not keys:
            return {}
        rows = self._read(name, {param: lookup_keys(keys), "vector": query_vector(vector)})
        return {i: float(s) for i, s in rows if s is not None and not math.isnan(s)}

    def stats(self) -> StoreStats:
        rows = [self._run(q) for q in statements("stats", self.dialect)]
        counts = [int(r[0][0]) if r else 0 for r in rows]
        return StoreStats(
            entities=counts[0],
            entities_with_embedding=counts[1],
            relations=counts[2],
            triples=counts[3],
            store=self.location,
        )
