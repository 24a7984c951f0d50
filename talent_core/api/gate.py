"""The API's gate (ASGI middleware): every request's key and body size are checked before
its body is read. FastAPI parses a JSON body or a multipart form before any dependency runs,
so without it an unauthenticated client could make the server hold or spool a body of any
size.

Each route's scope comes from the route itself: a route depending on `auth.read_key` needs a
read key, on `auth.write_key` a write key, on neither (/healthz, the docs) none; a path no
route matches needs a read key (a 401 says nothing of which paths exist). The key found is
kept in the request's state for the route's own dependency. Bodies: an upload route (one
depending on `upload_body`) may bring TALENT_MAX_UPLOAD_MB, every other request
TALENT_API_MAX_BODY_KB; a declared Content-Length over that is refused at once (413), and a
body without one is counted as it arrives and cut at the limit."""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from talent_core.api.auth import KEY_STATE, ApiError, check_key, error_response, read_key, write_key
from talent_core.api.keys import ApiKey

log = logging.getLogger(__name__)

ENVELOPE = 64 * 1024  # a multipart upload's boundaries, part headers and form fields
# the key of every request to the warm model process: its unix socket in the data dir is
# reachable by the data dir's owner alone, who may load and ask anyway
LOCAL_KEY = ApiKey(id="00000000", name="local socket", scope="write", sha256="", created="")


def upload_body() -> None:
    """Marks a route whose body is an upload (the upload limit applies, not the JSON one)."""


def _needs(route: Any) -> tuple[str | None, bool]:
    """(the key scope ``route`` needs or None, whether its body is an upload)."""
    if not isinstance(route, APIRoute):
        return None, False
    calls: set[Any] = set()
    todo = [route.dependant]
    while todo:
        d = todo.pop()
        calls.add(d.call)
        todo.extend(d.dependencies)
    scope = "write" if write_key in calls else "read" if read_key in calls else None
    return scope, upload_body in calls


def _flat(routes: list[Any]) -> list[Any]:
    """The app's routes with those of included routers in their place (FastAPI keeps an
    included router as one entry; this API includes its routers without a prefix)."""
    out: list[Any] = []
    for r in routes:
        inner = getattr(r, "original_router", None)
        prefix = getattr(getattr(r, "include_context", None), "prefix", "")
        out.extend(_flat(inner.routes) if inner is not None and not prefix else [r])
    return out


class Gate:
    """See the module docstring. ``body_limit``: bytes of a non-upload body;
    ``upload_limit``: bytes of an upload's file; ``messages``: the 413 text of each."""

    def __init__(self, app: Any, body_limit: int, upload_limit: int,
                 body_message: str, upload_message: str, local: bool = False):
        self.app = app
        self.local = local  # the warm model process's unix socket: no key (api/local.py)
        self.body_limit, self.upload_limit = body_limit, upload_limit + ENVELOPE
        self.body_message, self.upload_message = body_message, upload_message
        self._routes: list[tuple[Any, str | None, bool]] | None = None

    def _route(self, scope: Any) -> tuple[str | None, bool]:
        if self._routes is None:  # the app's routes are all declared by the first request
            self._routes = [(r, *_needs(r)) for r in _flat(scope["app"].router.routes)]
        for route, needs, upload in self._routes:
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return needs, upload
        return "read", False  # no route: a 401 first, the 404 only to a key holder

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        needs, upload = self._route(scope)
        rt = scope["app"].state.runtime
        headers = dict(scope.get("headers", ()))  # ASGI: lower-case names, bytes
        if needs is not None and self.local:
            scope.setdefault("state", {})[KEY_STATE] = LOCAL_KEY
        elif needs is not None:
            try:
                key = check_key(rt, headers.get(b"authorization", b"").decode("latin-1"),
                                needs)  # type: ignore[arg-type]
            except ApiError as e:
                return await self._refuse(scope, receive, send, e)
            scope.setdefault("state", {})[KEY_STATE] = key
        limit = self.upload_limit if upload else self.body_limit
        message = self.upload_message if upload else self.body_message
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await self._refuse(scope, receive, send, ApiError(413, message))
        seen = 0

        async def counted() -> Any:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    raise StarletteHTTPException(413, message)
            return msg

        try:
            await self.app(scope, counted, send)
        finally:  # idle counts from the end of the last request (api/local.py)
            rt.last_request = time.monotonic()

    @staticmethod
    async def _refuse(scope: Any, receive: Any, send: Any, e: ApiError) -> None:
        """The error response, the body left unread (the server closes the connection)."""
        headers = dict(e.headers or {})
        headers["Connection"] = "close"
        response = error_response(e.status, e.code, e.message, e.field, headers)
        await response(scope, receive, send)
