"""The embedded store: a graph key on the FalkorDB server of a data dir (`falkordb_server`
starts and supervises that server; see its docstring for durability and restarts).

Talks to the server with the `falkordb` client over its unix socket (its Bolt port is
broken; see DEVELOPERS.md). Statements are the files of cypher/falkordb (falling back to
cypher/neo4j); reads and writes are `CypherStore`'s.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import redis
from falkordb import FalkorDB
from falkordb.helpers import quote_string
from redis.backoff import NoBackoff
from redis.retry import Retry

from talent_core.models import Entity, ScoredEntity, ScoredRelation
from talent_core.store._common import chunks, lookup_keys
from talent_core.store.base import Vector
from talent_core.store.cypher import statement, statements
from talent_core.store.cypher_store import CypherStore, Row
from talent_core.store.falkordb_bulk import BulkSession
from talent_core.store.falkordb_server import EmbeddedServer
from talent_core.text import redisearch_fuzzy_query, redisearch_query

log = logging.getLogger(__name__)

# The only DDL error that means "already there" (FalkorDB has no IF NOT EXISTS).
_ALREADY = ("already indexed",)
_EMPTY_KEY = "empty key"  # any query on a graph key that does not exist yet
# what the server logs when a write of its AOF fails on a full disk (then, with appendfsync
# always, it exits: "Can't recover from AOF write error ... Exiting")
_DISK_FULL = ("no space left on device", "short write while writing to the aof")
_SERVER_START = "Redis is starting"  # the first line a server start logs
_FULL_BELOW = 1 << 20  # free bytes under which a data dir's disk counts as full


def disk_full_error(server: EmbeddedServer) -> OSError | None:
    """ENOSPC naming the AOF folder when the server of `server`'s data dir is gone and its
    last run logged a failed write on a full disk, or its disk is full (its last words may
    not have fit in the log); None otherwise. The store then stops instead of restarting a
    server that would die on its next write again."""
    why = None
    try:
        with open(server.logfile, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - (64 << 10)))
            tail = f.read().decode("utf-8", errors="replace")
        last_run = tail.rsplit(_SERVER_START, 1)[-1]
        why = next((f"could not write its append-only file and stopped (server log "
                    f"{server.logfile}: {x.strip()!r})" for x in reversed(last_run.splitlines())
                    if any(k in x.lower() for k in _DISK_FULL)), None)  # fmt: skip
    except OSError:
        pass
    if why is None:
        try:
            st = os.statvfs(server.data_dir)
        except OSError:
            return None
        if st.f_bavail * st.f_frsize >= _FULL_BELOW:
            return None
        why = f"stopped with its disk full ({st.f_bavail * st.f_frsize:,} bytes free)"
    if server.ping():
        return None
    return OSError(
        errno.ENOSPC,
        f"no space left on device: the embedded FalkorDB server {why}; free space there, "
        "then run the command again (batches committed so far are stored; a reload MERGEs "
        "them)",
        str(server.data_dir / "appendonlydir"),
    )


class _Literal:
    """A parameter value rendered ahead of time as a Cypher literal.

    The falkordb client sends parameters as a `CYPHER name=<literal>` header and renders
    values with `str()` unless they are str/list/dict/None. Its generic renderer is slow per
    float (a KG's vectors hold millions); batches of vectors are rendered here with the same
    quoting (`quote_string`) and a vectorised float path instead. Still a parameter: user text
    never becomes query text."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


def _render_rows(fields: dict[str, list[str]], vectors: np.ndarray | None = None) -> _Literal:
    """[{f1: "..", ..., embedding: [..]}, ...] as one Cypher list literal (without
    `embedding` when `vectors` is None)."""
    # 8 decimals: below float32 precision at the scale of normalised components, and the
    # shortest repr of the rounded float64 is short to write and to parse.
    names = list(fields)
    cols = list(fields.values())
    out = []
    if vectors is None:
        for values in zip(*cols, strict=True):
            parts = [f"{n}:{quote_string(v)}" for n, v in zip(names, values, strict=True)]
            out.append("{" + ",".join(parts) + "}")
        return _Literal("[" + ",".join(out) + "]")
    for i, vec in enumerate(np.round(vectors, 8).tolist()):
        parts = [f"{name}:{quote_string(col[i])}" for name, col in fields.items()]
        parts.append("embedding:[" + ",".join(map(repr, vec)) + "]")
        out.append("{" + ",".join(parts) + "}")
    return _Literal("[" + ",".join(out) + "]")


def _render_strings(values: Sequence[str]) -> _Literal:
    """["..", ...] as one Cypher list literal."""
    return _Literal("[" + ",".join(map(quote_string, values)) + "]")


class FalkorDBStore(CypherStore):
    """GraphStore on the embedded FalkorDB of `data_dir`, graph key `graph`.

    The server starts on the first query, not in the constructor. Several stores (graph
    names) may share one data dir and server."""

    dialect = "falkordb"

    def __init__(
        self,
        data_dir: Path,
        graph: str = "talent",
        batch_size: int = 5000,
        vector_batch_size: int = 1000,
        index_timeout: float = 600.0,
        keep_alive: bool = False,
        idle_timeout: float = 0.0,
    ):
        """``keep_alive``: a server started here runs until `talent server stop`;
        ``idle_timeout`` > 0: it is detached, outlives this process and stops after that
        many seconds without a client; neither: it stops when this process exits (see
        `falkordb_server`)."""
        self.server = EmbeddedServer.for_dir(Path(data_dir))
        self.server.keep_alive = self.server.keep_alive or keep_alive
        if idle_timeout > 0:
            self.server.idle_timeout = idle_timeout
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
        return cls(Path(settings.data_dir), settings.graph_name, batch_size=settings.batch_size,
                   keep_alive=settings.embedded_keep_alive,
                   idle_timeout=settings.server_idle_timeout)

    def __repr__(self) -> str:
        return f"FalkorDBStore({str(self.data_dir)!r}, graph={self.graph_name!r})"

    @property
    def location(self) -> str:
        return f"falkordb:{self.data_dir}#{self.graph_name}"

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
        or killed), restart it and retry once: every write here is an idempotent MERGE.
        A server that died on a full disk is not restarted: ENOSPC (`disk_full_error`)."""
        try:
            return fn(self._connect())
        except (redis.ConnectionError, redis.TimeoutError) as e:
            self.lost_server()
            log.warning("embedded FalkorDB unreachable (%s); restarting it and retrying", e)
        try:
            return fn(self._connect())
        except (redis.ConnectionError, redis.TimeoutError):
            self.lost_server()
            raise

    def lost_server(self) -> None:
        """Drop the connection to a server that stopped answering; raise ENOSPC when it
        died on a full disk (no restart, no retry)."""
        self._disconnect()
        full = disk_full_error(self.server)
        if full is not None:
            raise full from None

    def _run(
        self, text: str, params: dict[str, Any] | None = None, write: bool = False
    ) -> list[Row]:
        if write:
            with self.server.write_lock():
                return self._call(lambda g: g.query(text, params)).result_set
        try:
            return self._call(lambda g: g.ro_query(text, params)).result_set
        except redis.ResponseError as e:
            if _EMPTY_KEY in str(e).lower():  # the graph was never written: it is empty
                return []
            raise

    def _fulltext_query(self, text: str) -> str:
        return redisearch_query(text)

    def _fuzzy_query(self, text: str) -> str:
        return redisearch_fuzzy_query(text)

    def _vector_rows(self, fields: dict[str, list[str]], vectors: np.ndarray) -> _Literal:
        return _render_rows(fields, vectors)

    def _rows_param(self, fields: dict[str, list[str]]) -> _Literal:
        return _render_rows(fields)

    def _keys_param(self, keys: Sequence[str]) -> _Literal:
        return _render_strings(keys)

    # --- bulk loading into an empty graph (falkordb_bulk) ----------------------------------
    def bulk_session(self, dimension: int, max_ids: int) -> BulkSession | None:
        """A GRAPH.BULK session for a load into this graph when it has no node yet (None
        otherwise). Batches an earlier bulk load left with unconverted vectors (it was
        killed between its two commands) are finished first, whatever the answer."""
        self.finish_pending_bulk()
        rows = self._read("node_count")
        if rows and int(rows[0][0]) > 0:
            return None
        return BulkSession(self, dimension, max_ids)

    def finish_pending_bulk(self) -> int:
        """Convert the vectors of bulk batches left pending (see falkordb_bulk); returns
        how many batches there were."""
        pending = self._read("bulk_pending")
        for lo, hi in pending:
            log.warning("finishing the vectors of an interrupted bulk batch (nodes %d-%d)", lo, hi)
            self._write("bulk_vectors", {"lo": int(lo), "hi": int(hi)})
        return len(pending)

    def _topk_params(self, k: int, vector: Vector) -> dict[str, Any]:
        # 2k + 10 candidates: room for stale HNSW entries (see cypher/falkordb/top_entities)
        return {**super()._topk_params(k, vector), "fetch": 2 * int(k) + 10}

    def top_entities(self, vector: Vector, k: int) -> list[ScoredEntity]:
        rows = self._top("top_entities", "entity_count", k, vector)
        return [ScoredEntity(entity=Entity(id=i, name=n), score=float(s)) for i, n, s in rows]

    def top_relations(self, vector: Vector, k: int) -> list[ScoredRelation]:
        rows = self._top("top_relations", "relation_count", k, vector)
        return [ScoredRelation(name=n, score=float(s)) for n, s in rows]

    def _top(self, name: str, count: str, k: int, vector: Vector) -> list[Row]:
        """A vector top-k whose over-fetch grows (x8, three times at most) while fewer than
        k live nodes came back and more exist: deleted nodes (an unload below the index
        rebuild's threshold, loaders/sources.py) keep their HNSW entries until a restart."""
        if k < 1:
            return []
        params = self._topk_params(k, vector)
        rows = self._read(name, params)
        for _ in range(3):
            if len(rows) >= k:
                break
            live = self._read(count)
            if not live or len(rows) >= int(live[0][0]):
                break
            params = {**params, "fetch": params["fetch"] * 8}
            rows = self._read(name, params)
        return rows

    def _vectors(self, name: str, param: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors in FalkorDB's verbose result format: the compact format's client
        parses each float in Python; the verbose one returns a vector as one `<x, y, ...>`
        string that numpy parses in one call (6 decimals, 5e-7 from the stored float32)."""
        if not keys:
            return {}
        text = statement(name, self.dialect)
        out: dict[str, np.ndarray] = {}
        for chunk in chunks(lookup_keys(keys), self.batch_size):
            params = {param: list(chunk)}

            def raw(g: Any, params: dict[str, Any] = params) -> Any:
                try:
                    return g.execute_command("GRAPH.RO_QUERY", g.name,
                                             g._build_params_header(params) + text)
                except redis.ResponseError as e:
                    if _EMPTY_KEY in str(e).lower():
                        return [[], [], []]
                    raise

            rows = self._call(raw)[1]
            if not rows:
                continue
            flat = ",".join(str(r[1])[1:-1] for r in rows)
            m = np.array(flat.split(","), dtype=np.float32).reshape(len(rows), -1)
            m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
            out.update(zip((str(r[0]) for r in rows), m, strict=True))
        return out

    def close(self) -> None:
        """Close this store's connection. The server keeps running until the process that
        started it exits (or `stop_server()`), so other stores/processes can use it."""
        self._disconnect()

    def stop_server(self) -> None:
        """Close, and shut the server down if this process started it."""
        self._disconnect()
        self.server.stop()

    # --- schema --------------------------------------------------------------------------
    def _create_schema(self, dimension: int) -> None:
        # One process at a time per data dir (two loaders on a fresh dir both created
        # indexes and both rewrote the AOF; one died on "rewriting already in progress").
        self._connect()  # start the server (if needed) before taking the lock
        with self.server.schema_lock():
            created = False
            for q in statements("schema", self.dialect):
                try:
                    self._run(q, {"dimension": dimension}, write=True)
                    created = True
                except redis.ResponseError as e:
                    if not any(s in str(e).lower() for s in _ALREADY):
                        raise
            self._await_schema()
            if created:
                # FalkorDB builds an index asynchronously, and not while it replays the AOF
                # at start-up: write queries replayed after a CREATE INDEX in the AOF then
                # scan every node (a MetaQA replay took over 6 minutes). An AOF rewrite now
                # puts the (empty) indexes into the RDB base, where loading builds them first.
                # through _call: if another process stopped the server meanwhile, restart
                # it and retry (the rewrite is idempotent)
                self._call(lambda _g: self.server.rewrite_aof())

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

    def rebuild_vector_indexes(self) -> None:
        """Build both vector indexes again from the live nodes (after an unload deleted
        entities or relations; see cypher/falkordb/drop_vector_index). Idempotent: a run
        killed between the drop and the rebuild is finished by the next one."""
        dims = self._index_dimensions()
        if not dims:
            rows = self._read("embedded_entity")
            vecs = self.entity_vectors([rows[0][0]]) if rows else {}
            dims = {len(v) for v in vecs.values()}
        if len(dims) != 1:
            return  # no vectors at all: nothing to index
        dimension = dims.pop()
        for q in statements("drop_vector_index", self.dialect):
            try:
                self._run(q, write=True)
            except redis.ResponseError as e:
                if "no such index" not in str(e).lower():
                    raise
        self._dimension = None
        self.ensure_schema(dimension)

    def vector_indexes_missing(self) -> bool:
        """True when entities hold embeddings but a vector index is gone (a rebuild killed
        between its drop and its create): loaders/sources.py then rebuilds them. Waits for
        indexes under construction first: FalkorDB rebuilds a label's index asynchronously
        after a field is dropped, and lists the dropped field until it is done."""
        self._await_schema()
        labels = {str(label) for label, dim in self._read("vector_dimensions") if dim is not None}
        return not {"Entity", "Relation"} <= labels and bool(self._read("embedded_entity"))

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
