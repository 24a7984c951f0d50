"""Production store: Neo4j 5.x through the official `neo4j` driver (Bolt).

Every statement is a file under cypher/neo4j/ and every value a query parameter. Writes are
`UNWIND $rows` batches that MERGE on uniqueness constraints, so re-loading is a no-op. Scores
are cosine similarities: Neo4j's vector index and `vector.similarity.cosine` return
(1 + cos) / 2, which the statements map back to cos. Reads and writes are `CypherStore`'s.
"""

from __future__ import annotations

import logging
from typing import Any

import neo4j
import numpy as np
from neo4j import GraphDatabase, RoutingControl

from talent_core.store.base import Vector
from talent_core.store.cypher import statement, statements
from talent_core.store.cypher_store import CypherStore, Row
from talent_core.text import lucene_fuzzy_query, lucene_query

log = logging.getLogger(__name__)


class Neo4jStore(CypherStore):
    """GraphStore on a Neo4j 5.x database (the contract suite runs on 5.26 LTS: tests/neo4j)."""

    dialect = "neo4j"

    def __init__(
        self,
        uri: str,
        user: str = "neo4j",
        password: str | None = None,
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
        if driver is None and not password:
            raise ValueError("Neo4j needs a password: set NEO4J_PASSWORD (there is no default)")
        self._driver = driver or GraphDatabase.driver(uri, auth=(user, password))
        try:
            self._driver.verify_connectivity()
        except Exception as e:
            self._driver.close()
            raise ConnectionError(
                f"cannot reach Neo4j at {uri} (database {database!r}): {e}. "
                "Start it (`make neo4j-up`, or `docker compose up -d neo4j`) and check "
                "NEO4J_URI/USER/PASSWORD."
            ) from e

    @classmethod
    def from_settings(cls, settings: Any) -> Neo4jStore:
        if not settings.neo4j_uri:
            raise ValueError("TALENT_STORE=neo4j needs NEO4J_URI (e.g. bolt://localhost:7687)")
        if not settings.neo4j_password:
            raise ValueError("TALENT_STORE=neo4j needs NEO4J_PASSWORD (there is no default)")
        return cls(
            settings.neo4j_uri,
            settings.neo4j_user,
            settings.neo4j_password,
            settings.neo4j_database,
            batch_size=settings.batch_size,
        )

    def __repr__(self) -> str:
        return f"Neo4jStore({self.uri!r}, database={self.database!r})"

    @property
    def location(self) -> str:
        return f"neo4j:{self.uri}/{self.database}"

    # --- plumbing --------------------------------------------------------------------------
    def _run(
        self, text: str, params: dict[str, Any] | None = None, write: bool = False
    ) -> list[Row]:
        records, _, _ = self._driver.execute_query(
            text,
            params or {},
            routing_=RoutingControl.WRITE if write else RoutingControl.READ,
            database_=self.database,
        )
        return [tuple(r.values()) for r in records]

    def _fulltext_query(self, text: str) -> str:
        return lucene_query(text)

    def _fuzzy_query(self, text: str) -> str:
        return lucene_fuzzy_query(text)

    def _topk_params(self, k: int, vector: Vector) -> dict[str, Any]:
        # Lucene's HNSW search explores as many candidates as it returns: at least 50 of
        # them, the best k kept (cypher/neo4j/top_entities.cypher; the recall by size:
        # bench/neo4j_vector_probe.py)
        return {**super()._topk_params(k, vector), "fetch": max(2 * int(k) + 10, 50)}

    def _vector_rows(self, fields: dict[str, list[str]], vectors: np.ndarray) -> list[dict]:
        cols = list(fields.items())
        return [
            {**{name: col[i] for name, col in cols}, "embedding": vec}
            for i, vec in enumerate(vectors.tolist())
        ]

    def close(self) -> None:
        self._driver.close()

    # --- schema --------------------------------------------------------------------------
    def _create_schema(self, dimension: int) -> None:
        for q in statements("schema", self.dialect):  # IF NOT EXISTS: idempotent
            self._run(q, {"dimension": dimension}, write=True)
        self._run(statement("await_indexes", self.dialect), {"timeout": self.index_timeout})

    def clear(self) -> None:
        """Delete every :Entity/:Relation node (with their relationships) in batches, then
        this schema's constraints and indexes. Other labels in the database are left alone."""
        # CALL { } IN TRANSACTIONS needs an implicit (auto-commit) transaction: session.run.
        with self._driver.session(database=self.database) as session:
            session.run(statement("clear_data", self.dialect)).consume()
        for q in statements("clear_schema", self.dialect):
            self._run(q, write=True)
        self._dimension = None
