"""The HTTP API's request and response models (pydantic): what a client may send is checked
here before anything runs; an unknown field is refused (422 naming it)."""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from talent_core.models import Turn

HISTORY_MAX = 20  # turns a request may carry (the last `conversation.HISTORY` count)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetrieveRequest(_Strict):
    """A question for candidate S; ``retrieval``: RetrievalConfig overrides (validated like
    the CLI's options: an unknown setting or a value out of range is a 422 naming it)."""

    question: str
    topic_entities: list[str] | None = None
    retrieval: dict[str, Any] = Field(default_factory=dict)


class AskRequest(RetrieveRequest):
    """A question to answer; ``stream``: Server-Sent Events in stage order instead of one
    JSON document (the `talent ask --json` shape); ``mode`` "retrieval": S only, no model
    slot. ``view``: the document also carries ``talent_view`` (streamed: a ``view`` event
    after ``answer``), the pipeline's own Answer model ("cli": what `talent ask` prints
    from) and for "ui" what the Ask page draws beside it (every answer's evidence,
    out-of-candidate joins, topics not in the KG), so that neither loads a model of its
    own."""

    mode: Literal["full", "no-retriever", "retrieval"] = "full"
    decode: Literal["ranked", "free"] | None = None
    stream: bool = False
    view: Literal["cli", "ui"] | None = None
    # the turns a follow-up may refer to, oldest first: each answer's ``turn`` sent back
    # (its entities are read again from the KG; only the last few count)
    history: list[Turn] = Field(default_factory=list, max_length=HISTORY_MAX)


class StanceRequestIn(_Strict):
    """The stance task (ExplaGraphs, `talent ask --stance`): two arguments, their explanation
    graph when the client has one (``(a; rel; b)(c; rel; d)``); with none, ``use_kg``
    retrieves a candidate from the loaded KG, else the stance is decided without a graph."""

    arg1: str = Field(min_length=1)
    arg2: str = Field(min_length=1)
    graph: str | None = None
    use_kg: bool = True
    mode: Literal["full", "no-retriever"] | None = None  # None: the server's stance_mode


class PathLoadRequest(_Strict):
    """A load of a file on the server (under a folder of TALENT_API_LOAD_DIRS)."""

    path: str = Field(min_length=1)
    format: str | None = None
    on_error: Literal["fail", "skip"] = "fail"
    replace: str | None = Field(None, min_length=1, description="a source (name or id) the "
                                "file replaces, as `talent load --replace`")
    delimiter: str | None = Field(None, min_length=1, description="triples files: the "
                                  "column delimiter (`talent load --delimiter`)")
    columns: str | None = Field(None, min_length=1, description="triples files: which "
                                "columns hold head, relation, tail (`--columns`)")
    limit: int | None = Field(None, ge=1, description="load only the first N rows")
    dry_run: bool = Field(False, description="check every row, write nothing")
    vectors: Literal["now", "later"] = Field(
        "now", description="`later`: the graph first, answering at once; its entities' "
        "vectors are embedded behind it (`talent load --vectors later`, `talent vectors`)")

    def options(self) -> dict[str, Any]:
        """The `talent load` options given (delimiter, columns, limit, dry_run, vectors)."""
        return load_options(self.delimiter, self.columns, self.limit, self.dry_run,
                            self.vectors)


def load_options(delimiter: str | None, columns: str | None, limit: int | None,
                 dry_run: bool, vectors: str = "now") -> dict[str, Any]:
    """The loader options a load request gave (those left out keep `talent load`'s
    defaults)."""
    given = {"delimiter": delimiter, "columns": columns, "limit": limit,
             "vectors": vectors if vectors != "now" else None}
    return {**{k: v for k, v in given.items() if v is not None},
            **({"dry_run": True} if dry_run else {})}


class ChatMessage(BaseModel):
    """An OpenAI chat message; ``content``: text, or a list of parts of which the text parts
    count (a text part's text must be a string; other parts, images say, are not read)."""

    model_config = ConfigDict(extra="ignore")

    role: str
    content: str | list[dict[str, Any]] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        if isinstance(value, list):
            for i, part in enumerate(value):
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    raise ValueError(f"part {i} must be an object with a string 'type'")
                if part["type"] == "text" and not isinstance(part.get("text"), str):
                    raise ValueError(f"part {i}: a text part's text must be a string, got "
                                     f"{type(part.get('text')).__name__}")
        return value

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p["text"] for p in self.content if p["type"] == "text")
        return self.content or ""


class ChatRequest(BaseModel):
    """An OpenAI-compatible chat completion request: the last user message is the
    question; sampling fields (temperature, ...) are accepted and ignored (the answer comes
    from the KG pipeline)."""

    model_config = ConfigDict(extra="ignore")

    model: str = "talent"
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorBody(BaseModel):
    """Every error response: ``{"error": {"code": ..., "message": ...}}``."""

    error: ErrorDetail


class EntityOut(BaseModel):
    """An entity as the API shows it: ``id`` is opaque and URL-safe (names are not unique
    and may hold "/"), ``kg_id`` the store's own id."""

    id: str
    kg_id: str
    name: str
    how: str | None = None
    score: float | None = None


class EdgeOut(BaseModel):
    src: str  # opaque ids, as EntityOut.id
    rel: str
    dst: str


class Neighbours(BaseModel):
    entity: EntityOut
    nodes: list[EntityOut]
    edges: list[EdgeOut]
    truncated: bool


class LoadJobOut(BaseModel):
    """A load job's state: ``status`` queued | running | done | failed | cancelled;
    ``progress``: rows (input lines committed), triples, triples_per_s, eta_s."""

    id: str
    status: str
    source: str
    format: str
    progress: dict[str, float | int | None] = Field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: ErrorDetail | None = None
    rejects: bool = False
    notes: list[str] = Field(default_factory=list)  # e.g. the name an upload was recorded as


def entity_token(kg_id: str) -> str:
    """The opaque, URL-safe id of a KG id (base64url, no padding)."""
    return base64.urlsafe_b64encode(kg_id.encode("utf-8")).decode("ascii").rstrip("=")


def entity_kg_id(token: str) -> str | None:
    """The KG id of an opaque id, or None when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        out = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return out if out and entity_token(out) == token else None
