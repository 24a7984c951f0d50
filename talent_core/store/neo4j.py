"""Production store: Neo4j 5.x through the official `neo4j` driver (Bolt).

Every statement is a file under cypher/neo4j/ and every value a query parameter. Writes are
`UNWIND $rows` batches that MERGE on uniqueness constraints, so re-loading is a no-op. Scores
are cosine similarities: Neo4j's vector index and `vector.similarity.cosine` return
(1 + cos) / 2, which the statements map back to cos.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import neo4j
from neo4j import GraphDatabase, RoutingControl

from talent_core.models import Edge, Entity, ScoredEntity, ScoredRelation, StoreStats, Subgraph
from talent_core.store._common import (
    check_keys,
    check_names,
    chunks,
    last_per_key,
    lookup_keys,
    ordered_by_key,
    query_vector,
    raise_missing_endpoints,
)
from talent_core.store.base import Vector
from talent_core.store.cypher import statement, statements
from talent_core.store.expand import HopRow, expand, validate_caps
from talent_core.text import lucene_query, normalise_name

log = logging.getLogger(__name__)

DIALECT = "neo4j"


def _vec(v: Vector, what: str, key: str) -> list[float]:
    out = [float(x) for x in v]
    if not out or not all(math.isfinite(x) for x in out):
        raise ValueError(f"{what} {key!r} has an empty or non-finite embedding")
    return out


class Neo4jStore:
    """GraphStore on a Neo4j 5.x database (5.26 LTS tested by the linter; 2025.x works)."""

    dialect = DIALECT

    def __init__(
        self,
        uri: str,
        user: str = "neo4j",
        password: str = "neo4j",
        database: str = "neo4j",
        batch_size: int = 5000,
        vector_batch_size: int = 1000,
        index_timeout: int = 600,
        driver: neo4j.Driver | None = None,
    ):
        self.uri = uri
        self.database = database
        self.batch_size = batch_size
        self.vector_batch_size = vector_batch_size
        self.index_timeout = index_timeout
        self._dimension: int | None = None
        self._driver = driver or GraphDatabase.driver(uri, auth=(user, password))
        try:
            self._driver.verify_connectivity()
        except Exception as e:
            self._driver.close()
            raise ConnectionError(
                f"cannot reach Neo4j at {uri} (database {database!r}): {e}. "
                "Start it with `docker compose up -d neo4j` and check NEO4J_URI/USER/PASSWORD."
            ) from e

    @classmethod
    def from_settings(cls, settings: Any) -> Neo4jStore:
        if not settings.neo4j_uri:
            raise ValueError("TALENT_STORE=neo4j needs NEO4J_URI (e.g. bolt://localhost:7687)")
        return cls(
            settings.neo4j_uri,
            settings.neo4j_user,
            settings.neo4j_password,
            settings.neo4j_database,
            batch_size=settings.batch_size,
        )

    def __repr__(self) -> str:
        return f"Neo4jStore({self.uri!r}, database={self.database!r})"

    # --- plumbing --------------------------------------------------------------------------
    def _run(
        self, text: str, params: dict[str, Any] | None = None, write: bool = False
    ) -> list[neo4j.Record]:
        records, _, _ = self._driver.execute_query(
            text,
            params or {},
            routing_=RoutingControl.WRITE if write else RoutingControl.READ,
            database_=self.database,
        )
        return records

    def _write(self, name: str, params: dict[str, Any] | None = None) -> list[neo4j.Record]:
        return self._run(statement(name, DIALECT), params, write=True)

    def _read(self, name: str, params: dict[str, Any] | None = None) -> list[neo4j.Record]:
        return self._run(statement(name, DIALECT), params)

    def close(self) -> None:
        self._driver.close()

    # --- schema --------------------------------------------------------------------------
    def ensure_schema(self, dimension: int) -> None:
        if dimension < 1:
            raise ValueError(f"embedding dimension must be >= 1, got {dimension}")
        for rec in self._read("vector_dimensions"):
            if rec["dimension"] is not None and int(rec["dimension"]) != dimension:
                raise ValueError(
                    f"Neo4j database {self.database!r} has {rec['label']} embeddings of "
                    f"dimension {int(rec['dimension'])}, but the model gives {dimension}: "
                    "clear the store or use another database"
                )
        for q in statements("schema", DIALECT):  # IF NOT EXISTS: idempotent
            self._run(q, {"dimension": dimension}, write=True)
        self._run(statement("await_indexes", DIALECT), {"timeout": self.index_timeout})
        self._dimension = dimension

    def _check_length(self, rows: list[dict[str, Any]]) -> None:
        """Neo4j silently leaves vectors of another dimension out of the index: refuse them."""
        if not rows:
            return
        if self._dimension is None:
            dims = {int(r["dimension"]) for r in self._read("vector_dimensions") if r["dimension"]}
            self._dimension = dims.pop() if len(dims) == 1 else None
        for r in rows:
            n = len(r["embedding"])
            if self._dimension is not None and n != self._dimension:
                key = r.get("id", r.get("name"))
                raise ValueError(
                    f"{key!r} has an embedding of dimension {n}, the store's vector indexes "
                    f"{self._dimension}; nothing of this call was written"
                )

    # --- writes ----------------------------------------------------------------------------
    def upsert_entities(self, rows: Sequence[tuple[str, str, Vector]]) -> None:
        rows = last_per_key(rows)
        check_keys("entity id", (r[0] for r in rows))
        check_names("entity", (r[1] for r in rows))
        without = [
            {"id": i, "name": n, "name_lc": normalise_name(n)} for i, n, v in rows if v is None
        ]
        for chunk in chunks(without, self.batch_size):
            self._write("upsert_entity_names", {"rows": list(chunk)})
        with_vec = [
            {"id": i, "name": n, "name_lc": normalise_name(n), "embedding": _vec(v, "entity", i)}
            for i, n, v in rows
            if v is not None
        ]
        self._check_length(with_vec)
        for chunk in chunks(with_vec, self.vector_batch_size):
            self._write("upsert_entities", {"rows": list(chunk)})

    def upsert_relations(self, rows: Sequence[tuple[str, Vector]]) -> None:
        rows = last_per_key(rows)
        check_keys("relation name", (r[0] for r in rows))
        without = [{"name": n} for n, v in rows if v is None]
        for chunk in chunks(without, self.batch_size):
            self._write("upsert_relation_names", {"rows": list(chunk)})
        with_vec = [
            {"name": n, "embedding": _vec(v, "relation", n)} for n, v in rows if v is not None
        ]
        self._check_length(with_vec)
        for chunk in chunks(with_vec, self.vector_batch_size):
            self._write("upsert_relations", {"rows": list(chunk)})

    def upsert_triples(self, edges: Sequence[Edge]) -> None:
        edges = list({(e.src, e.rel, e.dst): e for e in edges}.values())
        check_keys("entity id", (x for e in edges for x in (e.src, e.dst)))
        check_keys("relation name", (e.rel for e in edges))
        for chunk in chunks(edges, self.batch_size):
            data = [{"h": e.src, "rel": e.rel, "t": e.dst} for e in chunk]
            written = self._write("upsert_triples", {"rows": data})[0]["written"]
            if written < len(data):
                raise_missing_endpoints(self, chunk)

    def existing_entities(self, ids: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for chunk in chunks(lookup_keys(ids), self.batch_size):
            out.update(r["id"] for r in self._read("existing_entities", {"ids": list(chunk)}))
        return out

    def existing_relations(self, names: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for chunk in chunks(lookup_keys(names), self.batch_size):
            recs = self._read("existing_relations", {"names": list(chunk)})
            out.update(r["name"] for r in recs)
        return out

    # --- reads ---------------------------------------------------------------------------
    def top_entities(self, vector: Vector, k: int) -> list[ScoredEntity]:
        if k < 1:
            return []
        recs = self._read("top_entities", {"k": int(k), "vector": query_vector(vector)})
        return [
            ScoredEntity(entity=Entity(id=r["id"], name=r["name"]), score=float(r["score"]))
            for r in recs
        ]

    def top_relations(self, vector: Vector, k: int) -> list[ScoredRelation]:
        if k < 1:
            return []
        recs = self._read("top_relations", {"k": int(k), "vector": query_vector(vector)})
        return [ScoredRelation(name=r["name"], score=float(r["score"])) for r in recs]

    def entities_by_name(self, names: Sequence[str]) -> list[Entity]:
        keys = lookup_keys(normalise_name(n) for n in names)
        if not keys:
            return []
        recs = self._read("entities_by_name", {"names": keys})
        return ordered_by_key([[r["name_lc"], r["id"], r["name"]] for r in recs], keys)

    def entities_by_id(self, ids: Sequence[str]) -> list[Entity]:
        uniq = lookup_keys(ids)
        found: dict[str, Entity] = {}
        for chunk in chunks(uniq, self.batch_size):
            for r in self._read("entities_by_id", {"ids": list(chunk)}):
                found[r["id"]] = Entity(id=r["id"], name=r["name"])
        return [found[i] for i in uniq if i in found]

    def search_names(self, text: str, k: int) -> list[Entity]:
        query = lucene_query(text)
        if not query or k < 1:
            return []
        recs = self._read("search_names", {"query": query, "k": int(k)})
        return [Entity(id=r["id"], name=r["name"]) for r in recs]

    def neighbourhood(
        self,
        seed_ids: Sequence[str],
        hops: int = 2,
        fanout: int = 50,
        max_nodes: int = 2000,
        max_edges: int = 5000,
    ) -> Subgraph:
        validate_caps(hops, fanout, max_nodes, max_edges)
        seeds = self.entities_by_id(seed_ids)
        if not seeds:
            return Subgraph()

        def fetch(frontier: list[str], limit: int) -> list[HopRow]:
            recs = self._read("neighbourhood_hop", {"ids": frontier, "limit": limit})
            return [(r["fid"], r["out"], r["rel"], r["mid"], r["mname"]) for r in recs]

        return expand(seeds, fetch, hops, fanout, max_nodes, max_edges)

    def entity_similarity(self, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        if not ids:
            return {}
        recs = self._read(
            "entity_similarity", {"ids": lookup_keys(ids), "vector": query_vector(vector)}
        )
        return {r["id"]: float(r["score"]) for r in recs if r["score"] is not None}

    def relation_similarity(self, names: Sequence[str], vector: Vector) -> dict[str, float]:
        if not names:
            return {}
        recs = self._read(
            "relation_similarity",
            {"names": lookup_keys(names), "vector": query_vector(vector)},
        )
        return {r["name"]: float(r["score"]) for r in recs if r["score"] is not None}

    def stats(self) -> StoreStats:
        counts = [int(self._run(q)[0]["n"]) for q in statements("stats", DIALECT)]
        return StoreStats(
            entities=counts[0],
            entities_with_embedding=counts[1],
            relations=counts[2],
            triples=counts[3],
            store=f"neo4j:{self.uri}/{self.database}",
        )

    def clear(self) -> None:
        """Delete every :Entity/:Relation node (with their relationships) in batches, then
        this schema's constraints and indexes. Other labels in the database are left alone."""
        # CALL { } IN TRANSACTIONS needs an implicit (auto-commit) transaction: session.run.
        with self._driver.session(database=self.database) as session:
            session.run(statement("clear_data", DIALECT)).consume()
        for q in statements("clear_schema", DIALECT):
            self._run(q, write=True)
        self._dimension = None
