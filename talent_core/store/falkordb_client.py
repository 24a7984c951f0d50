"""Talking to the embedded FalkorDB server of a data dir over its unix socket (no retries:
a server that does not answer is said at once): the connection, PING, the AOF rewrite, and
`server_status` (what `talent server status` and `talent stats` say)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from talent_core.errors import EmbeddedServerError


def connect(socket: Path, timeout: float | None = 2.0) -> redis.Redis:
    """A client of the server on ``socket`` (``timeout`` s to connect and per reply)."""
    return redis.Redis(
        unix_socket_path=str(socket),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def answers(socket: Path) -> bool:
    """True when a server answers on ``socket`` (False while it is still loading)."""
    if not socket.exists():
        return False
    c = connect(socket)
    try:
        return bool(c.ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    finally:
        c.close()


def rewrite_aof(socket: Path, data_dir: Path, logfile: Path, timeout: float = 600.0) -> None:
    """BGREWRITEAOF and wait for it: the data then loads from an RDB base (indexes built
    at load) instead of replaying every write query."""
    c = connect(socket, timeout=None)
    deadline = time.monotonic() + timeout

    def wait() -> dict:
        while True:
            info = c.info("persistence")
            if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                return info
            if time.monotonic() > deadline:
                raise TimeoutError(f"AOF rewrite of {data_dir} still running")
            time.sleep(0.02)

    try:
        for _ in range(20):
            try:
                c.bgrewriteaof()
                break
            except redis.ResponseError as e:
                # another process's rewrite (or Redis's automatic one) is running: it
                # may have started before our writes, so wait for it, then run ours
                if "in progress" not in str(e).lower():
                    raise
                wait()
        info = wait()
        if info.get("aof_last_bgrewrite_status") != "ok":
            raise EmbeddedServerError(f"AOF rewrite failed; see {logfile}")
    finally:
        c.close()


def aof_growth(socket: Path) -> int:
    """Bytes written to the AOF since its last rewrite (0 when the server does not say)."""
    c = connect(socket)
    try:
        info = c.info("persistence")
        return int(info.get("aof_current_size", 0)) - int(info.get("aof_base_size", 0))
    except (redis.RedisError, OSError, ValueError):
        return 0
    finally:
        c.close()


def server_status(data_dir: Path, socket: Path, logfile: Path, state_file: Path) -> dict:
    """Where the store is and whether its server runs: data_dir, socket, log, running,
    loading, pid, since (ISO time), uptime_s, and from `falkordb.server.json` how it
    ends: mode (detached / owner / kept; None for a server this version did not
    start), idle_timeout (seconds, detached only), owner_pid, stops (in words)."""
    out: dict = {"data_dir": str(data_dir), "socket": str(socket),
                 "log": str(logfile), "running": False, "loading": False,
                 "pid": None, "since": None, "uptime_s": None, "mode": None,
                 "idle_timeout": None, "owner_pid": None, "stops": None}
    if not socket.exists():
        return out
    c = connect(socket)
    try:
        info = c.info("server")
        out["loading"] = bool(c.info("persistence").get("loading"))
    except (redis.RedisError, OSError):
        return out
    finally:
        c.close()
    pid, uptime = int(info.get("process_id", 0)) or None, int(info.get("uptime_in_seconds", 0))
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    if not isinstance(state, dict) or state.get("pid") != pid:
        state = {}  # a stale record, or a server an older version started
    since = state.get("started") or time.time() - uptime
    out.update(running=True, pid=pid, uptime_s=uptime,
               since=datetime.fromtimestamp(since).astimezone().isoformat(timespec="seconds"))
    if state:
        mode = state.get("mode")
        out.update(mode=mode, owner_pid=state.get("owner_pid"))
        if mode == "detached":
            out["idle_timeout"] = timeout = float(state.get("idle_timeout") or 0)
            out["stops"] = (f"after {timeout:g} s without a client "
                            "(TALENT_SERVER_IDLE_TIMEOUT), or with `talent server stop`")
        elif mode == "owner":
            out["stops"] = f"when process {state.get('owner_pid')} that started it exits"
        elif mode == "kept":
            out["stops"] = "with `talent server stop`"
    return out


def status_text(st: dict) -> str:
    """`EmbeddedServer.status()` in words (`talent server status`, `talent stats`)."""
    where = f"data dir {st['data_dir']}"
    if not st["running"]:
        return f"{where}; server: not running (a command starts it when it needs it)"
    state = "loading its data" if st["loading"] else "running"
    line = (f"{where}; server: {state}, pid {st['pid']}, since {st['since']}, "
            f"socket {st['socket']}")
    return line + (f"; stops {st['stops']}" if st["stops"] else "")
