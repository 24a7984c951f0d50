"""The HTTP API of `talent serve` (FastAPI): the CLI's Pipeline behind Bearer API keys.

One `Pipeline` per process (store opened, models loaded once, lazily or at startup with
TALENT_API_PRELOAD); every endpoint is a plain function run on the server's thread pool, so
retrieval and browsing run concurrently; the language-model stages go through one bounded
slot queue (`LlmSlots`: TALENT_API_LLM_SLOTS at once, TALENT_API_LLM_QUEUE waiting, 429
past that). Loads run one at a time on a worker thread at a lower CPU priority
(`LoadJobs`, TALENT_API_LOAD_NICE), from an upload or a server-side path under
TALENT_API_LOAD_DIRS.

A streamed ask (`stream: true`) sends Server-Sent Events in stage order: seeds, candidate,
selection, plan, answer, done. The pipeline has no per-stage hooks inside its language-model
half, so seeds and candidate are sent when retrieval ends, and selection, plan and answer
together when `Pipeline.answer` returns. While it waits for a model slot, a streamed ask
sends SSE comments (`: queued ...`): a client that went away is noticed there and leaves the
queue; one that goes away while its model stage runs frees the slot when that stage ends.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, File, Form, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from pydantic import ValidationError
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from talent_core.api.auth import (
    STATUS_CODES,
    ApiError,
    Read,
    Write,
    error_response,
)
from talent_core.api.keys import KeyStore
from talent_core.api.schemas import (
    AskRequest,
    ChatRequest,
    EdgeOut,
    EntityOut,
    LoadJobOut,
    Neighbours,
    PathLoadRequest,
    RetrieveRequest,
    StanceRequestIn,
    entity_kg_id,
    entity_token,
    load_options,
)
from talent_core.api.sources import router as sources_router
from talent_core.api.workers import ModelWorkers
from talent_core.config import Settings, get_settings
from talent_core.errors import (
    ApiKeyError,
    EmbeddedServerError,
    RetrievalSettingsError,
    SourceError,
    TalentError,
    TextInputError,
)
from talent_core.text import check_question, safe_upload_name

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0  # seconds between the SSE comments a queued streamed ask sends
def input_error(e: TalentError, field: str | None = None) -> ApiError:
    """A 422 for a bad question or retrieval override, naming the field."""
    if isinstance(e, RetrievalSettingsError) and e.problems:
        field = "retrieval." + e.problems[0][0]
    return ApiError(422, str(e), field=field)


class LlmSlots:
    """The bounded queue of language-model work: ``slots`` run at once, ``queue`` more wait;
    `admit` refuses the next one (429) instead of letting it wait without bound."""

    def __init__(self, slots: int, queue: int):
        self.slots, self.queue = slots, queue
        self._sem = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.admitted = 0  # running + waiting
        self.running = 0
        self.busy_s = 0.0  # seconds a model slot was held, summed (its use over time)

    def admit(self) -> Slot:
        with self._lock:
            if self.admitted >= self.slots + self.queue:
                raise ApiError(429, f"the model queue is full ({self.slots} running, "
                               f"{self.queue} waiting): retry later", code="busy",
                               headers={"Retry-After": "2"})
            self.admitted += 1
        return Slot(self)


class Slot:
    """One admitted request: `with slot:` holds a model slot; `release` (idempotent) leaves
    the queue, also when a streaming client went away."""

    def __init__(self, owner: LlmSlots):
        self.owner = owner
        self._held = False
        self._done = False
        self._since = 0.0
        self._lock = threading.Lock()

    def acquire(self, timeout: float | None = None) -> bool:
        """Hold a model slot (at once if held already); False when ``timeout`` passed."""
        if self._held:
            return True
        if not self.owner._sem.acquire(timeout=timeout):
            return False
        with self._lock:
            self._held = True
            self._since = time.perf_counter()
        with self.owner._lock:
            self.owner.running += 1
        return True

    def __enter__(self) -> Slot:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            held, self._held = self._held, False
        if held:
            with self.owner._lock:
                self.owner.running -= 1
                self.owner.busy_s += time.perf_counter() - self._since
            self.owner._sem.release()

    def release(self) -> None:
        self.__exit__()
        with self._lock:
            done, self._done = self._done, True
        if not done:
            with self.owner._lock:
                self.owner.admitted -= 1


def background_priority(nice: int) -> None:
    """Lower the CPU priority of the calling thread (and of the threads it starts: the
    loader's writer, its embedding threads) by ``nice`` on Linux; elsewhere nothing."""
    if nice <= 0:
        return
    try:
        tid = threading.get_native_id()  # relative: a server started niced stays below it
        os.setpriority(os.PRIO_PROCESS, tid, min(os.getpriority(os.PRIO_PROCESS, tid) + nice,
                                                 19))
    except (AttributeError, OSError) as e:
        log.info("a thread keeps its priority: %s", e)


_niced = threading.local()


def request_priority(nice: int) -> None:
    """Once per request thread: lower it by ``nice`` (a raised nice cannot be undone without
    privileges, hence the model work's own threads, `workers.ModelWorkers`)."""
    if not getattr(_niced, "done", False):
        _niced.done = True
        background_priority(nice)


class NoSlot:
    """The `Slot` of a request that runs no model (an ask in mode "retrieval")."""

    def acquire(self, timeout: float | None = None) -> bool:
        return True

    def __enter__(self) -> NoSlot:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def release(self) -> None:
        pass


class Runtime:
    """What the server holds for every request: the settings, the keys, the one Pipeline
    (built on first use), the model slots and the load jobs."""

    def __init__(self, settings: Settings, pipeline_factory: Callable[[], Any] | None = None):
        self.settings = settings
        self.keys = KeyStore(settings.data_dir)
        self.llm = LlmSlots(settings.api_llm_slots, settings.api_llm_queue)
        self._factory = pipeline_factory or self._default_pipeline
        # the default pipeline's models run in child processes; an injected one's in-thread
        in_process = pipeline_factory is not None or not settings.api_model_process
        self.models = ModelWorkers(settings.api_llm_slots,
                                   settings=None if in_process else settings,
                                   pipe=lambda: self.pipe)  # fmt: skip
        self._pipe: Any = None
        self._pipe_lock = threading.Lock()
        self.loads = LoadJobs(self)
        self.started = time.time()

    def _default_pipeline(self) -> Any:
        from talent_core.pipeline import Pipeline

        return Pipeline(settings=self.settings)

    @property
    def pipe(self) -> Any:
        if self._pipe is None:
            with self._pipe_lock:
                if self._pipe is None:
                    self._pipe = self._factory()
        return self._pipe

    def warm(self) -> None:
        """Load what the first ask would (TALENT_API_PRELOAD): the language models (in the
        model workers), the planner and the query embedder (one encode loads its weights)."""
        self.models.warm()
        pipe = self.pipe
        pipe.embedder.encode(["warm up"])
        pipe.planner  # noqa: B018  (loads the planner once)

    def niced(self) -> None:
        """The calling request thread at the browse priority (see `ModelWorkers`)."""
        request_priority(self.settings.api_browse_nice)

    def close(self) -> None:
        self.loads.stop()
        self.models.close()
        if self._pipe is not None:
            self._pipe.close()


# --- load jobs ---------------------------------------------------------------------------


class LoadJob:
    """One file to load (an upload's copy, or a server-side path); its progress comes from
    the loader's `on_commit`."""

    def __init__(self, tmp: Path, path: Path, fmt: str | None, on_error: str, source: str,
                 owned: bool = True, replace: str | None = None,
                 options: dict[str, Any] | None = None):
        self.id = uuid.uuid4().hex[:12]
        self.tmp, self.path, self.format, self.on_error, self.source = (
            tmp, path, fmt, on_error, source)
        self.replace = replace  # the source this file replaces (`talent load --replace`)
        self.options = options or {}  # delimiter, columns, limit, dry_run (`talent load`'s)
        self.owned = owned  # an upload's copy (removed once loaded), not a server-side file
        self.rejects = tmp / "rejects.jsonl" if on_error == "skip" else None
        self.status = "queued"
        self.total_rows: int | None = None
        self.rows = 0
        self.triples = 0
        self.t0: float | None = None
        self.seconds = 0.0
        self.result: dict[str, Any] | None = None
        self.error: tuple[str, str] | None = None
        self.cancel = threading.Event()  # DELETE /v1/loads/{id}: stop at a batch boundary

    def out(self) -> LoadJobOut:
        el = (time.perf_counter() - self.t0) if self.t0 and self.status == "running" \
            else self.seconds
        rate = self.triples / el if el else 0.0
        row_rate = self.rows / el if el else 0.0
        eta = ((self.total_rows - self.rows) / row_rate
               if self.total_rows and row_rate and self.status == "running" else None)
        return LoadJobOut(
            id=self.id, status=self.status, source=self.source, format=self.format or "auto",
            progress={"rows": self.rows, "total_rows": self.total_rows,
                      "triples": self.triples, "triples_per_s": round(rate, 1),
                      "elapsed_s": round(el, 2), "eta_s": None if eta is None else round(eta, 1)},
            result=self.result,
            error=None if self.error is None else {"code": self.error[0],
                                                    "message": self.error[1]},
            rejects=bool(self.rejects and self.rejects.is_file()),
        )


def count_rows(path: Path) -> int | None:
    """Lines of a plain-text upload (for the ETA); None for a compressed one."""
    if path.suffix in (".gz", ".bz2", ".xz", ".zip"):
        return None
    n = 0
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            n += chunk.count(b"\n")
    return n


class LoadJobs:
    """Load jobs run one at a time, in arrival order, on one worker thread."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.jobs: dict[str, LoadJob] = {}
        self._queue: list[LoadJob] = []
        self._cond = threading.Condition()
        self._stop = False
        self._worker: threading.Thread | None = None

    def submit(self, job: LoadJob) -> None:
        with self._cond:
            self.jobs[job.id] = job
            self._queue.append(job)
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, daemon=True,
                                                name="api-loads")
                self._worker.start()
            self._cond.notify()

    def stop(self) -> None:
        """No further job starts; the kept rejects files go (the running load, if any,
        ends with the process)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
            for job in self.jobs.values():
                if job.status not in ("queued", "running"):
                    shutil.rmtree(job.tmp, ignore_errors=True)

    def _run(self) -> None:
        # loads are background work: the answers keep their pace while one runs
        background_priority(self.rt.settings.api_load_nice)
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                job = self._queue.pop(0)
            self._one(job)

    def cancel(self, job: LoadJob) -> None:
        """A queued job leaves the queue (nothing of it was written); a running one stops at
        its next batch boundary (the batches before stay complete), as the UI's Cancel."""
        with self._cond:
            if job in self._queue:
                self._queue.remove(job)
                job.status = "cancelled"
                shutil.rmtree(job.tmp, ignore_errors=True)  # ours; a server-side file stays
                return
        job.cancel.set()

    def _one(self, job: LoadJob) -> None:
        def on_commit(p: Any) -> None:  # the loader's writer thread
            job.rows, job.triples = p.through_line, p.triples_committed

        job.status, job.t0 = "running", time.perf_counter()
        try:
            job.total_rows = count_rows(job.path)
            options = {"on_commit": on_commit, "progress": False, "on_error": job.on_error,
                       "rejects": job.rejects, "cancel": job.cancel.is_set, **job.options}
            change = None
            if job.replace is None:
                report = self.rt.pipe.load(job.path, job.format, **options)
            else:
                from talent_core.loaders.sources import replace_source

                report, change = replace_source(job.path, job.replace, job.format,
                                                store=self.rt.pipe.store,
                                                settings=self.rt.settings, **options)
            job.result = report.model_dump(mode="json", exclude={"rejects_file", "source"})
            if change is not None:  # added / removed / unchanged, as `talent load --replace`
                job.result["change"] = change.model_dump(mode="json")
            job.rows = max(job.rows, report.rows_read)
            job.triples = max(job.triples, report.loaded)
            job.status = "cancelled" if report.cancelled else "done"
        except TalentError as e:
            job.status, job.error = "failed", ("load_error", str(e))
        except Exception as e:  # a bug or the store: said in the job, logged in full
            log.exception("load job %s failed", job.id)
            job.status, job.error = "failed", ("internal", f"{type(e).__name__}: {e}")
        finally:
            job.seconds = time.perf_counter() - job.t0
            if job.owned:
                job.path.unlink(missing_ok=True)
            if not job.rejects or not job.rejects.is_file():
                shutil.rmtree(job.tmp, ignore_errors=True)


class UploadLimit:
    """ASGI middleware: a load's request body is counted as it arrives and refused (413) once
    past the limit, whether or not it announced its length (a chunked upload is not spooled
    to disk past the limit)."""

    def __init__(self, app: Any, path: str, limit: int, message: str):
        self.app, self.path, self.limit, self.message = app, path, limit, message

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != self.path:
            return await self.app(scope, receive, send)
        seen = 0

        async def counted() -> Any:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise StarletteHTTPException(413, self.message)
            return msg

        await self.app(scope, counted, send)


async def path_request(request: Request) -> PathLoadRequest | None:
    """A JSON body of POST /v1/loads: a server-side path to load (else None: an upload)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return None
    try:
        return PathLoadRequest.model_validate_json(await request.body())
    except ValidationError as e:
        raise RequestValidationError(
            [{**err, "loc": ("body", *err["loc"])} for err in e.errors()]) from None


ByPath = Annotated[PathLoadRequest | None, Depends(path_request)]


def load_format(fmt: str | None, name: str) -> str:
    """A load's format: the given one if `talent load` has it, else guessed from ``name``."""
    from talent_core.loaders import FORMATS
    from talent_core.loaders.api import detect_format

    if fmt and fmt not in FORMATS:
        raise ApiError(422, f"format {fmt!r}: must be one of {', '.join(FORMATS)}",
                       field="format")
    if fmt:
        return fmt
    try:
        return detect_format(name)
    except TalentError as e:
        raise ApiError(422, f"format: {e}", field="format") from None


def allowed_dirs(setting: str) -> list[Path]:
    """The folders of TALENT_API_LOAD_DIRS (OS path separator), resolved."""
    return [Path(d).expanduser().resolve() for d in setting.split(os.pathsep) if d.strip()]


def checked_load_path(raw: str, dirs: list[Path]) -> Path:
    """The real path (symlinks and `..` resolved) of a server-side load, if it lies under
    an allowed folder (403 otherwise: also for no folders allowed) and is a file (422). The
    folder is checked before the file, so a refusal says nothing of what exists outside."""
    if not dirs:
        raise ApiError(403, "loads by server-side path are off: the operator allows folders "
                       "with TALENT_API_LOAD_DIRS (or upload the file)")
    p = Path(raw).expanduser()
    if not p.is_absolute():
        raise ApiError(422, f"path: {raw!r} must be absolute", field="path")
    real = p.resolve()
    if not any(real.is_relative_to(d) for d in dirs):
        raise ApiError(403, f"path: {raw!r} is not under a folder the operator allows "
                       "(TALENT_API_LOAD_DIRS)")
    if not real.is_file():
        raise ApiError(422, f"path: {raw!r} is not a file", field="path")
    return real


# --- SSE ---------------------------------------------------------------------------------


def sse(event: str, data: Any) -> str:
    """One Server-Sent Event (JSON data on one line)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def chat_text(out: dict[str, Any]) -> str:
    """A chat answer's text: the answers, or why there are none."""
    if out["not_in_kg"]:
        return "Not in the KG: " + ", ".join(out["not_in_kg"])
    return " | ".join(out["answer"]) or "(no answer)"


# --- the app ------------------------------------------------------------------------------


def create_app(settings: Settings | None = None,
               pipeline_factory: Callable[[], Any] | None = None,
               announce: tuple[str, int] | None = None) -> FastAPI:
    """The API on ``settings`` (default: the environment's); ``pipeline_factory`` builds the
    one Pipeline (tests pass their own); ``announce`` (host, port): write the discovery file
    in the data dir once started (`talent ask` finds the server there), remove it at
    shutdown."""
    settings = settings or get_settings()
    rt = Runtime(settings, pipeline_factory)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        from talent_core.api.client import remove_discovery, write_discovery

        if settings.api_preload:
            from starlette.concurrency import run_in_threadpool

            await run_in_threadpool(rt.warm)
        if announce is not None:
            write_discovery(settings.data_dir, *announce)
        try:
            yield
        finally:
            if announce is not None:
                remove_discovery(settings.data_dir)
            rt.close()

    app = FastAPI(title="TaLenT GraphQA", version="1", lifespan=lifespan,
                  summary="Question answering over the loaded KG; Bearer API keys "
                  "(`talent keys create`).")
    app.state.runtime = rt

    # --- errors: always {"error": {"code", "message"}} ----------------------------------
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, e: ApiError) -> JSONResponse:
        return error_response(e.status, e.code, e.message, e.field, e.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
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
        # the server's own state (keys file, store server) is not the client's fault
        status = 503 if isinstance(e, ApiKeyError | EmbeddedServerError) else 422
        return error_response(status, STATUS_CODES[status], str(e))

    @app.exception_handler(Exception)
    async def _internal(_: Request, e: Exception) -> JSONResponse:
        log.error("request failed: %s: %s", type(e).__name__, e, exc_info=e)
        # the details (paths, queries) stay in the server's log
        return error_response(500, "internal", f"internal error ({type(e).__name__}); see "
                              "the server log")

    def checked(req: RetrieveRequest) -> tuple[str, dict[str, Any]]:
        """The request's question and overrides validated as the CLI validates them."""
        try:
            question = check_question(req.question, settings.max_question_chars)
        except TextInputError as e:
            raise input_error(e, "question") from None
        try:
            rt.pipe.retrieval_config(**req.retrieval)
        except RetrievalSettingsError as e:
            raise input_error(e) from None
        return question, req.retrieval

    # --- health ---------------------------------------------------------------------------
    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, Any]:
        """The process answers (no key needed)."""
        return {"status": "ok", "uptime_s": round(time.time() - rt.started, 1)}

    @app.get("/readyz", tags=["health"])
    def readyz(_: Read) -> dict[str, Any]:
        """The store answers; whether the models are loaded; the model queue."""
        try:
            stats = rt.pipe.stats()
        except Exception as e:
            raise ApiError(503, f"the store is not ready: {type(e).__name__}: {e}") from None
        return {"ready": True, "store": stats.store, "triples": stats.triples,
                "models_loaded": rt.models.models_loaded,
                "llm": {"slots": rt.llm.slots, "running": rt.llm.running,
                        "admitted": rt.llm.admitted, "queue": rt.llm.queue,
                        "busy_s": round(rt.llm.busy_s, 2)}}

    app.include_router(sources_router)  # GET / DELETE /v1/sources (issue 33)

    @app.get("/v1/stats", tags=["browse"])
    def stats(_: Read) -> dict[str, Any]:
        return rt.pipe.stats().model_dump()

    # --- questions --------------------------------------------------------------------------
    @app.post("/v1/retrieve", tags=["ask"])
    def retrieve(req: RetrieveRequest, _: Read) -> dict[str, Any]:
        """Candidate S only (the `talent retrieve --json` shape); no language model."""
        rt.niced()
        from talent_core.commands.ask import candidate_json

        question, overrides = checked(req)
        cand = rt.pipe.retrieve(question, req.topic_entities, **overrides)
        return candidate_json(cand)

    @app.post("/v1/ask", tags=["ask"])
    def ask(req: AskRequest, _: Read) -> Any:
        """The answer (the `talent ask --json` shape), or with ``stream`` its stages as
        Server-Sent Events: seeds, candidate, selection, plan, answer, done."""
        rt.niced()
        question, overrides = checked(req)
        # S only needs no model: it does not queue for a slot
        slot = NoSlot() if req.mode == "retrieval" else rt.llm.admit()
        if req.stream:
            return StreamingResponse(
                _ask_events(question, req, overrides, slot), media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                background=BackgroundTask(slot.release))
        try:
            t0 = time.perf_counter()
            cand, plan = rt.pipe.retrieve_planned(question, req.topic_entities, **overrides)
            ans, evidence = _answer(cand, req, slot, t0, plan)
        finally:
            slot.release()
        out = _answer_json(ans, evidence)
        if req.view is not None:
            out["talent_view"] = _view(ans, req, question)
        return out

    def _answer(cand: Any, req: AskRequest, slot: Slot | NoSlot, t0: float,
                plan: Any = None) -> tuple[Any, Any]:
        """The answer on S (``plan``: the one `retrieve_planned` made for it)."""
        from talent_core.explore import answer_evidence, fill_closest

        pipe = rt.pipe
        if req.mode == "retrieval":
            ans = pipe.answer(cand, "retrieval", req.decode, t0=t0)
        else:
            waited = time.perf_counter()
            with slot:
                held = time.perf_counter()
                ans = rt.models.answer(cand, req.mode, req.decode, t0=t0, plan=plan)
                done = time.perf_counter()
            # the server's side of the model queue: waiting for a slot, holding it
            ans.timings_ms["model_queue"] = round((held - waited) * 1000, 1)
            ans.timings_ms["model_slot"] = round((done - held) * 1000, 1)
        evidence = answer_evidence(ans, pipe.store)
        fill_closest(pipe.store, pipe.embedder, ans)
        return ans, evidence

    def _view(ans: Any, req: AskRequest, question: str) -> dict[str, Any]:
        """``talent_view``: the Answer model, and for the UI what its Ask page computes
        from the store beside it (`app/views/ask.py` run_question, locally)."""
        out: dict[str, Any] = {"answer": ans.model_dump(mode="json")}
        if req.view == "ui":
            from talent_core.explore import (
                answer_evidence,
                evidence_names,
                missing_topics,
                out_of_candidate_joins,
            )
            from talent_core.questions import parse_question

            pipe = rt.pipe
            _, parsed = parse_question(question, req.topic_entities)
            evidence = answer_evidence(ans, pipe.store, max_answers=len(ans.answer))
            out.update(
                evidence=[e.model_dump(mode="json") for e in evidence],
                joins=out_of_candidate_joins(pipe.store, ans),
                evidence_entities=[e.model_dump(mode="json") for e in
                                   evidence_names(ans, evidence, pipe.store).values()],
                topics=parsed,
                missing={} if ans.candidate.links else missing_topics(
                    pipe.store, pipe.embedder, parsed))
        return out

    def _answer_json(ans: Any, evidence: Any) -> dict[str, Any]:
        from talent_core.commands.ask import answer_json

        return answer_json(ans, evidence)

    def _ask_events(question: str, req: AskRequest, overrides: dict[str, Any],
                    slot: Slot | NoSlot) -> Iterator[str]:
        from talent_core.commands.ask import candidate_json

        rt.niced()
        t0 = time.perf_counter()
        server_ms: dict[str, float] = {}
        try:
            cand, plan = rt.pipe.retrieve_planned(question, req.topic_entities, **overrides)
            server_ms["retrieved"] = round((time.perf_counter() - t0) * 1000, 1)
            yield sse("seeds", {"seeds": [s.model_dump() for s in cand.seeds],
                                "links": [lk.model_dump() for lk in cand.links]})
            yield sse("candidate", candidate_json(cand))
            while not slot.acquire(timeout=HEARTBEAT_S):
                # an SSE comment while queued: proxies keep the stream open, and a client
                # that went away is noticed here, before any model work runs for it
                yield ": queued for a model slot\n\n"
            ans, evidence = _answer(cand, req, slot, t0, plan)
            out = _answer_json(ans, evidence)
            server_ms["answered"] = round((time.perf_counter() - t0) * 1000, 1)
            yield sse("selection", {k: out[k] for k in ("selected", "out_of_candidate",
                                                        "retriever_ranked")})
            yield sse("plan", {k: out[k] for k in ("plan", "planner", "answer_path")})
            yield sse("answer", {k: out[k] for k in (
                "question", "answer", "raw", "decode", "ranked", "edges", "evidence",
                "frozen", "generator", "not_in_kg", "links", "method")})
            if req.view is not None:
                yield sse("view", _view(ans, req, question))
            yield sse("done", {"timings_ms": out["timings_ms"], "server_ms": server_ms})
        except TalentError as e:
            yield sse("error", {"error": {"code": "invalid_request", "message": str(e)}})
        except Exception as e:
            log.exception("streamed ask failed")
            yield sse("error", {"error": {"code": "internal", "message": "internal error "
                                          f"({type(e).__name__}); see the server log"}})
        finally:
            slot.release()

    @app.post("/v1/stance", tags=["ask"])
    def stance(req: StanceRequestIn, _: Read) -> dict[str, Any]:
        """The stance task (ExplaGraphs; `talent ask --stance --json`'s shape): ``support``
        or ``counter`` with both labels' scores, the evidence nodes and edges, which models
        decided it; through the model queue like an ask."""
        from talent_core.stance import StanceRequest, stance_json

        rt.niced()
        request = StanceRequest(**req.model_dump())
        slot = rt.llm.admit()
        waited = time.perf_counter()
        try:
            with slot:
                held = time.perf_counter()
                out = rt.models.stance(request)
                done = time.perf_counter()
        finally:
            slot.release()
        doc = stance_json(out)
        doc["timings_ms"] = {**doc.get("timings_ms", {}),
                             "model_queue": round((held - waited) * 1000, 1),
                             "model_slot": round((done - held) * 1000, 1)}
        return doc

    # --- OpenAI-compatible chat -----------------------------------------------------------
    @app.post("/v1/chat/completions", tags=["ask"])
    def chat_completions(req: ChatRequest, _: Read) -> Any:
        """OpenAI's chat completion (and its stream) for existing chat clients and SDKs: the
        last user message is the question, the answers are the content, the whole
        `talent ask --json` document travels in the extension field ``talent``."""
        rt.niced()
        user = [m for m in req.messages if m.role == "user"]
        if not user:
            raise ApiError(422, "messages: no user message (its text is the question)",
                           field="messages")
        ask_req = AskRequest(question=user[-1].text())
        question, _o = checked(ask_req)
        slot = rt.llm.admit()
        base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()),
                "model": req.model}
        if req.stream:
            return StreamingResponse(_chat_events(question, ask_req, slot, base),
                                     media_type="text/event-stream",
                                     background=BackgroundTask(slot.release))
        try:
            t0 = time.perf_counter()
            cand, plan = rt.pipe.retrieve_planned(question)
            ans, evidence = _answer(cand, ask_req, slot, t0, plan)
        finally:
            slot.release()
        out = _answer_json(ans, evidence)
        return {**base, "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": chat_text(out)}}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                "talent": out}

    def _chat_events(question: str, req: AskRequest, slot: Slot,
                     base: dict[str, Any]) -> Iterator[str]:
        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
            body = {**base, "object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish}], **extra}
            return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

        rt.niced()
        try:
            t0 = time.perf_counter()
            yield chunk({"role": "assistant", "content": ""})
            cand, plan = rt.pipe.retrieve_planned(question)
            ans, evidence = _answer(cand, req, slot, t0, plan)
            out = _answer_json(ans, evidence)
            yield chunk({"content": chat_text(out)})
            yield chunk({}, "stop", talent=out)
        except TalentError as e:
            yield chunk({"content": f"error: {e}"}, "stop")
        except Exception as e:
            log.exception("streamed chat completion failed")
            yield chunk({"content": f"error: internal error ({type(e).__name__}); see the "
                                    "server log"}, "stop")
        finally:
            slot.release()
        yield "data: [DONE]\n\n"

    # --- browsing ---------------------------------------------------------------------------
    @app.get("/v1/entities", tags=["browse"])
    def entities(_: Read, q: Annotated[str, Query(min_length=1)],
                 k: Annotated[int, Query(ge=1, le=100)] = 10) -> dict[str, Any]:
        """Entities for a typed name: exact, the linking's fuzzy matches (when the
        retrieval settings link fuzzily), fulltext, vector: the Explore page's search."""
        rt.niced()
        from talent_core.explore import find_entities

        try:
            text = check_question(q, settings.max_question_chars)
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

    @app.get("/v1/entities/{eid}/neighbours", tags=["browse"])
    def neighbours(eid: str, _: Read,
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

    # --- loads ------------------------------------------------------------------------------
    max_bytes = settings.max_upload_mb * 1024 * 1024

    too_large_message = (f"the upload is larger than the limit of {settings.max_upload_mb} MB "
                         "(TALENT_MAX_UPLOAD_MB)")
    # the multipart envelope (boundaries, headers, the form fields) may add a little
    app.add_middleware(UploadLimit, path="/v1/loads", limit=max_bytes + 64 * 1024,
                       message=too_large_message)

    def too_large() -> ApiError:
        return ApiError(413, too_large_message)

    def small_enough(request: Request) -> None:
        """An announced body over the limit is refused before it is read."""
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > max_bytes + 64 * 1024:
            raise too_large()

    load_dirs = allowed_dirs(settings.api_load_dirs)

    @app.post("/v1/loads", status_code=202, tags=["loads"],
              dependencies=[Depends(small_enough)],
              openapi_extra={"requestBody": {"content": {"application/json": {
                  "schema": PathLoadRequest.model_json_schema()}}}})
    def start_load(_: Write,
                   by_path: ByPath,
                   file: Annotated[UploadFile | None, File()] = None,
                   format: Annotated[str | None, Form()] = None,
                   on_error: Annotated[str, Form(pattern="^(fail|skip)$")] = "fail",
                   replace: Annotated[str | None, Form(min_length=1)] = None,
                   delimiter: Annotated[str | None, Form(min_length=1)] = None,
                   columns: Annotated[str | None, Form(min_length=1)] = None,
                   limit: Annotated[int | None, Form(ge=1)] = None,
                   dry_run: Annotated[bool, Form()] = False,
                   ) -> LoadJobOut:
        """Queue a load (one load at a time); poll /v1/loads/{id}. Either a multipart upload
        (``file``), or JSON ``{"path": ..., "format": ..., "on_error": ...}``: a file on the
        server under a folder the operator allows (TALENT_API_LOAD_DIRS; none by default:
        403). ``format``: one of `talent load`'s; omitted, guessed from the file name;
        ``replace``: a source the file replaces (`talent load --replace`; the job's result
        has the change: added / removed / unchanged); ``delimiter``, ``columns``, ``limit``,
        ``dry_run``: `talent load`'s options."""
        replaced = by_path.replace if by_path is not None else replace
        options = (by_path.options() if by_path is not None
                   else load_options(delimiter, columns, limit, dry_run))
        if replaced is not None and options.get("dry_run"):
            raise ApiError(422, "dry_run: a replace cannot be a dry run", field="dry_run")
        if replaced is not None:  # an unknown source is refused now, not in the job
            from talent_core.loaders.sources import find_source

            try:
                find_source(rt.pipe.store, replaced)
            except SourceError as e:
                raise ApiError(404, str(e)) from None
        if by_path is not None:
            path = checked_load_path(by_path.path, load_dirs)
            fmt = load_format(by_path.format, path.name)
            job = LoadJob(Path(tempfile.mkdtemp(prefix="talent-api-load-")), path, fmt,
                          by_path.on_error, str(path), owned=False, replace=by_path.replace,
                          options=options)
            rt.loads.submit(job)
            return job.out()
        if file is None:
            raise ApiError(422, "file: required (a multipart upload), or send JSON "
                           '{"path": ...} for a file on the server', field="file")
        name = safe_upload_name(file.filename, "upload.txt")
        fmt = load_format(format, name)
        tmp = Path(tempfile.mkdtemp(prefix="talent-api-load-"))
        path = tmp / name
        size = 0
        try:
            with path.open("wb") as f:
                for chunk in iter(lambda: file.file.read(1 << 20), b""):
                    size += len(chunk)
                    if size > max_bytes:
                        raise too_large()
                    f.write(chunk)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # nothing of a refused request stays
            raise
        job = LoadJob(tmp, path, fmt, on_error, name, replace=replace, options=options)
        rt.loads.submit(job)
        return job.out()

    def job_of(job_id: str) -> LoadJob:
        job = rt.loads.jobs.get(job_id)
        if job is None:
            raise ApiError(404, f"no load job {job_id!r}")
        return job

    @app.get("/v1/loads/{job_id}", tags=["loads"])
    def load_status(job_id: str, _: Read) -> LoadJobOut:
        return job_of(job_id).out()

    @app.delete("/v1/loads/{job_id}", tags=["loads"])
    def cancel_load(job_id: str, _: Write) -> LoadJobOut:
        """Cancel a load: a queued one leaves the queue, a running one stops at its next
        batch boundary (the batches committed before stay complete in the store; poll until
        its status is ``cancelled``); one that ended is left as it is (409)."""
        job = job_of(job_id)
        if job.status not in ("queued", "running"):
            raise ApiError(409, f"load job {job_id} already ended ({job.status})")
        rt.loads.cancel(job)
        return job.out()

    @app.get("/v1/loads/{job_id}/rejects", tags=["loads"])
    def load_rejects(job_id: str, _: Read) -> FileResponse:
        """The job's rejects (JSON lines), once it ended (409 before)."""
        job = job_of(job_id)
        if job.status in ("queued", "running"):
            raise ApiError(409, f"load job {job_id} is still {job.status}")
        if job.rejects is None or not job.rejects.is_file():
            raise ApiError(404, "this load kept no rejects (on_error=skip keeps them)")
        return FileResponse(job.rejects, media_type="application/jsonl",
                            filename=f"{job.id}.rejects.jsonl")

    return app
