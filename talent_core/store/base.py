"""The GraphStore Protocol: what the pipeline and loaders need from a graph database.

Data model (both stores):
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
Similarity scores are cosine similarities (higher is closer) on both stores; FalkorDB's
cosine distance is converted in its store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from talent_core.models import Edge, Entity, ScoredEntity, ScoredRelation, StoreStats, Subgraph

Vector = Sequence[float]


@runtime_checkable
class GraphStore(Protocol):
    dialect: str  # "neo4j" or "falkordb"

    # --- schema ------------------------------------------------------------------------
    def ensure_schema(self, dimension: int) -> None:
        """Constraints, name index, fulltext index, vector indexes (idempotent)."""

    # --- writes (batched, idempotent: MERGE on keys) -----------------------------------
    def upsert_entities(self, rows: Sequence[tuple[str, str, Vector]]) -> None:
        """(id, name, embedding) rows."""

    def upsert_relations(self, rows: Sequence[tuple[str, Vector]]) -> None:
        """(name, embedding) rows of the relation catalogue."""

    def upsert_triples(self, edges: Sequence[Edge]) -> None:
        """Edges between entities that already exist (upsert entities first)."""

    def existing_entities(self, ids: Sequence[str]) -> set[str]:
        """The ids among `ids` already stored WITH an embedding."""

    def existing_relations(self, names: Sequence[str]) -> set[str]:
        """The relation names among `names` already in the catalogue with an embedding."""

    # --- reads ---------------------------------------------------------------------------
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

    def neighbourhood(
        self,
        seed_ids: Sequence[str],
        hops: int = 2,
        fanout: int = 50,
        max_nodes: int = 2000,
        max_edges: int = 5000,
    ) -> Subgraph:
        """Undirected n-hop expansion; at most `fanout` edges followed per node and hop,
        at most `max_nodes`/`max_edges` in total; `truncated` says when a cap cut."""

    def entity_similarity(self, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        """Cosine similarity of `vector` to each stored entity embedding."""

    def relation_similarity(self, names: Sequence[str], vector: Vector) -> dict[str, float]:
        """Cosine similarity of `vector` to each catalogue relation embedding."""

    def stats(self) -> StoreStats: ...

    def clear(self) -> None:
        """Delete every node, relationship and index of this graph."""

    def close(self) -> None: ...
