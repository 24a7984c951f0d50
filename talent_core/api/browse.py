"""The browsing endpoints of `talent serve`: `GET /v1/stats`, `GET /v1/entities?q=` (the
Explore page's search) and `GET /v1/entities/{id}/neighbours` (opaque, URL-safe ids)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from talent_core.api.auth import ApiError, Read
from talent_core.api.runtime import Rt
from talent_core.api.schemas import EdgeOut, EntityOut, Neighbours, entity_kg_id, entity_token
from talent_core.errors import TextInputError
from talent_core.text import check_question

router = APIRouter(tags=["browse"])


@router.get("/v1/stats")
def stats(_: Read, rt: Rt) -> dict[str, Any]:
    return rt.pipe.stats().model_dump()


@router.get("/v1/entities")
def entities(_: Read, rt: Rt, q: Annotated[str, Query(min_length=1)],
             k: Annotated[int, Query(ge=1, le=100)] = 10) -> dict[str, Any]:
    """Entities for a typed name: exact, the linking's fuzzy matches (when the
    retrieval settings link fuzzily), fulltext, vector: the Explore page's search."""
    rt.niced()
    from talent_core.explore import find_entities

    try:
        text = check_question(q, rt.settings.max_question_chars)
    except TextInputError as e:
        raise ApiError(422, str(e).replace("the question", "q"), field="q") from None
    pipe = rt.pipe
    cfg = pipe.retrieval
    found = find_entities(pipe.store, pipe.embedder, text, k=k,
                          fuzzy_threshold=cfg.link_threshold if cfg.fuzzy_link
                          else None)
    return {"query": text, "entities": [
        EntityOut(id=entity_token(m.entity.id), kg_id=m.entity.id, name=m.entity.name,
                  how=m.how, score=m.score).model_dump() for m in found[:k]]}

@router.get("/v1/entities/{eid}/neighbours")
def neighbours(eid: str, _: Read, rt: Rt,
               limit: Annotated[int | None, Query(ge=1, le=1000)] = None) -> Neighbours:
    """One entity's 1-hop neighbourhood (the Explore page's caps); ``eid``: the opaque
    id /v1/entities gives; ``limit``: its first ``limit`` neighbours by the store's
    stable key instead (the Explore graph's "more" on a double-click)."""
    from talent_core.explore import EXPLORE_CAPS, limit_caps, one_hop

    rt.niced()
    kg_id = entity_kg_id(eid)
    if kg_id is None:
        raise ApiError(404, f"{eid!r} is not an entity id (ids come from /v1/entities)")
    sub = one_hop(rt.pipe.store, kg_id, EXPLORE_CAPS if limit is None else limit_caps(limit))
    names = {n.id: n.name for n in sub.nodes}
    if kg_id not in names:
        raise ApiError(404, "no such entity in the store")
    return Neighbours(
        entity=EntityOut(id=eid, kg_id=kg_id, name=names[kg_id]),
        nodes=[EntityOut(id=entity_token(n.id), kg_id=n.id, name=n.name)
               for n in sub.nodes],
        edges=[EdgeOut(src=entity_token(e.src), rel=e.rel, dst=entity_token(e.dst))
               for e in sub.edges],
        truncated=sub.truncated)
