"""The HTTP API of `talent serve` (FastAPI): the CLI's Pipeline behind Bearer API keys.

`create_app` assembles it: the gate (every request's key and body size, before its body is
read: api/gate.py), one error shape (`{"error": {"code", "message"}}`), the health routes,
and one router per resource, each calling the library: ask (retrieve, ask, stance),
chat (OpenAI-compatible), browse (stats, entities), loads, sources. What the requests share
(the Pipeline, the model slots and workers, the load jobs) is the `Runtime`
(api/runtime.py). Every endpoint is a plain function run on the server's thread pool, so
retrieval and browsing run concurrently while the language-model stages queue for a slot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from talent_core.api.ask import router as ask_router
from talent_core.api.auth import STATUS_CODES, ApiError, Read, error_response
from talent_core.api.browse import router as browse_router
from talent_core.api.chat import router as chat_router
from talent_core.api.gate import Gate
from talent_core.api.loads import (
    disk_full,
    disk_full_error,
    remove_stale_job_dirs,
    upload_too_large,
)
from talent_core.api.loads import router as loads_router
from talent_core.api.planner import router as planner_router
from talent_core.api.runtime import Runtime
from talent_core.api.sources import router as sources_router
from talent_core.config import Settings, get_settings
from talent_core.errors import ApiKeyError, EmbeddedServerError, LLMServerError, TalentError

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None,
               pipeline_factory: Callable[[], Any] | None = None,
               announce: tuple[str, int] | None = None, local: bool = False) -> FastAPI:
    """The API on ``settings`` (default: the environment's); ``pipeline_factory`` builds the
    one Pipeline (tests pass their own); ``announce`` (host, port): write the discovery file
    in the data dir once started (`talent ask` finds the server there), remove it at
    shutdown; ``local``: the warm model process of `talent ask`, served on a unix socket in
    the data dir and nowhere else, without keys (api/local.py)."""
    settings = settings or get_settings()
    rt = Runtime(settings, pipeline_factory)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        from starlette.concurrency import run_in_threadpool

        from talent_core.api.client import remove_discovery, write_discovery

        remove_stale_job_dirs()  # the folders of a server killed mid-upload
        try:  # the store opened now: an unload killed before this start is finished first
            await run_in_threadpool(lambda: rt.pipe)
        except Exception as e:  # said by /readyz and every request; the server still starts
            log.error("the store cannot be opened: %s: %s", type(e).__name__, e)
        if settings.api_preload:  # in the background: /readyz says when it is done
            threading.Thread(target=rt.warm_quietly, name="talent-preload", daemon=True).start()
        if announce is not None:
            write_discovery(settings.data_dir, *announce)
        try:
            yield
        finally:
            if announce is not None:
                remove_discovery(settings.data_dir)
            for job in getattr(app.state, "adapt_jobs", {}).values():
                job.cancel()  # a running adaptation ends with its server
            rt.close()

    docs = settings.api_docs  # served without a key: the routes, no data (README says so)
    app = FastAPI(title="TaLenT GraphQA", version="1", lifespan=lifespan,
                  summary="Question answering over the loaded KG; Bearer API keys "
                  "(`talent keys create`).", docs_url="/docs" if docs else None,
                  redoc_url="/redoc" if docs else None,
                  openapi_url="/openapi.json" if docs else None)
    app.state.runtime = rt
    # every request's key and body size, before its body is read (api/gate.py)
    app.add_middleware(
        Gate, body_limit=settings.api_max_body_kb * 1024,
        upload_limit=settings.max_upload_mb * 1024 * 1024,
        body_message=f"the request body is larger than the limit of "
                     f"{settings.api_max_body_kb} KB (TALENT_API_MAX_BODY_KB)",
        upload_message=upload_too_large(settings), local=local)

    # --- errors: always {"error": {"code", "message"}} ----------------------------------
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, e: ApiError) -> JSONResponse:
        return error_response(e.status, e.code, e.message, e.field, e.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        if disk_full(e):  # a form spooled to a full temporary folder (FastAPI says 400)
            log.error("request refused, the disk is full: %s", e.__cause__)
            full = disk_full_error()
            return error_response(full.status, full.code, full.message)
        return error_response(e.status_code, STATUS_CODES.get(e.status_code, "error"),
                              str(e.detail), headers=getattr(e, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        err = e.errors()[0] if e.errors() else {"loc": (), "msg": "invalid request"}
        loc = [str(x) for x in err.get("loc", ())]
        if loc and loc[0] in ("body", "query", "path", "header"):  # where, not which field
            loc = loc[1:]
        field = ".".join(loc) or None
        msg = str(err.get("msg", "invalid"))
        return error_response(422, "invalid_request",
                              f"{field}: {msg}" if field else msg, field)

    @app.exception_handler(TalentError)
    async def _talent_error(_: Request, e: TalentError) -> JSONResponse:
        # the server's own state (keys file, store server) is not the client's fault, and
        # its details (paths) stay in the server's log
        if isinstance(e, ApiKeyError | EmbeddedServerError):
            log.error("request refused, the server is misconfigured: %s", e)
            return error_response(503, STATUS_CODES[503], "server misconfigured: "
                                  f"{type(e).__name__} (see the server log)")
        if isinstance(e, LLMServerError):  # the language-model server behind this one
            log.error("%s", e)
            return error_response(502, STATUS_CODES[502], str(e))
        return error_response(422, STATUS_CODES[422], str(e))

    @app.exception_handler(Exception)
    async def _internal(_: Request, e: Exception) -> JSONResponse:
        log.error("request failed: %s: %s", type(e).__name__, e, exc_info=e)
        if disk_full(e):
            return error_response(507, "disk_full", "the server's disk is full; see the "
                                  "server log")
        # the details (paths, queries) stay in the server's log
        return error_response(500, "internal", f"internal error ({type(e).__name__}); see "
                              "the server log")

    # --- health ---------------------------------------------------------------------------
    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, Any]:
        """The process answers (no key needed)."""
        return {"status": "ok", "uptime_s": round(time.time() - rt.started, 1)}

    @app.get("/readyz", tags=["health"])
    def readyz(_: Read) -> dict[str, Any]:
        """200 once an ask would wait for nothing: the store answers and, with
        TALENT_API_PRELOAD (the default), the models are loaded; else 503 saying which. The
        body: the store, whether the models are loaded, the model queue."""
        try:
            stats = rt.pipe.stats()
        except Exception as e:  # its details (paths) stay in the server's log
            log.error("the store is not ready: %s: %s", type(e).__name__, e)
            raise ApiError(503, f"the store is not ready ({type(e).__name__}; see the server "
                           "log)") from None
        if rt.warm_error is not None:
            raise ApiError(503, "the language models failed to load (see the server log)",
                           code="not_ready")
        if settings.api_preload and not rt.models.models_loaded:
            raise ApiError(503, "the language models are still loading (TALENT_API_PRELOAD): "
                           "an ask now would wait for them", code="not_ready",
                           headers={"Retry-After": "5"})
        return {"ready": True, "store": stats.store, "triples": stats.triples,
                "models_loaded": rt.models.models_loaded,
                "llm": {"slots": rt.llm.slots, "running": rt.llm.running,
                        "admitted": rt.llm.admitted, "queue": rt.llm.queue,
                        "busy_s": round(rt.llm.busy_s, 2)}}

    for router in (ask_router, chat_router, browse_router, loads_router, sources_router,
                   planner_router):
        app.include_router(router)
    return app
