"""The OpenAI-compatible endpoint of `talent serve` (`POST /v1/chat/completions`, and its
stream) for existing chat clients and SDKs: the last user message is the question (a
follow-up of the earlier messages, `chat_history`), the answers are the content, the whole
`talent ask --json` document travels in the extension field ``talent``."""

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
from talent_core.api.schemas import AskRequest, ChatMessage, ChatRequest
from talent_core.conversation import HISTORY
from talent_core.errors import TalentError
from talent_core.explore import answer_json, entities_named
from talent_core.models import Entity, Turn

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
    """A chat answer's text: the answers (" | " between them: `chat_history` reads them
    back), or why there are none; how a follow-up was read and an unsure plan's notice on
    lines of their own."""
    if out["not_in_kg"]:
        return "Not in the KG: " + ", ".join(out["not_in_kg"])
    lines = [" | ".join(out["answer"]) or "(no answer)"]
    if out.get("reading"):
        lines.append(f"({out['reading']['text']})")
    if out.get("plan_notice"):
        lines.append(f"(note: {out['plan_notice']})")
    return "\n".join(lines)


def _named(store: Any, names: list[str]) -> list[Entity]:
    """The KG's entities a reply's names name: of a name several entities share in other
    casings ("Big" and the tag "big"), the ones spelt as the reply spells it."""
    found = entities_named(store, names)
    out: list[Entity] = []
    for n in names:
        same = [e for e in found if e.name.casefold() == n.casefold()]
        out += [e for e in same if e.name == n] or same
    return list({e.id: e for e in out}.values())


def chat_history(rt: Runtime, messages: list[ChatMessage]) -> list[Turn]:
    """The turns before the last user message, read back from the chat's own text (an
    OpenAI client sends the history, not our answer documents): each earlier question's
    anchors as the pipeline links it (a follow-up read against the turns before it), each
    reply's first line split at " | " into names the KG holds; the last `HISTORY` pairs."""
    pairs: list[tuple[str, str]] = []
    pending: str | None = None
    for m in messages[:-1] if messages and messages[-1].role == "user" else messages:
        if m.role == "user":
            pending = m.text()
        elif m.role == "assistant" and pending is not None:
            pairs.append((pending, m.text()))
            pending = None
    turns: list[Turn] = []
    for question, reply in pairs[-HISTORY:]:
        first = reply.strip().splitlines()[0] if reply.strip() else ""
        names = [] if first.startswith(("Not in the KG", "(no answer)", "error:")) else [
            n.strip() for n in first.split(" | ") if n.strip()]
        try:
            topic = rt.pipe.anchors_of(question, turns)
        except TalentError:  # an earlier question the pipeline refuses: nothing to refer to
            topic = []
        answers = _named(rt.pipe.store, names) if names else []
        turns.append(Turn(question=question, topic=topic, answers=answers))
    return turns


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
    ask_req.history = chat_history(rt, req.messages)
    slot = rt.llm.admit()
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()),
            "model": req.model}
    if req.stream:
        return StreamingResponse(_chat_events(rt, question, ask_req, slot, base),
                                 media_type="text/event-stream",
                                 background=BackgroundTask(slot.release))
    try:
        t0 = time.perf_counter()
        cand, plan = rt.pipe.retrieve_planned(question, None, ask_req.history)
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
        cand, plan = rt.pipe.retrieve_planned(question, None, req.history)
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
