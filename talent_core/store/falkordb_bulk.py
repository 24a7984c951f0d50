"""Bulk loading into an EMPTY embedded graph with FalkorDB's own bulk command, GRAPH.BULK.

Why: through MERGE statements FalkorDB parses every vector literal and MERGEs row by row;
GRAPH.BULK takes a binary buffer of nodes and edges and creates them without a query
(bench/bench_load.py measures both). Its format is spoken here directly: the
`falkordb-bulk-loader` package reads CSV files from disk, which does not fit the streaming,
validating loader.

How its limits are met:
  * no vector type: a new node carries its embedding as a list of doubles in `_v`; one
    statement after the command (cypher/falkordb/bulk_vectors) turns them into vecf32
    `embedding`s (and updates the HNSW index) while the loader prepares the next batch;
  * edges name endpoints by internal node ids and there is no MERGE: the session starts
    only on a graph without nodes (a NEW graph key, where the n-th node created gets id
    n-1), checks before every batch, under the data dir's write lock, that the node count
    is what it created, and keeps entity id -> node id (at most `max_ids`); an edge is
    bulk-written only when a Bloom filter of the load's triples says it is new. Anything
    else (another writer, the id cap, "maybe seen") goes the MERGE way.
Crash safety: each batch is ONE GRAPH.BULK command with a BULK_PENDING marker edge naming
its node-id range, then one statement converting its vectors and deleting the marker;
`finish_pending` (at the start of every load) converts what a killed loader left. A
connection error ends the session and the batch is written again the MERGE way
(idempotent).
"""
from __future__ import annotations

import contextlib
import logging
import struct
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import redis

from talent_core.models import Edge, SourceRecord
from talent_core.store._common import check_edges, check_entities, check_keys
from talent_core.store.base import Vector
from talent_core.store.cypher import statement
from talent_core.text import normalise_name

log = logging.getLogger(__name__)

# GRAPH.BULK value types (FalkorDB src/bulk_insert/bulk_insert.c)
_BI_DOUBLE, _BI_STRING, _BI_LONG, _BI_ARRAY = 2, 3, 4, 5
_CELL = np.dtype([("type", "u1"), ("value", "=f8")])  # one list element: type byte + double
MARKER = "BULK_PENDING"  # relationship type of the pending-vectors marker

Timer = Callable[[str], AbstractContextManager[Any]]


def _untimed(_call: str) -> AbstractContextManager[Any]:
    """The Timer of callers that do not time store calls."""
    return contextlib.nullcontext()


def _cstr(text: str) -> bytes:
    return text.encode("utf-8") + b"\0"


def _string(text: str) -> bytes:
    return bytes((_BI_STRING,)) + _cstr(text)


def _long(value: int) -> bytes:
    return bytes((_BI_LONG,)) + struct.pack("=q", value)


def _header(name: str, properties: Sequence[str]) -> bytes:
    return _cstr(name) + struct.pack("=I", len(properties)) + b"".join(map(_cstr, properties))


def _vector_values(vectors: np.ndarray) -> list[bytes]:
    """Each row of `vectors` as a GRAPH.BULK list of doubles."""
    n, dim = vectors.shape
    cells = np.empty((n, dim), dtype=_CELL)
    cells["type"] = _BI_DOUBLE
    cells["value"] = vectors
    head = bytes((_BI_ARRAY,)) + struct.pack("=q", dim)
    raw, step = cells.tobytes(), dim * _CELL.itemsize
    return [head + raw[i * step : (i + 1) * step] for i in range(n)]


def entity_token(rows: Sequence[tuple[str, str]], vectors: np.ndarray | None) -> bytes:
    """Entity nodes (id, name, name_lc, _v); without `_v` when `vectors` is None (a load
    that leaves the embeddings for later, `talent vectors`)."""
    if vectors is None:
        parts = [_header("Entity", ("id", "name", "name_lc"))]
        for i, name in rows:
            parts += (_string(i), _string(name), _string(normalise_name(name)))
        return b"".join(parts)
    parts = [_header("Entity", ("id", "name", "name_lc", "_v"))]
    for (i, name), vec in zip(rows, _vector_values(vectors), strict=True):
        parts += (_string(i), _string(name), _string(normalise_name(name)), vec)
    return b"".join(parts)


def relation_token(names: Sequence[str], vectors: np.ndarray) -> bytes:
    """Catalogue relation nodes (name, _v)."""
    parts = [_header("Relation", ("name", "_v"))]
    for name, vec in zip(names, _vector_values(vectors), strict=True):
        parts += (_string(name), vec)
    return b"".join(parts)


def _long_list(values: Sequence[int]) -> bytes:
    """A GRAPH.BULK list of integers."""
    return bytes((_BI_ARRAY,)) + struct.pack("=q", len(values)) + b"".join(map(_long, values))


def edge_token(edges: Sequence[tuple[int, int, str]], source: int | None = None) -> bytes:
    """:REL {rel} edges between node ids; with `source`, {rel, sources: [source]} (the load
    asserting them, as the MERGE path's assert_triples records it)."""
    pack = struct.Struct("=QQ").pack
    if source is None:
        return b"".join([_header("REL", ("rel",))]
                        + [pack(s, d) + _string(r) for s, d, r in edges])  # fmt: skip
    tail = _long_list([source])
    return b"".join([_header("REL", ("rel", "sources"))]
                    + [pack(s, d) + _string(r) + tail for s, d, r in edges])  # fmt: skip


_SOURCE_FIELDS = ("id", "name", "sha256", "format", "created", "state", "rows_read", "loaded",
                  "rejected")  # fmt: skip


def source_token(record: SourceRecord) -> bytes:
    """The load's (:Source) node, written by the first batch's GRAPH.BULK: the id the
    triples carry is then recorded as soon as any triple carries it."""
    values = record.model_dump()
    parts = [_header("Source", _SOURCE_FIELDS)]
    for f in _SOURCE_FIELDS:
        v = values[f]
        parts.append(_long(v) if isinstance(v, int) else _string("" if v is None else str(v)))
    return b"".join(parts)


def marker_token(lo: int, hi: int) -> bytes:
    """The BULK_PENDING {lo, hi} self-loop on node `lo`: vectors of [lo, hi) not converted."""
    return _header(MARKER, ("lo", "hi")) + struct.pack("=QQ", lo, lo) + _long(lo) + _long(hi)


class SeenTriples:
    """A Bloom filter of the triples a load wrote (fixed memory: 2**bits_log2 bits).
    `maybe_seen` is exact for "no" and may say "yes" wrongly (~1 % at 10M triples with the
    default 16 MiB); a "yes" only sends an edge through MERGE."""

    def __init__(self, bits_log2: int = 27, hashes: int = 3):
        self.size = 1 << bits_log2
        self.hashes = hashes
        self.bits = np.zeros(self.size // 8, dtype=np.uint8)

    def _positions(self, keys: Sequence[tuple[str, str, str]]) -> np.ndarray:
        h = np.fromiter((hash(k) for k in keys), dtype=np.int64, count=len(keys))
        h = h.view(np.uint64)
        step = (h >> np.uint64(29)) | np.uint64(1)
        k = np.arange(self.hashes, dtype=np.uint64)[:, None]
        return ((h[None, :] + k * step[None, :]) & np.uint64(self.size - 1)).astype(np.int64)

    def maybe_seen(self, keys: Sequence[tuple[str, str, str]]) -> np.ndarray:
        """Boolean per key: True = maybe written before, False = certainly not."""
        if not keys:
            return np.zeros(0, dtype=bool)
        pos = self._positions(keys)
        hit = (self.bits[pos >> 3] >> (pos & 7).astype(np.uint8)) & 1
        return hit.all(axis=0).astype(bool)

    def add(self, keys: Sequence[tuple[str, str, str]]) -> None:
        if not keys:
            return
        pos = self._positions(keys).ravel()
        np.bitwise_or.at(self.bits, pos >> 3, (1 << (pos & 7)).astype(np.uint8))


@dataclass
class Staged:
    """A batch encoded for GRAPH.BULK against the session's state after `batches` batches
    (`BulkSession.stage`)."""

    lo: int  # node ids [lo, hi) of the batch's new entities and relations
    hi: int
    vlo: int  # node ids [vlo, hi) arrive with a vector to convert (> lo: entities without)
    extra: int  # nodes after hi: the load's Source node (first batch only)
    batches: int
    new_ids: dict[str, int]
    relations: list[str]
    keys: list[tuple[str, str, str]]
    n_bulk_edges: int
    merge_edges: list[Edge]  # maybe written already, or an endpoint not created by the load
    nodes: list[bytes]  # GRAPH.BULK node tokens
    rels: list[bytes]  # relationship tokens (edges, then the marker)


class BulkAbandoned(Exception):
    """The session cannot write this batch (another writer, a lost connection, the id cap);
    the caller writes it the MERGE way."""


class BulkTarget(Protocol):
    """What a session needs of its store, `falkordb.FalkorDBStore` (a Protocol, so that this
    module does not import the store module that imports it)."""

    server: Any  # the EmbeddedServer: its write lock

    def _connect(self) -> Any: ...
    def _checked_vectors(self, *args: Any, **kwargs: Any) -> Any: ...
    def lost_server(self) -> None: ...
    def ensure_schema(self, dimension: int) -> None: ...
    def upsert_triples(self, edges: Sequence[Edge], source: int | None = None) -> int: ...
    def finish_pending_bulk(self) -> int: ...


class BulkSession:
    """Writes the batches of one load into an empty graph with GRAPH.BULK (see the module
    docstring). Created by `FalkorDBStore.bulk_session`; `active` turns False for good
    when the MERGE path has to take over."""

    def __init__(self, store: BulkTarget, dimension: int, max_ids: int):
        self.store = store
        self.dimension = dimension
        self.max_ids = max_ids
        self.active = True
        self.began = False  # the first batch created the graph key
        self.next_id = 0  # internal id of the next node created
        self.node_ids: dict[str, int] = {}  # entity id -> internal node id
        self.relations: set[str] = set()
        self.seen = SeenTriples()
        self.batches = 0
        self.pending: tuple[int, int] | None = None  # node ids [lo, hi) not yet converted
        # the load's source: its id on every edge, its node in the first batch (None: the
        # edges record no source, a legacy write)
        self.source: SourceRecord | None = None
        self.asserted_new = 0  # assertions of the source the session wrote (all new)

    # --- what the load has written (used instead of store look-ups while active) ----------
    def known_entities(self, ids: Sequence[str]) -> set[str]:
        d = self.node_ids
        return {i for i in ids if i in d}

    def known_relations(self, names: Sequence[str]) -> set[str]:
        return {n for n in names if n in self.relations}

    # --- writing ----------------------------------------------------------------------------
    def stage(
        self,
        entities: Sequence[tuple[str, str, Vector | None]],
        relations: Sequence[tuple[str, Vector]],
        edges: Sequence[Edge],
        timer: Timer | None = None,
    ) -> Staged:
        """The Python half of a batch ("encode"): the checks the MERGE path applies, node
        ids, the edges left for MERGE, and the GRAPH.BULK buffers. It reads what earlier
        GRAPH.BULK commands of the session wrote, not the server, so the loader runs it
        while the previous batch's vectors convert; `write` re-stages if anything changed."""
        timer = timer or _untimed
        st = self.store
        with timer("encode"):
            check_entities(entities)
            check_keys("relation name", (r[0] for r in relations))
            check_edges(edges)
            later = sum(e[2] is None for e in entities)
            if later not in (0, len(entities)):
                raise ValueError("a bulk batch's entities come all with embeddings or all "
                                 "without")
            evecs = None if later else st._checked_vectors(
                [e[2] for e in entities], "entity", [e[0] for e in entities]
            )
            rvecs = st._checked_vectors(
                [r[1] for r in relations], "relation", [r[0] for r in relations]
            )
            lo = self.next_id
            hi = lo + len(entities) + len(relations)
            new_ids = {e[0]: lo + k for k, e in enumerate(entities)}
            keys = [(e.src, e.rel, e.dst) for e in edges]
            bulk_edges, merge_edges = self._split_edges(edges, keys, new_ids)
            nodes = []
            if entities:
                nodes.append(entity_token([(e[0], e[1]) for e in entities], evecs))
            if relations:
                nodes.append(relation_token([r[0] for r in relations], rvecs))
            extra = 0
            if self.source is not None and self.batches == 0:
                nodes.append(source_token(self.source))  # node id hi
                extra = 1
            sid = self.source.id if self.source is not None else None
            rels = [edge_token(bulk_edges, sid)] if bulk_edges else []
            vlo = lo + later  # entities first, then relations: only these carry `_v`
            if hi > vlo:
                rels.append(marker_token(vlo, hi))
        return Staged(
            lo=lo, hi=hi, vlo=vlo, extra=extra, batches=self.batches, new_ids=new_ids,
            relations=[r[0] for r in relations], keys=keys, n_bulk_edges=len(bulk_edges),
            merge_edges=merge_edges, nodes=nodes, rels=rels,
        )  # fmt: skip

    def write(
        self, entities: Sequence[tuple[str, str, Vector | None]],
        relations: Sequence[tuple[str, Vector]], edges: Sequence[Edge],
        timer: Timer | None = None, defer_vectors: bool = False, staged: Staged | None = None,
    ) -> bool:
        """Write one batch (new entities with embeddings, new relations, unique edges).
        False (the session has ended; nothing of the batch may have been applied, or all of
        it): the caller writes the batch through the MERGE statements.

        `staged`: this batch's `stage()`, made earlier (used if the session wrote nothing
        since). `defer_vectors`: return right after GRAPH.BULK (and the schema after batch
        1), leaving the batch's vector conversion, where the server spends most of a batch's
        time (vecf32 and the HNSW inserts), to `convert_pending()`. The loader runs that on
        its writer thread while it prepares and stages the next batch (pure Python: nothing
        else talks to the server meanwhile); the next `write` converts first if it is still
        pending."""
        timer = timer or _untimed
        self.convert_pending(timer)  # the previous batch's, if the caller deferred it
        if not self.active:
            return False
        if staged is None or (staged.lo, staged.batches) != (self.next_id, self.batches):
            staged = self.stage(entities, relations, edges, timer)
        if len(self.node_ids) + len(entities) > self.max_ids:
            log.info("bulk load: more than %d entities; the MERGE path takes over", self.max_ids)
            self._end()
            return False
        try:
            self._bulk(staged, timer)
        except BulkAbandoned as e:
            log.warning("bulk load: %s; the MERGE path takes over", e)
            self._end()
            return False
        st = self.store
        if not self.began:
            self.began = True
            with timer("schema"):
                st.ensure_schema(self.dimension)
        self.asserted_new += staged.n_bulk_edges  # the load has not written them: new
        if staged.merge_edges:
            with timer("triples"):
                self.asserted_new += st.upsert_triples(
                    staged.merge_edges, self.source.id if self.source is not None else None)
        self.batches += 1
        if not defer_vectors:
            self.convert_pending(timer)
        return True

    def convert_pending(self, timer: Timer | None = None) -> None:
        """Convert the vectors of the last batch written, if not done yet ("vectors":
        vecf32 and the HNSW index). A lost connection here ends the session: the batch is
        complete (GRAPH.BULK answered), and the hand-over converts it through its marker."""
        if self.pending is None:
            return
        timer = timer or _untimed
        lo, hi = self.pending
        st = self.store
        try:
            with st.server.write_lock(), timer("vectors"):
                self._convert(st._connect(), lo, hi)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            st.lost_server()  # ENOSPC when it died on a full disk
            log.warning("bulk load: lost the server converting vectors (%s); the MERGE path "
                        "takes over", e)  # fmt: skip
            self.pending = None
            self._end()  # finish_pending_bulk converts the batch
            return
        self.pending = None

    def _bulk(self, b: Staged, timer: Timer) -> None:
        """The GRAPH.BULK command ("bulk") of a staged batch, under the write lock; the
        batch's node ids are left in `pending` for `convert_pending`."""
        st = self.store
        with st.server.write_lock():
            try:
                g = st._connect()
                with timer("bulk"):
                    count = self._prepare_new_key(g) if not self.began else _node_count(g)
                    if count != self.next_id:
                        raise BulkAbandoned(
                            f"the graph holds {count} nodes, this load wrote {self.next_id}: "
                            "another writer is at work"
                        )
                    if b.nodes or b.rels:
                        args: list[Any] = ["BEGIN"] if not self.began else []
                        n_edges = b.n_bulk_edges + (1 if b.hi > b.vlo else 0)  # + the marker
                        n_nodes = b.hi - b.lo + b.extra
                        args += [n_nodes, n_edges, len(b.nodes), len(b.rels), *b.nodes,
                                 *b.rels]  # fmt: skip
                        _check_reply(g.execute_command("GRAPH.BULK", g.name, *args), n_nodes)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
                st.lost_server()  # ENOSPC when it died on a full disk
                raise BulkAbandoned(f"lost the server during a bulk batch ({e})") from None
        self.next_id = b.hi + b.extra
        if b.hi > b.vlo:
            self.pending = (b.vlo, b.hi)
        self.node_ids.update(b.new_ids)
        self.relations.update(b.relations)
        self.seen.add(b.keys)

    def _convert(self, g: Any, lo: int, hi: int) -> None:
        """bulk_vectors over the batch's node ids [lo, hi): every one of them must have
        been converted, or the ids were not the predicted ones."""
        res = g.query(statement("bulk_vectors", "falkordb"), {"lo": lo, "hi": hi})
        converted = res.result_set[0][0]
        if converted != hi - lo:
            # another loader may have finished this batch through its marker meanwhile
            # (finish_pending_bulk, while the conversion waited for the write lock)
            res = g.query(statement("bulk_converted", "falkordb"), {"lo": lo, "hi": hi})
            converted = res.result_set[0][0]
        if converted != hi - lo:
            # stop before any more harm (the count check before the command makes this a
            # should-not-happen)
            raise RuntimeError(
                f"bulk load: converted {converted} vectors of node ids [{lo}, {hi}), "
                f"expected {hi - lo}: the graph was written by another writer meanwhile"
            )

    def _split_edges(
        self, edges: Sequence[Edge], keys: list[tuple[str, str, str]], new_ids: dict[str, int]
    ) -> tuple[list[tuple[int, int, str]], list[Edge]]:
        """(node id pairs to bulk-write, edges to MERGE): an edge is bulk-written only when
        this load certainly has not written its triple and both endpoints are nodes it
        created."""
        ids = self.node_ids
        bulk_edges, merge_edges = [], []
        for e, maybe in zip(edges, self.seen.maybe_seen(keys), strict=True):
            s = new_ids.get(e.src, ids.get(e.src))
            d = new_ids.get(e.dst, ids.get(e.dst))
            if maybe or s is None or d is None:
                merge_edges.append(e)
            else:
                bulk_edges.append((s, d, e.rel))
        return bulk_edges, merge_edges

    def _prepare_new_key(self, g: Any) -> int:
        """Before the first batch: the graph must have no node; its key (an empty schema)
        is deleted so that GRAPH.BULK BEGIN creates it anew (node ids from 0)."""
        count = _node_count(g)
        if count == 0:
            with contextlib.suppress(redis.ResponseError):  # no key: nothing to delete
                g.delete()
        return count

    def _end(self) -> None:
        """Hand over to the MERGE path: the schema exists (it may have been deleted for
        BEGIN) and no batch is left with unconverted vectors."""
        self.active = False
        st = self.store
        st.finish_pending_bulk()
        st.ensure_schema(self.dimension)


def _node_count(g: Any) -> int:
    try:
        rows = g.query(statement("node_count", "falkordb")).result_set
    except redis.ResponseError as e:
        if "empty key" in str(e).lower():
            return 0
        raise
    return int(rows[0][0]) if rows else 0


def _check_reply(reply: Any, nodes: int) -> None:
    text = reply.decode() if isinstance(reply, bytes) else str(reply)
    if not text.startswith(f"{nodes} nodes created"):
        raise RuntimeError(f"GRAPH.BULK answered {text!r}, expected {nodes} nodes created")

