"""The OpenAI-compatible endpoint of `talent serve` (`POST /v1/chat/completions`, and its
stream) for existing chat clients and SDKs: the last user message is the question, the
answers are the content, the whole `talent ask --json` document travels in the extension
field ``talent``."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from talent_core.api.ask import answer_on, checked
from talent_core.api.auth import ApiError, Read
from talent_core.api.runtime import Rt, Runtime, Slot
from talent_core.api.schemas import AskRequest, ChatRequest
from talent_core.errors import TalentError
from talent_core.explore import answer_json

log = logging.getLogger(__name__)

router = APIRouter(tags=["ask"])


MODEL = "talent"  # the one model this server answers as: the KG pipeline


@router.get("/v1/models")
def models(_: Read, rt: Rt) -> dict[str, Any]:
    """OpenAI's model list (what its clients ask first): the KG pipeline, as ``talent``; a
    chat request may name any model and is answered by it."""
    return {"object": "list", "data": [{"id": MODEL, "object": "model",
                                        "created": int(rt.started), "owned_by": "talent"}]}


def chat_text(out: dict[str, Any]) -> str:
    """A chat answer's text: the answers, or why there are none; an unsure plan's notice
    on a line of its own."""
    if out["not_in_kg"]:
        return "Not in the KG: " + ", ".join(out["not_in_kg"])
    text = " | ".join(out["answer"]) or "(no answer)"
    notice = out.get("plan_notice")
    return f"{text}\n(note: {notice})" if notice else text


@router.post("/v1/chat/completions")
def chat_completions(req: ChatRequest, _: Read, rt: Rt) -> Any:
    """OpenAI's chat completion (and its stream) for existing chat clients and SDKs: the
    last user message is the question, the answers are the content, the whole
    `talent ask --json` document travels in the extension field ``talent``."""
    rt.niced()
    user = [m for m in req.messages if m.role == "user"]
    if not user:
        raise ApiError(422, "messages: no user message (its text is the question)",
                       field="messages")
    ask_req = AskRequest(question=user[-1].text())
    question, _o = checked(rt, ask_req)
    slot = rt.llm.admit()
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()),
            "model": req.model}
    if req.stream:
        return StreamingResponse(_chat_events(rt, question, ask_req, slot, base),
                                 media_type="text/event-stream",
                                 background=BackgroundTask(slot.release))
    try:
        t0 = time.perf_counter()
        cand, plan = rt.pipe.retrieve_planned(question)
        ans, evidence = answer_on(rt, cand, ask_req, slot, t0, plan)
    finally:
        slot.release()
    out = answer_json(ans, evidence)
    return {**base, "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": chat_text(out)}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            "talent": out}

def _chat_events(rt: Runtime, question: str, req: AskRequest, slot: Slot,
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
        ans, evidence = answer_on(rt, cand, req, slot, t0, plan)
        out = answer_json(ans, evidence)
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
