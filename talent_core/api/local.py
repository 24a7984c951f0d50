"""The warm model process of a data dir: `talent ask` answers through a `talent serve
--socket` that stays up between commands, so only the first ask of a while loads the models.

One per data dir and settings (the socket's name carries a fingerprint of every setting that
changes an answer: the base model, adapters, planner, decoding, store, ...), started on first
use, detached, and stopped by itself after TALENT_MODEL_SERVER_IDLE_TIMEOUT seconds without a
request (0: no warm process; every `talent ask` loads the models itself). It listens on a
unix socket in the data dir only, never on a TCP port: the data dir's ownership rules
(`check_data_dir`: ours, 0700, no foreign file in it) are its access control, as they are
the embedded store's, so it asks for no API key.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from talent_core.api.process import wait_up
from talent_core.config import Settings
from talent_core.errors import ApiClientError

log = logging.getLogger(__name__)

_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux (104 on macOS)
START_TIMEOUT_S = 120.0  # the process answering /healthz (its models load on the first ask)
# settings that do not change an answer (or are the warm process's own)
_NOT_ANSWERS = {"api_key", "api_url", "api_host", "api_port", "api_preload", "api_docs",
                "api_llm_slots", "api_llm_queue", "api_model_process", "api_load_nice",
                "api_browse_nice", "api_load_dirs", "api_max_body_kb", "api_max_rejects",
                "model_server_idle_timeout", "server_idle_timeout", "embedded_keep_alive",
                "neo4j_password", "world_size", "local_rank"}


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (the warm model process of a data dir)."""

    def __init__(self, path: str, timeout: float = 600.0):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def fingerprint(settings: Settings) -> str:
    """12 hex digits naming what answers: every setting that changes an answer."""
    kept = settings.model_dump(mode="json", exclude=_NOT_ANSWERS)
    if settings.llm_api_key is not None:  # dumped as "**********": a new key, a new process
        key = settings.llm_api_key.get_secret_value().encode()
        kept["llm_api_key"] = hashlib.sha256(b"talent-llm-key:" + key).hexdigest()
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:12]


def socket_path(settings: Settings) -> Path:
    """Where the warm process of these settings listens (in the data dir)."""
    return Path(settings.data_dir).expanduser() / f"models-{fingerprint(settings)}.sock"


def server_settings(settings: Settings) -> Settings:
    """The warm process's settings: one model slot, its models in its own process (no model
    child: one interpreter, one copy of the weights), everything at one priority."""
    return settings.model_copy(update={"api_llm_slots": 1, "api_model_process": False,
                                       "api_browse_nice": 0, "api_load_nice": 0,
                                       "api_preload": False})  # the first ask loads them


def usable(settings: Settings) -> bool:
    """Whether a warm process may serve these settings: switched on, and a socket path short
    enough for a unix socket."""
    if settings.model_server_idle_timeout <= 0:
        return False
    path = socket_path(settings)
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        log.info("no warm model process: the data dir's path is too long for a unix socket "
                 "(%s)", path)
        return False
    return True


def _answers(path: Path, timeout: float = 2.0) -> bool:
    """Whether a warm process answers /healthz on ``path``."""
    conn = UnixHTTPConnection(str(path), timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def ensure_running(settings: Settings) -> Path:
    """The socket of the warm process of ``settings``, started (detached) when none answers;
    one start at a time per socket (a lock file beside it). ApiClientError when it does not
    come up."""
    from talent_core.store._common import ensure_data_dir

    ensure_data_dir(Path(settings.data_dir))  # ours, private: or refused
    path = socket_path(settings)
    if _answers(path):
        return path
    lock = path.with_suffix(".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _answers(path):  # another command started it meanwhile
            return path
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a stale socket of a process that died
        logfile = path.with_suffix(".log")
        with open(logfile, "ab", opener=lambda p, f: os.open(p, f, 0o600)) as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "talent_core", "serve", "--socket", str(path)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True)
        log.info("started the warm model process (pid %d) on %s", proc.pid, path)
        if not wait_up(proc, lambda: _answers(path), START_TIMEOUT_S, interval=0.1):
            raise ApiClientError(f"the warm model process did not start (exit "
                                 f"{proc.poll()}); its log: {logfile}")
        return path
    finally:
        os.close(fd)


def watch_idle(server: Any, rt: Any, path: Path, timeout: float) -> None:
    """Stop ``server`` (a uvicorn.Server serving ``rt``'s app on ``path``) once ``timeout``
    seconds pass without a request while no ask or load runs, or when its socket is
    deleted or replaced (its data dir removed): run on a thread of its own."""
    seen: tuple[int, int] | None = None
    while not server.should_exit:
        time.sleep(min(5.0, max(timeout / 10, 0.2)))
        try:
            st = os.stat(path)
            now: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            now = None
        if seen is None:
            seen = now
        elif now != seen:
            log.warning("the socket %s is gone (its data dir deleted?): stopping", path)
            server.should_exit = True
        idle = time.monotonic() - rt.last_request
        if idle > timeout and not rt.llm.admitted and not rt.loads.busy():
            log.info("no request for %.0f s (TALENT_MODEL_SERVER_IDLE_TIMEOUT): stopping", idle)
            server.should_exit = True


def checked_socket(settings: Settings, path: Path) -> Path:
    """``path`` as the warm process may listen on it: in the data dir (checked, made if
    absent), whose ownership rules are the socket's access control; DataDirError else."""
    from talent_core.errors import DataDirError
    from talent_core.store._common import ensure_data_dir

    data_dir = ensure_data_dir(Path(settings.data_dir))
    path = Path(os.path.abspath(path))
    if path.parent.resolve() != data_dir:
        raise DataDirError(f"--socket {path}: the socket must be in the data dir {data_dir} "
                           "(its ownership rules are the socket's access control)")
    return path
