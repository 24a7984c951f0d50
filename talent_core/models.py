"""Typed records handed between pipeline stages and modules."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Triple(_Frozen):
    """One fact as a loader reads it: entity keys and the relation text."""

    head: str
    relation: str
    tail: str
    head_name: str | None = None  # display names when they differ from the keys (N-Triples)
    tail_name: str | None = None


class Entity(_Frozen):
    id: str
    name: str


class Relation(_Frozen):
    name: str


class ScoredEntity(_Frozen):
    entity: Entity
    score: float  # cosine similarity in [-1, 1], higher is closer (both stores)


class ScoredRelation(_Frozen):
    name: str
    score: float


class Edge(_Frozen):
    src: str  # entity id
    rel: str
    dst: str  # entity id


class Subgraph(BaseModel):
    """Nodes and edges with their text; what the store returns for a neighbourhood."""

    nodes: list[Entity] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    truncated: bool = False  # a fan-out or total cap cut the expansion

    def node_ids(self) -> set[str]:
        return {n.id for n in self.nodes}


class StoreStats(BaseModel):
    entities: int
    relations: int
    triples: int
    entities_with_embedding: int = 0
    store: str = ""
