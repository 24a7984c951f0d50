"""Adapting the planner to the loaded KG over HTTP, as `talent train planner --self` does
from the shell (issue 45): `POST /v1/planner/adapt` (write scope) starts it in the
background (`training.self_job`: a child process at TALENT_API_LOAD_NICE) and answers 202
with the job; `GET /v1/planner/adapt/{id}` (read scope) its progress (questions: anchors;
fit: steps) and, once done, the matcher's training and validation figures;
`DELETE /v1/planner/adapt/{id}` cancels it (the matcher in place stays). One at a time per
data dir, across processes: 409 while one runs. Every process on the data dir plans with
the new matcher from its next question. `create_app` includes the router."""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from talent_core.api.auth import ApiError, Read, Write
from talent_core.api.schemas import _Strict
from talent_core.errors import TrainingBusyError
from talent_core.planning.self_train import SELF

router = APIRouter(tags=["planner"])
KEPT = 8  # ended jobs kept for GET
_LOCK = threading.Lock()


class AdaptRequest(_Strict):
    """``anchors``: entities whose own paths are written as questions (as `--anchors`)."""

    anchors: int = Field(SELF.anchors, ge=10, le=5000)


def _jobs(request: Request) -> dict[str, Any]:
    state = request.app.state
    if not hasattr(state, "adapt_jobs"):
        state.adapt_jobs = {}
    return state.adapt_jobs


@router.post("/v1/planner/adapt", status_code=202)
def start_adapt(request: Request, _: Write, body: AdaptRequest | None = None
                ) -> dict[str, Any]:
    """Start adapting the planner's matcher to this store (see the module doc)."""
    from talent_core.training.self_job import SelfAdaptation

    rt = request.app.state.runtime
    jobs = _jobs(request)
    with _LOCK:
        if any(j.status == "running" for j in jobs.values()):
            raise ApiError(409, "the planner is being adapted to this KG already: "
                           "GET /v1/planner/adapt/{id} follows it")
        try:
            job = SelfAdaptation(rt.settings, (body or AdaptRequest()).anchors,
                                 nice=rt.settings.api_load_nice)
        except TrainingBusyError as e:  # a `talent train planner --self` beside the server
            raise ApiError(409, str(e)) from None
        ended = [k for k, j in jobs.items() if j.status != "running"]
        for k in ended[:max(0, len(jobs) - KEPT + 1)]:
            del jobs[k]
        jobs[job.id] = job
    return job.out()


def _job(request: Request, job_id: str) -> Any:
    job = _jobs(request).get(job_id)
    if job is None:
        raise ApiError(404, f"no adaptation job {job_id!r} (ended jobs are kept a while)")
    return job


@router.get("/v1/planner/adapt/{job_id}")
def adapt_status(job_id: str, request: Request, _: Read) -> dict[str, Any]:
    return _job(request, job_id).out()


@router.delete("/v1/planner/adapt/{job_id}")
def cancel_adapt(job_id: str, request: Request, _: Write) -> dict[str, Any]:
    job = _job(request, job_id)
    job.cancel()
    job.wait(30)
    return job.out()
