"""The loading pipeline shared by every format.

    reader (streams the file)  ->  Row | BadRow | Record items, each with its file:line
      -> validation (names, self-loops, ...)        -> batch of `batch_size` valid rows
      -> per batch: de-duplicate; ask the store which entity ids / relation names it already
         holds WITH an embedding; embed only the new names (each unique text once); then
         upsert entities -> relations -> triples (MERGE: idempotent)
      -> log "committed ..." only after the store acknowledged the batch's triples.
Batch k is written on a background thread while batch k+1 is read, validated and embedded
(embedding runs in torch, writing in the store's server: they overlap); batches still commit
strictly in file order.

Memory is constant in the file size: at most two batches of rows (one being written, one
being prepared) are held; no set of all entities is kept (the store is asked per batch).

Errors (`on_error`):
  "fail" (default)  the first bad row raises `LoadError("file:line: reason")` before its batch
                    is written: nothing of that batch and nothing after it reaches the store
                    (earlier batches stay committed; a re-run after fixing the file MERGEs them).
  "skip"            bad rows go to the rejects file (JSONL: file, line, reason, raw) and the
                    rest is loaded. File-level problems (empty file, unusable header) always
                    fail.
Side outputs (RoG questions, ExplaGraphs examples) are written to a temporary file and
renamed into place only when the whole load succeeded (nothing half-written).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
from pydantic import BaseModel, Field

from loaders.io import DEFAULT_MAX_LINE_LENGTH
from talent_core.models import Edge, StoreStats
from talent_core.store.base import GraphStore
from talent_core.text import key_problem

log = logging.getLogger(__name__)

OnError = Literal["fail", "skip"]
SelfLoops = Literal["keep", "reject"]


class LoadError(Exception):
    """A load stopped on bad input; `str()` is `file:line: reason` (or `file: reason`)."""

    def __init__(self, source: str, line: int | None, reason: str, raw: str | None = None):
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")
        self.source = source
        self.line = line
        self.reason = reason
        self.raw = raw


# --- items a reader yields -------------------------------------------------------------


class Row(NamedTuple):
    """One triple read from the input. `head`/`tail` are entity ids (keys); the names are
    the display/embedding text when it differs from the id (N-Triples, ExplaGraphs)."""

    line: int
    head: str
    relation: str
    tail: str
    head_name: str | None = None
    tail_name: str | None = None
    raw: str = ""  # the source text, for error messages; may be shared by a record's rows


class BadRow(NamedTuple):
    line: int
    reason: str
    raw: str


class Record(NamedTuple):
    """A side-output record (a RoG question, an ExplaGraphs example) to keep as JSONL."""

    line: int
    data: dict[str, Any]


Item = Row | BadRow | Record


class Reader(Protocol):
    """A streaming reader of one input. Iterating yields items in file order; a reader
    raises `LoadError` itself only for problems that make the whole file unusable."""

    format: str
    source: str  # display name for messages (the path as given)
    progress_unit: str  # "B" (bytes of the file) or "rec"
    side_output: str | None  # name of the side-output kind ("questions", "examples") or None

    def __iter__(self) -> Iterator[Item]: ...

    def progress(self) -> tuple[int, int | None]:
        """(done, total) in `progress_unit`; total None when unknown."""
        ...

    def close(self) -> None: ...


# --- embeddings --------------------------------------------------------------------------


class TextEmbedder(Protocol):
    dimension: int

    def encode(self, texts: list[str]) -> np.ndarray: ...


# --- options and report ------------------------------------------------------------------


@dataclass
class LoadOptions:
    batch_size: int = 5000
    limit: int | None = None  # rows (triples) for line formats, records for rog/explagraphs
    on_error: OnError = "fail"
    rejects: Path | None = None
    self_loops: SelfLoops = "keep"
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH
    max_name_length: int = 4096  # characters; longer entity/relation names are rejected
    side_output_path: Path | None = None  # where Records go (questions/examples JSONL)
    progress: bool = True
    dry_run: bool = False  # validate only: read and check everything, write nothing
    overlap: bool = True  # write batch k while batch k+1 is read and embedded
    on_commit: Callable[[LoadProgress], None] | None = None  # called after each ack

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if self.limit is not None and self.limit < 0:
            raise ValueError("limit must be >= 0")
        if self.on_error not in ("fail", "skip"):
            raise ValueError("on_error must be 'fail' or 'skip'")
        if self.self_loops not in ("keep", "reject"):
            raise ValueError("self_loops must be 'keep' or 'reject'")


class LoadProgress(BaseModel):
    """Cumulative counts after a batch the store acknowledged."""

    batch: int
    through_line: int  # every row up to this line/record of the input is committed
    triples_committed: int  # unique-per-batch triples sent and acknowledged so far


class LoadReport(BaseModel):
    source: str
    format: str
    dry_run: bool = False
    rows_read: int = 0  # data rows seen (valid + rejected; header/comments/blank excluded)
    records: int = 0  # rog questions / explagraphs examples read
    loaded: int = 0  # unique triples written to the store (MERGE; see new_triples)
    duplicates: int = 0  # rows repeating a triple of the same batch (dropped, not an error)
    rejected: int = 0
    self_loops: int = 0  # rows with head == tail (kept unless self_loops="reject")
    whitespace_stripped: int = 0  # rows whose keys had surrounding whitespace (stripped)
    new_entities_embedded: int = 0
    new_relations_embedded: int = 0
    batches: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0  # in the embedder
    write_seconds: float = 0.0  # in store calls (existence checks and writes)
    read_seconds: float = 0.0  # reading, parsing, validating, de-duplicating
    # store time by call: existence checks, entity / relation / triple upserts
    store_seconds_by_call: dict[str, float] = Field(default_factory=dict)
    triples_per_s: float = 0.0
    triples_per_s_excl_embed: float = 0.0
    store_before: StoreStats | None = None
    store_after: StoreStats | None = None
    new_triples: int | None = None  # store triple count delta (rows already stored excluded)
    rejects_file: str | None = None
    side_output_file: str | None = None


# --- validation ------------------------------------------------------------------------


def _bad_name(value: str, what: str, max_len: int) -> str | None:
    if not value or not value.strip():
        return f"empty {what}"
    if len(value) > max_len:
        return f"{what} longer than {max_len} characters"
    problem = key_problem(value)  # the stores' rule for keys (NUL, surrounding spaces)
    if problem is not None:
        return f"{what} {problem}"
    return None


def normalise_row(row: Row) -> tuple[Row, bool]:
    """Strip surrounding whitespace from ids, relation and names (the stores cannot keep
    it: FalkorDB's exact-match index trims it, so `"ab "` and `"ab"` would be one key).
    Returns the row and whether anything changed."""
    h, r, t = row.head.strip(), row.relation.strip(), row.tail.strip()
    hn = row.head_name.strip() if row.head_name is not None else None
    tn = row.tail_name.strip() if row.tail_name is not None else None
    if (h, r, t, hn, tn) == row[1:6]:
        return row, False
    return row._replace(head=h, relation=r, tail=t, head_name=hn, tail_name=tn), True


def row_text(row: Row) -> str:
    """A readable rendering of a row without its source text (RoG graph triples)."""
    return json.dumps([row.head, row.relation, row.tail], ensure_ascii=False)


def validate_row(row: Row, opts: LoadOptions) -> str | None:
    """The reason a syntactically parsed (and normalised) row is unusable, or None."""
    for value, what in (
        (row.head, "head"),
        (row.relation, "relation"),
        (row.tail, "tail"),
    ):
        reason = _bad_name(value, what, opts.max_name_length)
        if reason:
            return reason
    for value, what in ((row.head_name, "head name"), (row.tail_name, "tail name")):
        if value is not None:
            reason = _bad_name(value, what, opts.max_name_length)
            if reason:
                return reason
    if opts.self_loops == "reject" and row.head == row.tail:
        return f"self-loop: head and tail are the same entity {row.head!r}"
    return None


# --- side outputs and rejects (atomic files) ----------------------------------------------


class AtomicJsonl:
    """JSONL written to `<path>.tmp` and renamed over `path` by `commit()`; `abort()`
    deletes the temporary file. Nothing half-written is ever visible at `path`."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        self._f = open(self.tmp, "w", encoding="utf-8")  # noqa: SIM115 - commit/abort close
        self.count = 0

    def write(self, obj: dict[str, Any]) -> None:
        self._f.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.count += 1

    def commit(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self._f.close()
        self.tmp.unlink(missing_ok=True)


# --- the pipeline --------------------------------------------------------------------------


@dataclass
class _Batch:
    rows: list[Row] = field(default_factory=list)
    last_line: int = 0


class _Bar:
    """tqdm over the reader's progress (bytes or records) with committed triples/s."""

    def __init__(self, reader: Reader, enabled: bool):
        self.reader = reader
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            done, total = reader.progress()
            unit = reader.progress_unit
            self.bar = tqdm(
                total=total,
                unit=unit,
                unit_scale=unit == "B",
                unit_divisor=1024 if unit == "B" else 1000,
                desc=f"load {reader.format}",
                dynamic_ncols=True,
                mininterval=0.5,
            )
            self.bar.update(done)

    def read(self) -> None:
        """The input position moved (a batch was read)."""
        if self.bar is not None:
            done, _ = self.reader.progress()
            self.bar.update(max(0, done - self.bar.n))

    def update(self, triples: int, elapsed: float) -> None:
        """A batch was committed: `triples` so far."""
        if self.bar is None:
            return
        rate = triples / elapsed if elapsed > 0 else 0.0
        self.bar.set_postfix_str(f"committed={triples:,} triples, {rate:,.0f} triples/s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _batches(
    reader: Reader,
    opts: LoadOptions,
    report: LoadReport,
    reject: Callable[[int, str, str], None],
    on_record: Callable[[Record], None],
) -> Iterator[_Batch]:
    """Validated batches of rows; bad rows go to `reject` (which raises in fail mode)."""
    batch = _Batch()
    limit = opts.limit
    record_format = reader.side_output is not None  # the limit counts records, not rows
    for item in reader:
        if isinstance(item, Record):
            if limit is not None and report.records >= limit:
                break
            report.records += 1
            on_record(item)
            continue
        if not record_format and limit is not None and report.rows_read >= limit:
            break
        report.rows_read += 1
        if isinstance(item, BadRow):
            reject(item.line, item.reason, item.raw)
            continue
        item, changed = normalise_row(item)
        report.whitespace_stripped += changed
        reason = validate_row(item, opts)
        if reason is not None:
            reject(item.line, reason, item.raw or row_text(item))
            continue
        if item.head == item.tail:
            report.self_loops += 1
        batch.rows.append(item)
        batch.last_line = item.line
        if len(batch.rows) >= opts.batch_size:
            yield batch
            batch = _Batch()
    if batch.rows:
        yield batch


@contextlib.contextmanager
def _timed(report: LoadReport, call: str) -> Iterator[None]:
    """Add the time of a store call to write_seconds and store_seconds_by_call[call]."""
    t = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t
        report.write_seconds += dt
        by = report.store_seconds_by_call
        by[call] = by.get(call, 0.0) + dt


@dataclass
class _Prepared:
    """A batch ready to write: unique edges plus the rows of the entities / relations that
    are new (not in the store, not in the batch being written) with their embeddings."""

    number: int
    last_line: int
    edges: list[Edge]
    entities: list[tuple[str, str, Any]]
    relations: list[tuple[str, Any]]


class _Writer:
    """Writes prepared batches on one background thread, so that the next batch is read,
    validated and embedded while the store works on this one (double buffering: at most
    one batch in flight and one in preparation, so memory stays bounded).

    `submit()` first waits for the previous batch's acknowledgement (and re-raises its
    error), so batches commit strictly in file order. The "committed" log line and the
    `on_commit` callback come from the writer thread, only after the store returned from
    the batch's last write."""

    def __init__(
        self,
        store: GraphStore,
        opts: LoadOptions,
        report: LoadReport,
        source: str,
        bar: _Bar,
        t0: float,
    ):
        from concurrent.futures import ThreadPoolExecutor

        self.store = store
        self.opts = opts
        self.report = report
        self.source = source
        self.bar = bar
        self.t0 = t0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="loader-writer")
        self._pending: Any = None
        # ids / relation names being written by the in-flight batch: the batch in
        # preparation must not embed them again (the store may not have them yet)
        self.inflight_entities: set[str] = set()
        self.inflight_relations: set[str] = set()

    def submit(self, prep: _Prepared) -> None:
        self.wait()
        self.inflight_entities = {e[0] for e in prep.entities}
        self.inflight_relations = {r[0] for r in prep.relations}
        if self.opts.overlap:
            self._pending = self._pool.submit(self._write, prep)
        else:
            self._write(prep)

    def wait(self) -> None:
        """Block until the in-flight batch is acknowledged; re-raise its error."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _write(self, prep: _Prepared) -> None:
        r = self.report
        if prep.entities:
            with _timed(r, "entities"):
                self.store.upsert_entities(prep.entities)
        if prep.relations:
            with _timed(r, "relations"):
                self.store.upsert_relations(prep.relations)
        with _timed(r, "triples"):
            self.store.upsert_triples(prep.edges)
        r.loaded += len(prep.edges)
        r.batches += 1
        prog = LoadProgress(
            batch=prep.number, through_line=prep.last_line, triples_committed=r.loaded
        )
        # Logged only now: the store has acknowledged every write of this batch.
        log.info(
            "committed batch %d: %d triples (cumulative), through %s:%d",
            prog.batch,
            prog.triples_committed,
            self.source,
            prog.through_line,
        )
        if self.opts.on_commit is not None:
            self.opts.on_commit(prog)
        self.bar.update(r.loaded, time.perf_counter() - self.t0)


def run_load(
    reader: Reader,
    store: GraphStore | None,
    embedder: TextEmbedder | None,
    opts: LoadOptions,
) -> LoadReport:
    """Load everything `reader` yields into `store`. Raises `LoadError` on bad input in fail
    mode (and for file-level problems in any mode); returns the report otherwise."""
    t0 = time.perf_counter()
    report = LoadReport(source=reader.source, format=reader.format, dry_run=opts.dry_run)
    if not opts.dry_run:
        if store is None or embedder is None:
            raise ValueError("a store and an embedder are needed unless dry_run")
        report.store_before = store.stats()
    rejects = AtomicJsonl(opts.rejects) if opts.rejects is not None else None
    side = (
        AtomicJsonl(opts.side_output_path)
        if opts.side_output_path is not None
        and reader.side_output is not None
        and not opts.dry_run  # a dry run writes nothing but the rejects file
        else None
    )

    def reject(line: int, reason: str, raw: str) -> None:
        report.rejected += 1
        if opts.on_error == "fail":
            raise LoadError(reader.source, line, reason, raw)
        log.debug("%s:%d: rejected: %s", reader.source, line, reason)
        if rejects is not None:
            rejects.write({"file": reader.source, "line": line, "reason": reason, "raw": raw})

    def on_record(rec: Record) -> None:
        if side is not None:
            side.write(rec.data)

    bar = _Bar(reader, opts.progress)
    writer = (
        _Writer(store, opts, report, reader.source, bar, t0)  # type: ignore[arg-type]
        if not opts.dry_run
        else None
    )
    ok = False
    try:
        try:
            batches = _batches(reader, opts, report, reject, on_record)
            n = 0
            while True:
                t = time.perf_counter()
                batch = next(batches, None)
                report.read_seconds += time.perf_counter() - t
                if batch is None:
                    break
                n += 1
                bar.read()
                prep = _prepare(n, batch, store, embedder, opts, report, writer)
                if writer is None:
                    report.batches += 1
                    report.loaded += len(prep.edges)
                    bar.update(report.loaded, time.perf_counter() - t0)
                else:
                    writer.submit(prep)
        finally:
            # Bad input or an interrupt while a valid, complete batch is in flight: let it
            # commit (it precedes the bad row); a store error is re-raised here.
            if writer is not None:
                writer.wait()
        if report.rows_read == 0 and report.records == 0:
            raise LoadError(reader.source, None, "empty input: no data rows")
        if report.loaded + report.duplicates == 0 and report.rejected > 0:
            raise LoadError(
                reader.source,
                None,
                f"no valid rows: all {report.rejected} data rows were rejected"
                + (f" (see {opts.rejects})" if opts.rejects else ""),
            )
        ok = True
    finally:
        if writer is not None:
            writer.close()
        bar.close()
        reader.close()
        for f in (rejects, side):
            if f is None:
                continue
            # rejects are kept for a failed skip-mode load too (they explain it); a side
            # output only exists for a complete, successful load
            if ok or (f is rejects and opts.on_error == "skip"):
                f.commit()
            else:
                f.abort()

    report.rejects_file = str(opts.rejects) if rejects is not None else None
    report.side_output_file = str(opts.side_output_path) if side is not None else None
    report.seconds = time.perf_counter() - t0
    if report.seconds > 0:
        report.triples_per_s = report.loaded / report.seconds
    # excluding embeddings: reading/validating plus the store's time, as if run serially
    # (with overlap, embedding and writing run at the same time; this does not count it)
    excl = report.read_seconds + report.write_seconds
    if excl > 0:
        report.triples_per_s_excl_embed = report.loaded / excl
    if not opts.dry_run and store is not None:
        report.store_after = store.stats()
        assert report.store_before is not None
        report.new_triples = report.store_after.triples - report.store_before.triples
    return report


def _prepare(
    number: int,
    batch: _Batch,
    store: GraphStore | None,
    embedder: TextEmbedder | None,
    opts: LoadOptions,
    report: LoadReport,
    writer: _Writer | None,
) -> _Prepared:
    """De-duplicate the batch; find and embed its new entity and relation names."""
    t = time.perf_counter()
    seen: set[tuple[str, str, str]] = set()
    edges: list[Edge] = []
    names: dict[str, str] = {}  # entity id -> name (first seen in the batch)
    relations: dict[str, None] = {}
    for r in batch.rows:
        key = (r.head, r.relation, r.tail)
        if key in seen:
            report.duplicates += 1
            continue
        seen.add(key)
        edges.append(Edge(src=r.head, rel=r.relation, dst=r.tail))
        names.setdefault(r.head, r.head_name if r.head_name is not None else r.head)
        names.setdefault(r.tail, r.tail_name if r.tail_name is not None else r.tail)
        relations.setdefault(r.relation)
    report.read_seconds += time.perf_counter() - t
    prep = _Prepared(number, batch.last_line, edges, [], [])
    if writer is None:
        return prep
    assert store is not None and embedder is not None

    with _timed(report, "checks"):
        have = store.existing_entities(list(names))
        have |= writer.inflight_entities & names.keys()
        new_ids = [i for i in names if i not in have]
        have_rel = store.existing_relations(list(relations))
        have_rel |= writer.inflight_relations & relations.keys()
        new_rels = [r for r in relations if r not in have_rel]

    t = time.perf_counter()
    if new_ids:
        vecs = embedder.encode([names[i] for i in new_ids])
        prep.entities = [(i, names[i], v) for i, v in zip(new_ids, vecs, strict=True)]
    if new_rels:
        vecs = embedder.encode(new_rels)
        prep.relations = [(n, v) for n, v in zip(new_rels, vecs, strict=True)]
    report.embed_seconds += time.perf_counter() - t
    report.new_entities_embedded += len(new_ids)
    report.new_relations_embedded += len(new_rels)
    return prep
