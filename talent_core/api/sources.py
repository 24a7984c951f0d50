"""The sources endpoints (issue 33): `GET /v1/sources` (read scope) lists each load with its
counts and the store's totals, as `talent sources --json`; `DELETE /v1/sources/{id}` (write
scope; the numeric id `GET /v1/sources` gives, so any name can be removed) or `DELETE
/v1/sources?name=NAME` unloads one, as `talent unload` (loaders/sources.py). A path segment
that is not a number is still read as a name (clients before ids). `create_app` includes
the router."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from talent_core.api.auth import ApiError, Read, Write
from talent_core.errors import OutputError, SourceError, StoreBusyError
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
    """Unload the source with this id (a number; anything else is read as a name): its
    triples no other source asserts, then the entities and relations left unused. Refused
    (409) while a load job is queued or running, or a CLI load, unload or replace holds the
    store's job lock: the sweeps would delete what a load wrote but has not linked yet."""
    return _unload(request, int(source) if re.fullmatch(r"[0-9]{1,18}", source) else source)


@router.delete("/v1/sources")
def delete_source_by_name(request: Request, _: Write,
                          name: Annotated[str, Query(min_length=1, max_length=4096)]
                          ) -> dict[str, Any]:
    """Unload the source named `name` (as `DELETE /v1/sources/{id}`)."""
    return _unload(request, name)


def _unload(request: Request, key: str | int) -> dict[str, Any]:
    rt = request.app.state.runtime
    busy = [j.id for j in list(rt.loads.jobs.values()) if j.status in ("queued", "running")]
    if busy:
        raise ApiError(409, f"load job(s) {', '.join(busy)} not finished: unload after them")
    try:
        change = unload_source(rt.pipe.store, key, rt.settings.batch_size, settings=rt.settings)
    except SourceError as e:
        raise ApiError(404, str(e)) from None
    except StoreBusyError as e:  # a `talent load` / `unload` beside the server
        raise ApiError(409, str(e)) from None
    except OutputError as e:  # the store cannot write (a full disk): the next try finishes it
        raise ApiError(507, str(e)) from None
    return change.model_dump(mode="json")
