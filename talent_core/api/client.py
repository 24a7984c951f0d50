"""A client of `talent serve` for `talent ask` and the UI: the server's models answer, so the
caller loads none of its own.

Which server: TALENT_API_URL (with TALENT_API_KEY), else the discovery file a running
`talent serve` writes in its data dir (`api-server.json`: url, host, port, pid; removed at
shutdown; one whose pid is gone is ignored). Plain `urllib` (no HTTP library to import: a
`talent ask` over HTTP should start fast).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, Field, ValidationError

from talent_core.api.schemas import entity_token
from talent_core.config import Settings
from talent_core.errors import ApiClientError
from talent_core.explore import EXPLORE_CAPS, EntityMatch, Evidence, Hop
from talent_core.models import (
    Answer,
    Edge,
    Entity,
    SourceChange,
    SourcesReport,
    StoreStats,
    Subgraph,
    Turn,
)

log = logging.getLogger(__name__)

DISCOVERY_FILE = "api-server.json"
LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # bound to all: ask here


class ServerInfo(BaseModel):
    """What a running `talent serve` says about itself in its data dir."""

    url: str
    host: str
    port: int
    pid: int


def _url(host: str, port: int) -> str:
    host = LOOPBACK.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def discovery_path(data_dir: Path) -> Path:
    return Path(data_dir).expanduser() / DISCOVERY_FILE


def write_discovery(data_dir: Path, host: str, port: int) -> Path:
    """Announce this process as the server of ``data_dir`` (replaced atomically)."""
    path = discovery_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    info = ServerInfo(url=_url(host, port), host=host, port=port, pid=os.getpid())
    fd, tmp = tempfile.mkstemp(prefix=".api-server.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(info.model_dump_json())
    os.replace(tmp, path)
    return path


def remove_discovery(data_dir: Path) -> None:
    """Withdraw the announcement if it is this process's (a newer server's stays)."""
    path = discovery_path(data_dir)
    info = _read(path)
    if info is not None and info.pid == os.getpid():
        path.unlink(missing_ok=True)


def _read(path: Path) -> ServerInfo | None:
    try:
        return ServerInfo.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def discovered(data_dir: Path) -> ServerInfo | None:
    """The server announced in ``data_dir``, unless there is none, the file is unreadable,
    or its process is gone (a server that was killed leaves a stale file)."""
    info = _read(discovery_path(data_dir))
    if info is None:
        return None
    if not pid_alive(info.pid):
        log.info("ignoring %s: its server (pid %d) is gone", discovery_path(data_dir),
                 info.pid)
        return None
    return info


class RemoteAnswer(BaseModel):
    """An ask answered by the server: ``answer`` the pipeline's Answer (as `Pipeline.ask`
    returns it, the closest names filled in), ``document`` the `talent ask --json` shape;
    with ``view="ui"`` also what the Ask page draws beside it (``evidence`` of every answer,
    the out-of-candidate ``joins``, the ``evidence_entities`` off S, the topics not in the
    KG)."""

    answer: Answer
    document: dict[str, Any]
    evidence: list[Evidence] = Field(default_factory=list)
    joins: list[Hop] = Field(default_factory=list)
    evidence_entities: list[Entity] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list)  # the question's topic entities
    missing: dict[str, list[str]] = Field(default_factory=dict)  # topic -> closest names


def multipart(fields: dict[str, str | None], file: tuple[str, str, bytes]) -> tuple[bytes, str]:
    """A multipart/form-data body (the fields that are not None, then the file) and its
    content type."""
    boundary = "talent-" + uuid.uuid4().hex
    parts = []
    for k, v in fields.items():
        if v is not None:
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"'
                         f"\r\n\r\n{v}\r\n".encode())
    field, name, content = file
    safe = name.replace('"', "_").replace("\r", "_").replace("\n", "_")
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
                 f'filename="{safe}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                 .encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class ApiClient:
    """A few calls of the HTTP API, returning the pipeline's own pydantic models. ``uds``:
    the unix socket of a data dir's warm model process (no key: the data dir's ownership
    is its access control) instead of ``url``."""

    def __init__(self, url: str, key: str, timeout: float = 600.0, uds: Path | None = None):
        self.url, self._key, self.timeout, self.uds = url.rstrip("/"), key, timeout, uds

    @classmethod
    def local(cls, settings: Settings) -> ApiClient | None:
        """The client of the data dir's warm model process (`api.local`), started when none
        runs; None when it is switched off or cannot serve these settings."""
        from talent_core.api import local

        if not local.usable(settings):
            return None
        path = local.ensure_running(settings)
        return cls(f"unix:{path}", "", uds=path)

    @classmethod
    def from_settings(cls, settings: Settings, discover: bool = True) -> ApiClient | None:
        """The client of TALENT_API_URL, else (``discover``) of the server announced in the
        data dir; None when there is neither, or no TALENT_API_KEY (said in the log)."""
        key = settings.api_key.get_secret_value() if settings.api_key else ""
        url = settings.api_url
        if not url and discover:
            info = discovered(settings.data_dir)
            url = info.url if info else None
            if url and not key:
                log.warning("a talent serve is up at %s (pid %d) but TALENT_API_KEY is not "
                            "set: answering here, loading the models", url,
                            info.pid if info else -1)
                return None
        if not url:
            return None
        if not key:
            raise ApiClientError(f"TALENT_API_URL is {url} but TALENT_API_KEY is not set "
                                 "(create a read key with `talent keys create`)")
        return cls(url, key)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              raw: tuple[bytes, str] | None = None, parse: bool = True) -> Any:
        """One request: a JSON ``body`` or ``raw`` (bytes, content type); the JSON answer
        (``parse`` False: its bytes)."""
        data, ctype = (json.dumps(body).encode("utf-8"), "application/json") \
            if body is not None else raw if raw is not None else (None, None)
        if self.uds is not None:
            return self._call_uds(method, path, data, ctype, parse)
        req = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Authorization": f"Bearer {self._key}", "Accept": "application/json",
                     **({"Content-Type": ctype} if ctype is not None else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:  # noqa: S310 (http(s) URL from settings)
                out = r.read()
                return json.loads(out) if parse else out
        except urllib.error.HTTPError as e:
            raise self._refused(e.code, e.read(), e.reason) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ApiClientError(f"cannot reach talent serve at {self.url}: {reason}") from None

    def _call_uds(self, method: str, path: str, data: bytes | None, ctype: str | None,
                  parse: bool) -> Any:
        """`_call` over the warm process's unix socket."""
        from talent_core.api.local import UnixHTTPConnection

        conn = UnixHTTPConnection(str(self.uds), timeout=self.timeout)
        try:
            conn.request(method, path, body=data, headers={
                "Accept": "application/json",
                **({"Content-Type": ctype} if ctype is not None else {})})
            r = conn.getresponse()
            out = r.read()
        except (OSError, http.client.HTTPException) as e:
            raise ApiClientError(f"cannot reach the warm model process at {self.uds}: "
                                 f"{e}") from None
        finally:
            conn.close()
        if r.status >= 400:
            raise self._refused(r.status, out, r.reason)
        return json.loads(out) if parse else out

    def _refused(self, status: int, body: bytes, reason: str) -> ApiClientError:
        """The error of a refused request: the server's `{"error": ...}` code and message."""
        try:
            err = json.loads(body).get("error", {})
        except (ValueError, AttributeError):
            err = {}
        return ApiClientError(f"{self.url}: {status} {err.get('message') or reason}",
                              status=status, code=err.get("code"))

    def stats(self) -> StoreStats:
        return StoreStats.model_validate(self._call("GET", "/v1/stats"))

    # --- the stance task ------------------------------------------------------------------
    def stance(self, arg1: str, arg2: str, graph: str | None = None, use_kg: bool = True,
               mode: str = "full") -> Any:
        """POST /v1/stance: support / counter decided by the server's models (a
        `stance.StanceAnswer` without the full answer-stage output)."""
        from talent_core.stance import StanceAnswer  # not on `talent ask`'s import path

        out = self._call("POST", "/v1/stance", {"arg1": arg1, "arg2": arg2, "graph": graph,
                                                 "use_kg": use_kg, "mode": mode})
        return StanceAnswer.model_validate(out)

    # --- sources and loads (the Load page) ------------------------------------------------
    def sources(self) -> SourcesReport:
        return SourcesReport.model_validate(self._call("GET", "/v1/sources"))

    def remove_source(self, source: int | str) -> SourceChange:
        """`talent unload`: DELETE /v1/sources/{id} for an id (an int), DELETE
        /v1/sources?name=NAME for a name (any name, `/` included)."""
        if isinstance(source, int):
            return SourceChange.model_validate(self._call("DELETE", f"/v1/sources/{source}"))
        return SourceChange.model_validate(
            self._call("DELETE", "/v1/sources?name=" + quote(source, safe="")))

    def start_load(self, name: str, content: bytes, fmt: str | None = None,
                   on_error: str = "fail", replace: str | None = None,
                   delimiter: str | None = None, columns: str | None = None,
                   limit: int | None = None, dry_run: bool = False,
                   vectors: str = "now") -> dict[str, Any]:
        """POST /v1/loads with the file as a multipart upload (`talent load`'s options);
        the job (poll `load`)."""
        fields = {"on_error": on_error, "format": fmt, "replace": replace,
                  "delimiter": delimiter, "columns": columns,
                  "limit": None if limit is None else str(limit),
                  "dry_run": "true" if dry_run else None,
                  "vectors": vectors if vectors != "now" else None}
        body, ctype = multipart(fields, ("file", name, content))
        return self._call("POST", "/v1/loads", raw=(body, ctype))

    def load(self, job_id: str) -> dict[str, Any]:
        """GET /v1/loads/{id}: status, progress (rows, triples/s, ETA), result or error."""
        return self._call("GET", f"/v1/loads/{quote(job_id, safe='')}")

    def cancel_load(self, job_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/loads/{quote(job_id, safe='')}")

    def start_adapt(self, anchors: int | None = None) -> dict[str, Any]:
        """`talent train planner --self` on the server: POST /v1/planner/adapt (``anchors``:
        the server's default where None)."""
        return self._call("POST", "/v1/planner/adapt",
                          {} if anchors is None else {"anchors": anchors})

    def adapt(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/planner/adapt/{job_id}")

    def cancel_adapt(self, job_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/planner/adapt/{job_id}")

    def load_rejects(self, job_id: str) -> bytes:
        """The job's rejected rows (JSON lines)."""
        return self._call("GET", f"/v1/loads/{quote(job_id, safe='')}/rejects", parse=False)

    def entities(self, q: str, k: int = 10) -> list[EntityMatch]:
        """GET /v1/entities: the entities for a typed name (`explore.find_entities`)."""
        from urllib.parse import urlencode

        out = self._call("GET", "/v1/entities?" + urlencode({"q": q, "k": k}))
        return [EntityMatch(entity=Entity(id=e["kg_id"], name=e["name"]), how=e["how"],
                            score=e["score"]) for e in out["entities"]]  # fmt: skip

    def neighbourhood(self, ids: list[str], hops: int, caps: Any) -> Subgraph:
        """GET /v1/entities/{id}/neighbours as the store's `neighbourhood` of one entity,
        one hop (what the Explore page reads: `explore.one_hop`, `expand_step`), so that page
        browses through the server."""
        if len(ids) != 1 or hops != 1:
            raise ApiClientError("the API gives one entity's 1-hop neighbours")
        query = "" if caps == EXPLORE_CAPS else f"?limit={int(caps.fanout)}"
        out = self._call("GET", f"/v1/entities/{entity_token(ids[0])}/neighbours{query}")
        kg = {n["id"]: n["kg_id"] for n in out["nodes"]}
        return Subgraph(nodes=[Entity(id=n["kg_id"], name=n["name"]) for n in out["nodes"]],
                        edges=[Edge(src=kg[e["src"]], rel=e["rel"], dst=kg[e["dst"]])
                               for e in out["edges"]],
                        truncated=out["truncated"])

    def ask(self, question: str, topic_entities: list[str] | None = None, mode: str = "full",
            decode: str | None = None, view: str = "cli", history: Sequence[Turn] = (),
            **retrieval: Any) -> RemoteAnswer:
        """POST /v1/ask; ``view`` "cli" or "ui" (what comes beside the answer); ``history``:
        the turns a follow-up may refer to, oldest first."""
        body: dict[str, Any] = {"question": question, "mode": mode, "retrieval": retrieval,
                                "view": view}
        if history:
            body["history"] = [t.model_dump() for t in history]
        if topic_entities:
            body["topic_entities"] = topic_entities
        if decode:
            body["decode"] = decode
        out = self._call("POST", "/v1/ask", body)
        try:
            extra = out.pop("talent_view")
            return RemoteAnswer(document=out, **extra)
        except (KeyError, TypeError, ValidationError) as e:
            raise ApiClientError(f"{self.url}: /v1/ask answered in an unexpected shape "
                                 f"({type(e).__name__}): is it an older talent serve?") from None
