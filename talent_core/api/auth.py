"""The API's error responses and its API-key dependencies (`Read`, `Write`): what every
router of `talent serve` shares (talent_core/api/app.py and the routers it includes import
them from here, so that none needs the app module)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from talent_core.api.keys import ApiKey, Scope
from talent_core.errors import ApiKeyError

log = logging.getLogger(__name__)

STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 409: "conflict", 413: "too_large",
                422: "invalid_request", 429: "busy", 500: "internal", 502: "bad_gateway",
                503: "unavailable",
                507: "disk_full"}


class ApiError(Exception):
    """An error response: status, code, message (and the bad field for a 422)."""

    def __init__(self, status: int, message: str, code: str | None = None,
                 field: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code or STATUS_CODES.get(status, "error")
        self.message = message
        self.field = field
        self.headers = headers


def error_response(status: int, code: str, message: str, field: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        body["field"] = field
    return JSONResponse({"error": body}, status_code=status, headers=headers)


KEY_STATE = "api_key"  # the request state's entry for the key the gate found


def check_key(rt: Any, authorization: str, scope: Scope) -> ApiKey:
    """The key of an Authorization header if it is valid and has ``scope`` (else 401 / 403;
    503 when the keys file cannot be used: the reason, with its path, goes to the log, the
    client learns only that the server is misconfigured)."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "missing API key: send 'Authorization: Bearer <key>' (create "
                       "one with `talent keys create`)", headers={"WWW-Authenticate": "Bearer"})
    try:
        key = rt.keys.verify(token)
    except ApiKeyError as e:
        log.error("API keys cannot be checked: %s", e)
        raise ApiError(503, "server misconfigured: the API keys cannot be checked (see the "
                       "server log)", code="keys_unreadable") from None
    if key is None:
        raise ApiError(401, "invalid or revoked API key", headers={"WWW-Authenticate": "Bearer"})
    if not key.allows(scope):
        raise ApiError(403, f"the key {key.name!r} has the {key.scope} scope; this needs "
                       f"{scope}")
    return key


def _key(request: Request, scope: Scope) -> ApiKey:
    """The request's API key: the one the gate (`api.gate.Gate`) checked before the body
    was read, else checked now."""
    key = getattr(request.state, KEY_STATE, None)
    if isinstance(key, ApiKey) and key.allows(scope):
        return key
    return check_key(request.app.state.runtime, request.headers.get("authorization", ""),
                     scope)


def read_key(request: Request) -> ApiKey:
    return _key(request, "read")


def write_key(request: Request) -> ApiKey:
    return _key(request, "write")


Read = Annotated[ApiKey, Depends(read_key)]
Write = Annotated[ApiKey, Depends(write_key)]
