"""The load endpoints of `talent serve`: `POST /v1/loads` (an upload, or a server-side path
under TALENT_API_LOAD_DIRS; write scope), `GET /v1/loads/{id}` (progress), `DELETE
/v1/loads/{id}` (cancel), `GET /v1/loads/{id}/rejects`. Jobs run one at a time, in arrival
order, on one worker thread at a lower CPU priority (`LoadJobs`).

What a job keeps on disk is its own folder `talent-api-load-<server pid>-*` in the temporary
folder: the upload's copy and the rejects file while it runs. When the job ends its rejects
(at most TALENT_API_MAX_REJECTS of them, the rest counted) move into memory and the folder
goes; a server killed meanwhile leaves folders that the next server removes when it starts
(`remove_stale_job_dirs`)."""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError

from talent_core.api.auth import ApiError, Read, Write
from talent_core.api.client import pid_alive
from talent_core.api.gate import upload_body
from talent_core.api.schemas import LoadJobOut, PathLoadRequest, load_options
from talent_core.errors import SourceError, TalentError
from talent_core.text import char_problem, safe_upload_name

log = logging.getLogger(__name__)

JOB_DIR_PREFIX = "talent-api-load-"
_JOB_DIR = re.compile(re.escape(JOB_DIR_PREFIX) + r"(\d+)-")
KEPT_JOBS = 200  # ended jobs remembered for polling; the oldest are forgotten first


def disk_full(e: BaseException) -> bool:
    """Whether ``e`` (or what caused it) is a full disk or an exceeded quota."""
    while e is not None:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return False


def disk_full_error() -> ApiError:
    """The 507 of an upload the server had no room for."""
    return ApiError(507, "the server's disk is full (no space left in its temporary "
                    "folder): nothing of the upload was kept; retry when the operator has "
                    "freed space")


def new_job_dir() -> Path:
    """A private folder (0700, unpredictable name) for one job, named after this server."""
    try:
        return Path(tempfile.mkdtemp(prefix=f"{JOB_DIR_PREFIX}{os.getpid()}-"))
    except OSError as e:
        if disk_full(e):
            raise disk_full_error() from None
        raise


def remove_stale_job_dirs(tmp: Path | None = None) -> int:
    """Remove the job folders of servers that no longer run (killed mid-upload): ours only
    (a folder of another user, or a link, is left alone); how many went."""
    tmp = Path(tmp or tempfile.gettempdir())
    removed = 0
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return 0
    for e in entries:
        m = _JOB_DIR.match(e.name)
        if m is None or int(m.group(1)) == os.getpid() or pid_alive(int(m.group(1))):
            continue
        st = e.stat(follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        shutil.rmtree(e.path, ignore_errors=True)
        removed += 1
    if removed:
        log.info("removed %d load folder(s) of servers that stopped mid-job", removed)
    return removed


class LoadJob:
    """One file to load (an upload's copy, or a server-side path); its progress comes from
    the loader's `on_commit`."""

    def __init__(self, tmp: Path, path: Path, fmt: str | None, on_error: str, source: str,
                 owned: bool = True, replace: str | None = None,
                 options: dict[str, Any] | None = None, notes: list[str] | None = None,
                 identity: tuple[int, int] | None = None, raw_path: str | None = None):
        self.id = uuid.uuid4().hex[:12]
        self.tmp, self.path, self.format, self.on_error, self.source = (
            tmp, path, fmt, on_error, source)
        self.replace = replace  # the source this file replaces (`talent load --replace`)
        self.options = options or {}  # delimiter, columns, limit, dry_run (`talent load`'s)
        self.owned = owned  # an upload's copy (removed once loaded), not a server-side file
        self.notes = notes or []  # what the client should know (a renamed upload, ...)
        # a server-side path: what the client sent, and (st_dev, st_ino) when it was queued
        self.raw_path, self.identity = raw_path, identity
        self.rejects = tmp / "rejects.jsonl" if on_error == "skip" else None
        self.rejects_body: bytes | None = None  # the rejects, once the job ended
        self.status = "queued"
        self.total_rows: int | None = None
        self.rows = 0
        self.triples = 0
        self.t0: float | None = None
        self.seconds = 0.0
        self.result: dict[str, Any] | None = None
        self.error: tuple[str, str] | None = None
        self.cancel = threading.Event()  # DELETE /v1/loads/{id}: stop at a batch boundary

    def told(self, message: str) -> str:
        """A loader's message as the client may read it: the job folder's paths (the
        upload's copy, the rejects file) in the client's words."""
        if self.rejects is not None:
            message = message.replace(str(self.rejects), f"GET /v1/loads/{self.id}/rejects")
        if self.owned:
            message = message.replace(str(self.path), self.source)
        return message.replace(str(self.tmp), "(the job's folder)")

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
            rejects=bool(self.rejects_body or (self.rejects and self.rejects.is_file())),
            notes=self.notes,
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
    """Load jobs run one at a time, in arrival order, on one worker thread. ``rt``: the
    server's `Runtime` (its pipeline, settings, and `background_priority`)."""

    def __init__(self, rt: Any, priority: Any = None):
        self.rt = rt
        self.priority = priority  # called with TALENT_API_LOAD_NICE on the worker thread
        self.jobs: dict[str, LoadJob] = {}
        self._queue: list[LoadJob] = []
        self._cond = threading.Condition()
        self._stop = False
        self._worker: threading.Thread | None = None

    def submit(self, job: LoadJob) -> None:
        with self._cond:
            ended = [j for j in self.jobs.values() if j.status not in ("queued", "running")]
            for old in ended[:max(0, len(self.jobs) - KEPT_JOBS + 1)]:
                del self.jobs[old.id]
            self.jobs[job.id] = job
            self._queue.append(job)
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, daemon=True,
                                                name="api-loads")
                self._worker.start()
            self._cond.notify()

    def busy(self) -> list[str]:
        """The ids of the jobs queued or running."""
        with self._cond:
            return [j.id for j in self.jobs.values() if j.status in ("queued", "running")]

    def stop(self) -> None:
        """No further job starts; the queued jobs' folders go (the running load, if any,
        ends with the process, and its folder with the next server's start)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
            for job in self._queue:
                shutil.rmtree(job.tmp, ignore_errors=True)

    def _run(self) -> None:
        # loads are background work: the answers keep their pace while one runs
        if self.priority is not None:
            self.priority(self.rt.settings.api_load_nice)
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
        settings = self.rt.settings
        status, error = "failed", None
        try:
            if job.raw_path is not None:  # checked again now: a link swapped since is seen
                recheck(job, allowed_dirs(settings.api_load_dirs))
            job.total_rows = count_rows(job.path)
            options = {"on_commit": on_commit, "progress": False, "on_error": job.on_error,
                       "rejects": job.rejects, "max_rejects": settings.api_max_rejects,
                       "cancel": job.cancel.is_set, **job.options}
            change = None
            if job.replace is None:
                report = self.rt.pipe.load(job.path, job.format, **options)
            else:
                from talent_core.loaders.sources import replace_source

                report, change = replace_source(job.path, job.replace, job.format,
                                                store=self.rt.pipe.store,
                                                settings=settings, **options)
            job.result = report.model_dump(mode="json", exclude={"rejects_file", "source"})
            if change is not None:  # added / removed / unchanged, as `talent load --replace`
                job.result["change"] = change.model_dump(mode="json")
            job.notes.extend(report.warnings)
            job.rows = max(job.rows, report.rows_read)
            job.triples = max(job.triples, report.loaded)
            status = "cancelled" if report.cancelled else "done"
            if job.options.get("vectors") == "later" and not report.dry_run:
                self._fill_behind(job)
        except ApiError as e:
            error = ("load_error", e.message)
        except TalentError as e:
            error = ("load_error", job.told(str(e)))
        except Exception as e:  # a bug or the store: said in the job, logged in full
            log.exception("load job %s failed", job.id)
            error = ("internal", f"{type(e).__name__}: {e}")
        finally:
            if error is not None and job.options.get("vectors") == "later" and job.triples:
                self._fill_behind(job)  # the batches committed before the failure stay
            job.seconds = time.perf_counter() - job.t0
            if job.rejects is not None and job.rejects.is_file():
                try:  # bounded by max_rejects: kept in memory, the folder goes
                    job.rejects_body = job.rejects.read_bytes()
                except OSError as e:
                    log.warning("load job %s: its rejects cannot be read: %s", job.id, e)
            shutil.rmtree(job.tmp, ignore_errors=True)
            job.error = error  # the job ends only once its folder is gone
            job.status = status

    def _fill_behind(self, job: LoadJob) -> None:
        """Start `talent vectors` behind a `vectors=later` load; its note in the job."""
        from talent_core.loaders.vectors import fill_behind

        note = fill_behind(self.rt.pipe.store, self.rt.settings)
        job.notes.extend([note] if note else [])


# --- server-side paths ------------------------------------------------------------------


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
    problem = char_problem(raw)
    if problem is not None:
        raise ApiError(422, f"path: {problem}", field="path")
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


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def recheck(job: LoadJob, dirs: list[Path]) -> None:
    """A server-side path checked again when its job starts: it must still resolve to the
    same file under an allowed folder (a link swapped after the request was queued, or the
    folder no longer allowed, fails the job)."""
    real = checked_load_path(job.raw_path or "", dirs)
    if real != job.path or _identity(real) != job.identity:
        raise ApiError(409, f"path: {job.raw_path!r} no longer leads to the file checked when "
                       "the load was queued (a link or the file changed): not loaded")


# --- the routes ---------------------------------------------------------------------------

router = APIRouter(tags=["loads"])


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


def upload_name(given: str | None) -> tuple[str, list[str]]:
    """The name an upload is stored and recorded (as its source) under, and a note when it
    differs from the name sent. A name whose last part is no file name (empty, ".", "..",
    a trailing "/") is refused: two such uploads would merge into one source."""
    base = re.split(r"[\\/]", str(given or ""))[-1].strip()
    if base in ("", ".", ".."):
        raise ApiError(422, f"file: the upload's name {given!r} is not a file name (name "
                       "the file, e.g. kb.txt: its name is the source's)", field="file")
    name = safe_upload_name(base, "")
    if not name:
        raise ApiError(422, f"file: the upload's name {given!r} keeps no letter or digit "
                       "(its name is the source's)", field="file")
    notes = [] if name == given else [f"the upload {given!r} is stored and recorded as the "
                                      f"source {name!r}"]
    return name, notes


def _save_upload(file: UploadFile, path: Path, max_bytes: int, too_large: ApiError) -> None:
    """Copy an upload to ``path``, at most ``max_bytes``; a full disk is a 507."""
    size = 0
    try:
        with path.open("wb") as f:
            for chunk in iter(lambda: file.file.read(1 << 20), b""):
                size += len(chunk)
                if size > max_bytes:
                    raise too_large
                f.write(chunk)
    except OSError as e:
        if disk_full(e):
            raise disk_full_error() from None
        raise


@router.post("/v1/loads", status_code=202, dependencies=[Depends(upload_body)],
             openapi_extra={"requestBody": {"content": {"application/json": {
                 "schema": PathLoadRequest.model_json_schema()}}}})
def start_load(request: Request, _: Write,
               by_path: ByPath,
               file: Annotated[UploadFile | None, File()] = None,
               format: Annotated[str | None, Form()] = None,
               on_error: Annotated[str, Form(pattern="^(fail|skip)$")] = "fail",
               replace: Annotated[str | None, Form(min_length=1)] = None,
               delimiter: Annotated[str | None, Form(min_length=1)] = None,
               columns: Annotated[str | None, Form(min_length=1)] = None,
               limit: Annotated[int | None, Form(ge=1)] = None,
               dry_run: Annotated[bool, Form()] = False,
               vectors: Annotated[str, Form(pattern="^(now|later)$")] = "now",
               ) -> LoadJobOut:
    """Queue a load (one load at a time); poll /v1/loads/{id}. Either a multipart upload
    (``file``), or JSON ``{"path": ..., "format": ..., "on_error": ...}``: a file on the
    server under a folder the operator allows (TALENT_API_LOAD_DIRS; none by default:
    403). ``format``: one of `talent load`'s; omitted, guessed from the file name;
    ``replace``: a source the file replaces (`talent load --replace`; the job's result
    has the change: added / removed / unchanged); ``delimiter``, ``columns``, ``limit``,
    ``dry_run``, ``vectors``: `talent load`'s options (``later``: the store answers once
    the graph is in; the names are embedded behind it by a `talent vectors` process the
    job starts). The job's ``notes`` say what the client should know (the name an upload
    was recorded under, a source it adds to, the fill behind)."""
    rt = request.app.state.runtime
    settings = rt.settings
    replaced = by_path.replace if by_path is not None else replace
    options = (by_path.options() if by_path is not None
               else load_options(delimiter, columns, limit, dry_run, vectors))
    if replaced is not None and options.get("dry_run"):
        raise ApiError(422, "dry_run: a replace cannot be a dry run", field="dry_run")
    if replaced is not None:  # an unknown source is refused now, not in the job
        from talent_core.loaders.sources import find_source

        try:
            find_source(rt.pipe.store, replaced)
        except SourceError as e:
            raise ApiError(404, str(e)) from None
    if by_path is not None:
        path = checked_load_path(by_path.path, allowed_dirs(settings.api_load_dirs))
        fmt = load_format(by_path.format, path.name)
        job = LoadJob(new_job_dir(), path, fmt, by_path.on_error, str(path), owned=False,
                      replace=by_path.replace, options=options, identity=_identity(path),
                      raw_path=by_path.path)
        rt.loads.submit(job)
        return job.out()
    if file is None:
        raise ApiError(422, "file: required (a multipart upload), or send JSON "
                       '{"path": ...} for a file on the server', field="file")
    name, notes = upload_name(file.filename)
    fmt = load_format(format, name)
    tmp = new_job_dir()
    try:
        max_bytes = settings.max_upload_mb * 1024 * 1024
        _save_upload(file, tmp / name, max_bytes, ApiError(413, upload_too_large(settings)))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing of a refused request stays
        raise
    job = LoadJob(tmp, tmp / name, fmt, on_error, name, replace=replace, options=options,
                  notes=notes)
    rt.loads.submit(job)
    return job.out()


def upload_too_large(settings: Any) -> str:
    return (f"the upload is larger than the limit of {settings.max_upload_mb} MB "
            "(TALENT_MAX_UPLOAD_MB)")


def _job(request: Request, job_id: str) -> LoadJob:
    job = request.app.state.runtime.loads.jobs.get(job_id)
    if job is None:
        raise ApiError(404, f"no load job {job_id!r}")
    return job


@router.get("/v1/loads/{job_id}")
def load_status(job_id: str, request: Request, _: Read) -> LoadJobOut:
    return _job(request, job_id).out()


@router.delete("/v1/loads/{job_id}")
def cancel_load(job_id: str, request: Request, _: Write) -> LoadJobOut:
    """Cancel a load: a queued one leaves the queue, a running one stops at its next
    batch boundary (the batches committed before stay complete in the store; poll until
    its status is ``cancelled``); one that ended is left as it is (409)."""
    job = _job(request, job_id)
    if job.status not in ("queued", "running"):
        raise ApiError(409, f"load job {job_id} already ended ({job.status})")
    request.app.state.runtime.loads.cancel(job)
    return job.out()


@router.get("/v1/loads/{job_id}/rejects")
def load_rejects(job_id: str, request: Request, _: Read) -> Response:
    """The job's rejects (JSON lines, the first TALENT_API_MAX_REJECTS; the job's result
    counts them all: ``rejected``, ``rejects_kept``), once it ended (409 before)."""
    job = _job(request, job_id)
    if job.status in ("queued", "running"):
        raise ApiError(409, f"load job {job_id} is still {job.status}")
    if job.rejects_body is None:
        raise ApiError(404, "this load kept no rejects (on_error=skip keeps them)")
    return Response(job.rejects_body, media_type="application/jsonl", headers={
        "Content-Disposition": f'attachment; filename="{job.id}.rejects.jsonl"'})
