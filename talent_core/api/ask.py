"""The question endpoints of `talent serve`: `POST /v1/retrieve` (candidate S, no model),
`POST /v1/ask` (the `talent ask --json` document, or with ``stream`` its stages as
Server-Sent Events) and `POST /v1/stance` (the ExplaGraphs task).

A streamed ask sends seeds, candidate, selection, plan, answer, done. The pipeline has no
per-stage hooks inside its language-model half, so seeds and candidate are sent when
retrieval ends, and selection, plan and answer together when `Pipeline.answer` returns.
While it waits for a model slot, a streamed ask sends SSE comments (`: queued ...`): a
client that went away is noticed there and leaves the queue; one that goes away while its
model stage runs frees the slot when that stage ends."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from talent_core.api.auth import ApiError, Read
from talent_core.api.runtime import NoSlot, Rt, Runtime, Slot
from talent_core.api.schemas import AskRequest, RetrieveRequest, StanceRequestIn
from talent_core.errors import (
    LLMServerError,
    RetrievalSettingsError,
    TalentError,
    TextInputError,
)
from talent_core.explore import answer_json, candidate_json, plan_json, selection_json
from talent_core.text import check_question, check_topics

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0  # seconds between the SSE comments a queued streamed ask sends

router = APIRouter(tags=["ask"])


def input_error(e: TalentError, field: str | None = None) -> ApiError:
    """A 422 for a bad question or retrieval override, naming the field."""
    if isinstance(e, RetrievalSettingsError) and e.problems:
        field = "retrieval." + e.problems[0][0]
    return ApiError(422, str(e), field=field)


def sse(event: str, data: Any) -> str:
    """One Server-Sent Event (JSON data on one line)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def checked(rt: Runtime, req: RetrieveRequest) -> tuple[str, dict[str, Any]]:
    """The request's question and overrides validated as the CLI validates them."""
    try:
        question = check_question(req.question, rt.settings.max_question_chars)
    except TextInputError as e:
        raise input_error(e, "question") from None
    try:
        check_topics(req.topic_entities, rt.settings.max_topic_entities,
                     rt.settings.max_question_chars)
    except TextInputError as e:
        raise input_error(e, "topic_entities") from None
    try:
        rt.pipe.retrieval_config(**req.retrieval)
    except RetrievalSettingsError as e:
        raise input_error(e) from None
    return question, req.retrieval


# --- questions --------------------------------------------------------------------------
@router.post("/v1/retrieve")
def retrieve(req: RetrieveRequest, _: Read, rt: Rt) -> dict[str, Any]:
    """Candidate S only (the `talent retrieve --json` shape); no language model."""
    rt.niced()
    question, overrides = checked(rt, req)
    cand = rt.pipe.retrieve(question, req.topic_entities, **overrides)
    return candidate_json(cand)

@router.post("/v1/ask")
def ask(req: AskRequest, _: Read, rt: Rt) -> Any:
    """The answer (the `talent ask --json` shape), or with ``stream`` its stages as
    Server-Sent Events: seeds, candidate, selection, plan, answer, done."""
    rt.niced()
    question, overrides = checked(rt, req)
    # S only needs no model: it does not queue for a slot
    slot = NoSlot() if req.mode == "retrieval" else rt.llm.admit()
    if req.stream:
        return StreamingResponse(
            _ask_events(rt, question, req, overrides, slot), media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            background=BackgroundTask(slot.release))
    try:
        t0 = time.perf_counter()
        cand, plan = rt.pipe.retrieve_planned(question, req.topic_entities, req.history,
                                             **overrides)
        ans, evidence = answer_on(rt, cand, req, slot, t0, plan)
    finally:
        slot.release()
    out = answer_json(ans, evidence)
    if req.view is not None:
        out["talent_view"] = _view(rt, ans, req, question)
    return out

def answer_on(rt: Runtime, cand: Any, req: AskRequest, slot: Slot | NoSlot, t0: float,
              plan: Any = None, on_stage: Any = None) -> tuple[Any, Any]:
    """The answer on S (``plan``: the one `retrieve_planned` made for it; ``on_stage``: the
    model stages' hook, `Pipeline.answer`)."""
    from talent_core.explore import answer_evidence, fill_closest

    pipe = rt.pipe
    if req.mode == "retrieval":
        ans = pipe.answer(cand, "retrieval", req.decode, t0=t0)
    else:
        waited = time.perf_counter()
        with slot:
            held = time.perf_counter()
            ans = rt.models.answer(cand, req.mode, req.decode, t0=t0, plan=plan,
                                   on_stage=on_stage)
            done = time.perf_counter()
        # the server's side of the model queue: waiting for a slot, holding it
        ans.timings_ms["model_queue"] = round((held - waited) * 1000, 1)
        ans.timings_ms["model_slot"] = round((done - held) * 1000, 1)
    evidence = answer_evidence(ans, pipe.store)
    fill_closest(pipe.store, pipe.embedder, ans)
    return ans, evidence

def _view(rt: Runtime, ans: Any, req: AskRequest, question: str) -> dict[str, Any]:
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

def _ask_events(rt: Runtime, question: str, req: AskRequest, overrides: dict[str, Any],
                slot: Slot | NoSlot) -> Iterator[str]:
    rt.niced()
    t0 = time.perf_counter()
    server_ms: dict[str, float] = {}
    try:
        cand, plan = rt.pipe.retrieve_planned(question, req.topic_entities, req.history,
                                             **overrides)
        server_ms["retrieved"] = round((time.perf_counter() - t0) * 1000, 1)
        yield sse("seeds", {"seeds": [s.model_dump() for s in cand.seeds],
                            "links": [lk.model_dump() for lk in cand.links]})
        yield sse("candidate", candidate_json(cand))
        while not slot.acquire(timeout=HEARTBEAT_S):
            # an SSE comment while queued: proxies keep the stream open, and a client
            # that went away is noticed here, before any model work runs for it
            yield ": queued for a model slot\n\n"
        sent: set[str] = set()
        for name, data in _staged(rt, cand, req, slot, t0, plan):
            if name == "done":  # the answer and its evidence
                ans, evidence = data
                break
            if not name:
                yield ": answering\n\n"
                continue
            sent.add(name)
            server_ms[name] = round((time.perf_counter() - t0) * 1000, 1)
            yield sse(name, data)
        out = answer_json(ans, evidence)
        server_ms["answered"] = round((time.perf_counter() - t0) * 1000, 1)
        # a stage the mode skipped (no retriever, no plan): sent now, from the answer
        if "selection" not in sent:
            yield sse("selection", selection_json(ans.selection))
        if "plan" not in sent:
            yield sse("plan", plan_json(ans.plan, ans.planner, ans.plan_confidence,
                                        ans.plan_runner_up, ans.plan_joint))
        yield sse("answer", {k: out[k] for k in (
            "question", "answer", "raw", "decode", "ranked", "edges", "evidence",
            "frozen", "generator", "not_in_kg", "links", "method", "reading", "turn",
            "answer_path", "plan_notice", "backend")})
        if req.view is not None:
            yield sse("view", _view(rt, ans, req, question))
        yield sse("done", {"timings_ms": out["timings_ms"], "server_ms": server_ms})
    except TalentError as e:
        code = "bad_gateway" if isinstance(e, LLMServerError) else "invalid_request"
        yield sse("error", {"error": {"code": code, "message": str(e)}})
    except Exception as e:
        log.exception("streamed ask failed")
        yield sse("error", {"error": {"code": "internal", "message": "internal error "
                                      f"({type(e).__name__}); see the server log"}})
    finally:
        slot.release()

def _staged(rt: Runtime, cand: Any, req: AskRequest, slot: Slot | NoSlot, t0: float,
            plan: Any) -> Iterator[tuple[str, Any]]:
    """`answer_on` on a thread of its own, its stages as they end: (name, data) for each
    model stage, ("", None) every `HEARTBEAT_S` without one (the stream sends a comment: a
    client that went away is noticed), then ("done", (answer, evidence)); its exception is
    raised here."""
    events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["out"] = answer_on(rt, cand, req, slot, t0, plan,
                                   on_stage=lambda name, data: events.put((name, data)))
        except BaseException as e:
            box["error"] = e
        finally:
            events.put(("done", None))

    thread = threading.Thread(target=work, name="talent-ask-stages", daemon=True)
    thread.start()
    try:
        while True:
            try:
                name, data = events.get(timeout=HEARTBEAT_S)
            except queue.Empty:
                yield "", None
                continue
            if name == "done":
                thread.join()
                if "error" in box:
                    raise box["error"]
                yield "done", box["out"]
                return
            yield name, data
    finally:  # a client that went away: the slot stays held until the model work ends
        thread.join()


@router.post("/v1/stance")
def stance(req: StanceRequestIn, _: Read, rt: Rt) -> dict[str, Any]:
    """The stance task (ExplaGraphs; `talent ask --stance --json`'s shape): ``support``
    or ``counter`` with both labels' scores, the evidence nodes and edges, which models
    decided it; through the model queue like an ask."""
    from talent_core.stance import StanceRequest, check_stance, stance_json

    rt.niced()
    request = StanceRequest(**req.model_dump())
    try:  # before a model slot is taken: a huge graph holds none
        check_stance(request, rt.settings)
    except TextInputError as e:
        part = str(e).split(":", 1)[0]
        raise input_error(e, {"argument 1": "arg1", "argument 2": "arg2"}.get(
            part, "graph")) from None
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
