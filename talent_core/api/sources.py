"""The sources endpoints (issue 33): `GET /v1/sources` (read scope) lists each load with its
counts and the store's totals, as `talent sources --json`; `DELETE /v1/sources/{source}`
(write scope; a name or an id) unloads one, as `talent unload` (loaders/sources.py).
`create_app` includes the router."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from talent_core.api.auth import ApiError, Read, Write
from talent_core.errors import SourceError, StoreBusyError
from talent_core.loaders.sources import list_sources, unload_source

router = APIRouter(tags=["sources"])


@router.get("/v1/sources")
def get_sources(request: Request, _: Read) -> dict[str, Any]:
    """Each source with the triples it asserts (`only`: those no other source asserts) and
    the store's totals."""
    rt = request.app.state.runtime
    return list_sources(rt.pipe.store).model_dump(mode="json")


@router.delete("/v1/sources/{source}")
def delete_source(source: str, request: Request, _: Write) -> dict[str, Any]:
    """Unload a source: its triples no other source asserts, then the entities and relations
    left unused. Refused (409) while a load job is queued or running, or a CLI load,
    unload or replace holds the store's job lock: the sweeps would delete what a load
    wrote but has not linked yet."""
    rt = request.app.state.runtime
    busy = [j.id for j in list(rt.loads.jobs.values()) if j.status in ("queued", "running")]
    if busy:
        raise ApiError(409, f"load job(s) {', '.join(busy)} not finished: unload after them")
    try:
        change = unload_source(rt.pipe.store, source, rt.settings.batch_size,
                               settings=rt.settings)
    except SourceError as e:
        raise ApiError(404, str(e)) from None
    except StoreBusyError as e:  # a `talent load` / `unload` beside the server
        raise ApiError(409, str(e)) from None
    return change.model_dump(mode="json")
