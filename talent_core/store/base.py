"""The store contract: `GraphReader` (what retrieval and the pipeline read), `GraphWriter`
(what loaders and the CLI write and administer), `GraphStore` = both.

Data model (every store):
  (:Entity {id, name, name_lc, embedding})   id = the loader's key (the name for Freebase /
                                              MetaQA, the IRI for N-Triples); unique.
  (:Relation {name, embedding})               catalogue: each relation text embedded once.
  (:Entity)-[:REL {rel}]->(:Entity)           ONE relationship type with the relation text as
                                              a property. Freebase has thousands of relation
                                              types; a dynamic type per relation cannot be
                                              passed as a query parameter (it would need
                                              string-built Cypher or APOC), while a property
                                              keeps every statement parameterised and every
                                              neighbourhood query one pattern.
Similarity scores are cosine similarities (higher is closer) in every store; FalkorDB's
cosine distance is converted in its store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from talent_core.models import Edge, Entity, ScoredEntity, ScoredRelation, StoreStats, Subgraph

Vector = Sequence[float]

MAX_HOPS = 3  # the deepest neighbourhood expansion a store runs


def check_hops(hops: int, least: int = 0) -> int:
    """`hops` if `least <= hops <= MAX_HOPS`, else ValueError."""
    if not least <= int(hops) <= MAX_HOPS:
        raise ValueError(f"hops must be between {least} and {MAX_HOPS}, got {hops}")
    return int(hops)


HUB_SCAN = 500  # default hub cap (bench/results/hub_scan_sweep.json)


class ExpansionCaps(BaseModel):
    """Caps of one neighbourhood expansion (`RetrievalConfig.caps()` builds them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fanout: int = Field(ge=1, description="edges followed per node and hop")
    max_nodes: int = Field(ge=1, description="total node cap")
    max_edges: int = Field(ge=0, description="total edge cap")
    hub_scan: int = Field(
        HUB_SCAN, ge=1, description="incident edges a database store reads per node and hop "
        "before its key order applies (at least fanout + 1): a hub costs this many rows, not "
        "a sort of all its edges; the in-memory reference sorts all"
    )


@runtime_checkable
class GraphReader(Protocol):
    dialect: str  # "neo4j", "falkordb" or "memory"

    def top_entities(self, vector: Vector, k: int) -> list[ScoredEntity]:
        """Vector top-k over entity embeddings, best first."""

    def top_relations(self, vector: Vector, k: int) -> list[ScoredRelation]:
        """Vector top-k over the relation catalogue, best first."""

    def entities_by_name(self, names: Sequence[str]) -> list[Entity]:
        """Exact, case-insensitive name match (normalised: lowercase, collapsed spaces)."""

    def entities_by_id(self, ids: Sequence[str]) -> list[Entity]:
        """Entities for the given ids (missing ids are skipped)."""

    def search_names(self, text: str, k: int) -> list[Entity]:
        """Fulltext search over entity names, best first."""

    def fuzzy_names(self, text: str, k: int) -> list[Entity]:
        """Entities whose name holds EVERY word of ``text``, each within its allowed edits
        (`text.fuzzy_terms`: 0 for short words and numbers, else 1 or 2), case-insensitive;
        at most ``k``, best first by the fulltext index's score (entity linking rescores
        them, so only membership is the contract)."""

    def neighbourhood(self, seed_ids: Sequence[str], hops: int, caps: ExpansionCaps) -> Subgraph:
        """Undirected n-hop expansion within `caps`; `truncated` says when a cap cut."""

    def follow(self, ids: Sequence[str], rel: str, limit: int) -> list[tuple[str, str]]:
        """(id, neighbour id) for every neighbour of each of `ids` over relation `rel`,
        direction ignored: at most `limit` per node, in neighbour-id order."""

    def triples_among(self, ids: Sequence[str], rels: Sequence[str]) -> list[Edge]:
        """The KG's triples between two of ``ids`` whose relation is one of ``rels``, in their
        own direction, sorted (an evidence path's hops, found by `follow`, which ignores
        direction)."""

    def entity_similarity(self, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        """Cosine similarity of `vector` to each stored entity embedding."""

    def relation_similarity(self, names: Sequence[str], vector: Vector) -> dict[str, float]:
        """Cosine similarity of `vector` to each catalogue relation embedding."""

    def entity_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embeddings of the given entities, L2-normalised float32 (ids without
        one are skipped): the learned retrievers' features (SubgraphRAG, GRAG)."""

    def relation_vectors(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embeddings of the given catalogue relations, L2-normalised float32."""

    def stats(self) -> StoreStats: ...

    def close(self) -> None: ...


@runtime_checkable
class GraphWriter(Protocol):
    def ensure_schema(self, dimension: int) -> None:
        """Constraints, name index, fulltext index, vector indexes (idempotent)."""

    # batched, idempotent: MERGE on keys
    def upsert_entities(self, rows: Sequence[tuple[str, str, Vector | None]]) -> None:
        """(id, name, embedding) rows."""

    def upsert_relations(self, rows: Sequence[tuple[str, Vector | None]]) -> None:
        """(name, embedding) rows of the relation catalogue."""

    def upsert_triples(self, edges: Sequence[Edge]) -> None:
        """Edges between entities that already exist (upsert entities first)."""

    def existing_entities(self, ids: Sequence[str]) -> set[str]:
        """The ids among `ids` already stored WITH an embedding."""

    def existing_relations(self, names: Sequence[str]) -> set[str]:
        """The relation names among `names` already in the catalogue with an embedding."""

    def stats(self) -> StoreStats: ...

    def clear(self) -> None:
        """Delete every node, relationship and index of this graph."""

    def close(self) -> None: ...


@runtime_checkable
class GraphStore(GraphReader, GraphWriter, Protocol):
    """A store both sides use: the FalkorDB and Neo4j stores."""
