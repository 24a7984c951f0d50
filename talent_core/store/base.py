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
  (:Entity)-[:REL {rel, sources}]->(:Entity)  `sources`: ids of the loads asserting the
                                              triple (absent: the `legacy` source 0).
  (:Source {id, name, sha256, format, ...})   one per load (`SourceStore`).
Similarity scores are cosine similarities (higher is closer) in every store; FalkorDB's
cosine distance is converted in its store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from talent_core.models import (
    Edge,
    Entity,
    NameCollision,
    ScoredEntity,
    ScoredRelation,
    SourceRecord,
    StoreStats,
    Subgraph,
)

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

    def relations_at(self, ids: Sequence[str]) -> set[str]:
        """The relation types on the edges of ``ids`` (either direction), uncapped."""

    def entity_ids(self, after: str, limit: int) -> list[str]:
        """At most ``limit`` entity ids greater than ``after``, in id order (a page)."""

    def follow(self, ids: Sequence[str], rel: str, limit: int) -> list[tuple[str, str]]:
        """(id, neighbour id) for every neighbour of each of `ids` over relation `rel`,
        direction ignored: at most `limit` per node, in neighbour-id order."""

    def triples_among(self, ids: Sequence[str], rels: Sequence[str]) -> list[Edge]:
        """The KG's triples between two of ``ids`` whose relation is one of ``rels``, in their
        own direction, sorted (an evidence path's hops, found by `follow`, which ignores
        direction)."""

    def count_follow(self, ids: Sequence[str], rel: str, exclude: Sequence[str] = ()) -> int:
        """How many distinct nodes the nodes of ``ids`` reach over relation ``rel``
        (direction ignored, as `follow`), ``exclude`` not counted: the last hop of a
        counted path, computed in the store without fetching the nodes (`operators`)."""

    def member_values(self, ids: Sequence[str], rel: str) -> list[tuple[str, str, str]]:
        """(node id, value id, value name) for each triple (node, ``rel``, value) of each
        node of ``ids``, in the triple's own direction (a value is what its node states),
        sorted: what a filter, a superlative or a comparison reads (`operators`)."""

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

    def upsert_triples(self, edges: Sequence[Edge], source: int | None = None) -> int:
        """Edges between entities that already exist (upsert entities first), asserted by
        the source `source` (an id >= 1; None: a legacy write that records no source).
        Returns how many of the assertions are new (0 for a legacy write)."""

    def existing_entities(self, ids: Sequence[str]) -> set[str]:
        """The ids among `ids` already stored WITH an embedding."""

    def existing_relations(self, names: Sequence[str]) -> set[str]:
        """The relation names among `names` already in the catalogue with an embedding."""

    def entities_without_vectors(self, limit: int) -> list[tuple[str, str]]:
        """(id, name) of the first ``limit`` entities, in id order, stored without an
        embedding: what `talent vectors` fills next."""

    def set_entity_vectors(self, rows: Sequence[tuple[str, Vector]]) -> int:
        """(id, embedding) rows for entities stored without one: an entity missing from the
        store is not created, one with an embedding keeps it. How many were set."""

    def stats(self) -> StoreStats: ...

    def clear(self) -> None:
        """Delete every node, relationship and index of this graph."""

    def close(self) -> None: ...


@runtime_checkable
class SourceStore(Protocol):
    """Which source asserts which triple (issue 33): every store (the two database stores
    and the in-memory one) implements it; loaders/sources.py runs unload / replace on it.

    A triple keeps the ids of the sources asserting it (`sources`, a list of integers on
    the relationship); a triple without the list belongs to the `legacy` source 0 (a store
    loaded before sources were recorded). A Source record (:Source node) per load holds
    its name, sha256, format, time and load counts."""

    def source_records(self) -> list[SourceRecord]: ...

    def source_counts(self) -> dict[int, tuple[int, int]]:
        """Source id -> (triples it asserts, triples only it asserts); 0: legacy."""

    def put_source(self, record: SourceRecord) -> None:
        """Create or update a Source record (idempotent)."""

    def delete_source(self, source: int) -> None: ...

    def next_source_id(self) -> int:
        """1 + the highest Source id (1 when there is none)."""

    def retract_all(self, source: int, batch: int,
                    touched: set[str] | None = None) -> tuple[int, int]:
        """Take back every assertion of `source`: (triples deleted, still asserted);
        `touched` gets the endpoints of the deleted triples."""

    def retract(self, source: int, triples: Sequence[tuple[str, str, str]]) -> tuple[int, int]:
        """Take back `source`'s assertion of `triples`: (triples deleted, still asserted)."""

    def source_triples(self, source: int) -> set[tuple[str, str, str]]: ...

    def triple_sources(self, triples: Sequence[tuple[str, str, str]]
                       ) -> dict[tuple[str, str, str], list[int]]:
        """The source ids asserting each stored triple of `triples` (legacy: [0]); a
        triple the store does not hold is left out."""

    def sweep_entities(self, batch: int, among: Sequence[str] | None = None) -> int:
        """Delete the entities without any triple (with their vectors): all, or those of
        `among`; how many."""

    def sweep_relations(self) -> int:
        """Delete the catalogue relations no triple uses: how many."""

    def name_collisions(self, ids_per_name: int = 5) -> list[NameCollision]:
        """Normalised names several entities share, most shared first."""


@runtime_checkable
class GraphStore(GraphReader, GraphWriter, Protocol):
    """A store both sides use: the FalkorDB and Neo4j stores."""
