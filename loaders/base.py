"""The loading pipeline shared by every format.

    reader (streams the file)  ->  Row | BadRow | Record items, each with its file:line
      -> validation (names, self-loops, ...)        -> batch of `batch_size` valid rows
      -> per batch: de-duplicate; ask the store which entity ids / relation names it already
         holds WITH an embedding; embed only the new names (each unique text once); then
         upsert entities -> relations -> triples (MERGE: idempotent)
      -> log "committed ..." only after the store acknowledged the batch's triples.
Batch k is written on a background thread while batch k+1 is read, validated and embedded
(embedding runs in torch, writing in the store's server: they overlap); batches still commit
strictly in file order. The bulk path (an empty embedded graph) sends each batch's GRAPH.BULK
from this thread and only its vector conversion runs on the writer thread (see
loaders/writer.py and talent_core/store/falkordb_bulk.py).

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
Cancel (`LoadOptions.cancel`, asked before each batch is read): the load stops at that batch
boundary; the batches read so far commit (exactly, as in a load with a smaller input), the
rejects file is kept, the side output is dropped, and the report says `cancelled`.

Modules: items (what readers yield, `Reader`), errors, options (options and report),
validation (row checks), writer (the background writer and progress); this one runs a load
and re-exports those names.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from talent_core.embedding import TextEmbedder
from talent_core.errors import LoadError, OutputError, SourceError
from talent_core.loaders.items import BadRow, Item, Reader, Record, Row
from talent_core.loaders.options import (
    LoadOptions,
    LoadProgress,
    LoadReport,
    OnError,
    SelfLoops,
    check_source_name,
)
from talent_core.loaders.validation import normalise_row, row_text, validate_row
from talent_core.loaders.writer import Prepared, ProgressBar, Writer, timed
from talent_core.models import LEGACY_SOURCE_NAME, Edge, SourceRecord
from talent_core.store._common import make_private_dirs, owner_only
from talent_core.store.base import GraphStore, SourceStore

log = logging.getLogger(__name__)


def same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` are one file: the same inode (hard links, symlinks) or, when one
    does not exist, the same resolved path (`dir/../x` names `x`)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        try:
            return Path(a).resolve() == Path(b).resolve()
        except (OSError, RuntimeError):  # a symlink loop: no file at all
            return False


def check_output_path(path: Path, what: str, inputs: tuple[Path, ...] = ()) -> None:
    """Raise LoadError unless `path` can become a regular file written by rename: called
    for the rejects and side-output files BEFORE the load touches the store (a `--rejects`
    naming a directory must not fail after everything was committed). An output that is
    one of `inputs` (or whose temporary file is) is refused: the rename would replace the
    input with the output."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    for src in inputs:
        for out in (path, tmp):
            if same_file(out, src):
                raise OutputError(
                    str(path),
                    None,
                    f"{what} file: {out} is the input file {src} (writing it "
                    "would replace the input); name another file",
                )
    if path.is_dir():
        raise LoadError(str(path), None, f"{what} file: is a directory (name a file)")
    if path.exists() and not path.is_file():
        raise LoadError(str(path), None, f"{what} file: exists and is not a regular file")
    parent = path.parent
    try:
        make_private_dirs(parent)  # 0700: outside the data dir it must not be world-readable
    except OSError as e:
        raise LoadError(str(path), None, f"{what} file: cannot create its folder: {e}") from None
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise LoadError(str(path), None, f"{what} file: its folder {parent} is not writable")
    if tmp.is_dir():
        raise LoadError(str(path), None, f"{what} file: {tmp} is a directory")


def check_outputs(opts: LoadOptions, reader: Reader | None = None) -> None:
    """`check_output_path` for the rejects file and (when the reader has one) the side
    output; neither may be the reader's input file."""
    src = getattr(reader, "path", None)
    inputs = (Path(src),) if src is not None and Path(src).exists() else ()
    if opts.rejects is not None:
        check_output_path(opts.rejects, "rejects", inputs)
    if opts.side_output_path is not None and (reader is None or reader.side_output is not None):
        check_output_path(opts.side_output_path, "side output", inputs)


def write_error(e: OSError, path: Path, what: str, tmp: Path) -> OutputError:
    """A failed write of an output file as the error the load stops with (ENOSPC: `path:
    ... no space left on device`)."""
    why = "no space left on device" if e.errno == errno.ENOSPC else (e.strerror or str(e))
    return OutputError(str(path), None, f"{what} file: cannot write {tmp}: {why}")


class AtomicJsonl:
    """JSONL written to `<path>.tmp` and renamed over `path` by `commit()`; `abort()`
    deletes the temporary file. Nothing half-written is ever visible at `path`.

    Text that cannot be encoded as UTF-8 (a lone surrogate from a JSON `"\\ud800"`) is
    written as its `\\udXXX` escape, which is the same JSON string: the file stays valid
    JSON and reads back to the same value."""

    def __init__(self, path: Path, what: str = "output"):
        self.path = Path(path)
        self.what = what
        check_output_path(self.path, what)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self._f = open(  # noqa: SIM115 - commit/abort close
                self.tmp, "w", encoding="utf-8", errors="backslashreplace",
                opener=owner_only,  # 0600
            )  # fmt: skip
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise write_error(e, self.path, what, self.tmp) from None
            raise LoadError(
                str(self.path), None, f"{what} file: cannot write {self.tmp}: {e}"
            ) from None
        self.count = 0
        self.closed = False

    def write(self, obj: dict[str, Any]) -> None:
        try:
            self._f.write(json.dumps(obj, ensure_ascii=False) + "\n")
        except OSError as e:  # a full disk: nothing half-written stays behind
            self.abort()
            raise write_error(e, self.path, self.what, self.tmp) from None
        self.count += 1

    def commit(self) -> None:
        if self.closed:  # a failed write aborted it
            return
        try:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            os.replace(self.tmp, self.path)
        except OSError as e:
            self.abort()
            raise write_error(e, self.path, self.what, self.tmp) from None
        self.closed = True

    def abort(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):  # flushing what is buffered may fail (disk full)
            self._f.close()
        self.tmp.unlink(missing_ok=True)


@dataclass
class _Batch:
    rows: list[Row] = field(default_factory=list)
    last_line: int = 0


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
        if item.raw is not None and "\n" in item.raw:
            report.multiline_rows += 1
        batch.rows.append(item)
        batch.last_line = item.line
        if len(batch.rows) >= opts.batch_size:
            yield batch
            batch = _Batch()
    if batch.rows:
        yield batch


_FROZEN = {"loads": 0}
_FROZEN_LOCK = threading.Lock()


@contextlib.contextmanager
def _old_objects_frozen() -> Iterator[None]:
    """Leave the objects alive before a load (the embedding model's modules and tensors,
    the UI's state, ...) out of the cyclic garbage collector's passes while it runs
    (`gc.freeze`): a load allocates millions of short-lived rows, and each full collection
    otherwise walks that whole heap again (MetaQA with cached vectors: 6.7 -> 6.3 s).
    Nested or concurrent loads unfreeze when the last one ends."""
    with _FROZEN_LOCK:
        if _FROZEN["loads"] == 0:
            gc.freeze()
        _FROZEN["loads"] += 1
    try:
        yield
    finally:
        with _FROZEN_LOCK:
            _FROZEN["loads"] -= 1
            if _FROZEN["loads"] == 0:
                gc.unfreeze()


def run_load(
    reader: Reader,
    store: GraphStore | None,
    embedder: TextEmbedder | None,
    opts: LoadOptions,
) -> LoadReport:
    """Load everything `reader` yields into `store`. Raises `LoadError` on bad input in fail
    mode (and for file-level problems in any mode), `OutputError` when the store or an
    output file has no space left on device; returns the report otherwise."""
    with _old_objects_frozen():
        try:
            return _run_load(reader, store, embedder, opts)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            # the store's server stopped on a full disk (its message names the file)
            raise OutputError(
                str(e.filename or reader.source), None, e.strerror or "no space left on device"
            ) from None


def _run_load(
    reader: Reader,
    store: GraphStore | None,
    embedder: TextEmbedder | None,
    opts: LoadOptions,
) -> LoadReport:
    t0 = time.perf_counter()
    report = LoadReport(source=reader.source, format=reader.format, dry_run=opts.dry_run)
    check_outputs(opts, reader)  # before anything is written anywhere
    if not opts.dry_run:
        if store is None or embedder is None:
            raise ValueError("a store and an embedder are needed unless dry_run")
        report.store_before = store.stats()
    rejects = AtomicJsonl(opts.rejects, "rejects") if opts.rejects is not None else None
    side = (
        AtomicJsonl(opts.side_output_path, "side output")
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
        if rejects is not None and (opts.max_rejects is None
                                    or rejects.count < opts.max_rejects):
            rejects.write({"file": reader.source, "line": line, "reason": reason, "raw": raw})
            report.rejects_kept = rejects.count

    def on_record(rec: Record) -> None:
        if side is not None:  # a record names the source its graph was loaded under
            side.write(rec.data if record is None else {**rec.data, "source_id": record.id})

    bar = ProgressBar(reader, opts.progress)
    writer = (
        Writer(store, opts, report, reader.source, bar, t0)  # type: ignore[arg-type]
        if not opts.dry_run
        else None
    )
    if writer is not None and opts.bulk:
        with timed(report, "checks"):
            writer.bulk = _bulk_session(store, embedder, opts)
    record = None
    ok = False
    try:
        if writer is not None and isinstance(store, SourceStore):
            with timed(report, "checks"):
                record = _begin_source(store, reader, opts, writer)
            report.source_id, report.source_name = record.id, record.name
        try:
            batches = _batches(reader, opts, report, reject, on_record)
            n = 0
            while True:
                if opts.cancel is not None and opts.cancel():
                    # a batch boundary: what was read commits below, nothing more is read
                    report.cancelled = True
                    log.info("%s: load cancelled after %d rows", reader.source, report.rows_read)
                    break
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
        # a cancelled load may stop before any (valid) row: that is no input error
        if report.rows_read == 0 and report.records == 0 and not report.cancelled:
            raise LoadError(reader.source, None, "empty input: no data rows")
        if report.loaded + report.duplicates == 0 and report.rejected > 0 and not report.cancelled:
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
        # each file is committed or aborted even when the other one fails (a full disk)
        with contextlib.ExitStack() as outputs:
            for f in (rejects, side):
                if f is None:
                    continue
                # rejects are kept for a failed or cancelled skip-mode load too (they
                # explain it); a side output only exists for a complete, successful load
                if f is rejects and (ok or opts.on_error == "skip"):
                    outputs.callback(f.commit)
                elif ok and not report.cancelled:
                    outputs.callback(f.commit)
                else:
                    outputs.callback(f.abort)

    report.rejects_file = str(opts.rejects) if rejects is not None else None
    kept = side is not None and not report.cancelled
    report.side_output_file = str(opts.side_output_path) if kept else None
    report.seconds = time.perf_counter() - t0
    if report.seconds > 0:
        report.triples_per_s = report.loaded / report.seconds
    # excluding embeddings: reading/validating plus the store's time, as if run serially
    # (with overlap, embedding and writing run at the same time; this does not count it)
    excl = report.read_seconds + report.write_seconds
    if excl > 0:
        report.triples_per_s_excl_embed = report.loaded / excl
    if record is not None:
        # a --replace leaves the state to the replace, which finishes after its sweep
        done = opts.collect_triples is None and not report.cancelled
        store.put_source(record.model_copy(update={  # type: ignore[union-attr]
            "state": "complete" if done else record.state, "rows_read": report.rows_read,
            "loaded": report.loaded, "rejected": report.rejected}))  # fmt: skip
    if not opts.dry_run and store is not None:
        report.store_after = store.stats()
        assert report.store_before is not None
        report.new_triples = report.store_after.triples - report.store_before.triples
    return report


def source_name_of(path: str) -> str:
    """A load's default source name: the input's file name (a Hub dataset: its name)."""
    return Path(path).name or path


def _begin_source(store: SourceStore, reader: Reader, opts: LoadOptions, writer: Writer) -> Any:
    """The load's Source record (state `loading`, or `replacing` for a --replace): the
    source of that name if there is one (a reload adds to it), else a new id. Written now
    for a MERGE load; a bulk load's first GRAPH.BULK carries it (a node written now would
    end the bulk path, which needs an empty graph)."""
    name = opts.source_name or source_name_of(reader.source)
    if name == LEGACY_SOURCE_NAME:
        raise SourceError(f"the source name {LEGACY_SOURCE_NAME!r} is reserved for the triples "
                          "of stores loaded before sources were recorded; pass --source NAME")
    records = store.source_records()
    if opts.source_id is not None:
        found = next((r for r in records if r.id == opts.source_id), None)
    else:
        found = next((r for r in records if r.name == name), None)
    if found is None:  # a new source: its name is checked whichever way the load came
        check_source_name(name)
    if found is not None and opts.collect_triples is None and found.state == "unloading":
        raise SourceError(f"source {name!r} is being unloaded (a killed `talent unload`?): "
                          f"run `talent unload {name}` again first")
    if found is not None and opts.collect_triples is None and found.state == "replacing":
        raise SourceError(f"source {name!r} is being replaced (a killed or failed `--replace`?)"
                          f": run `talent load FILE --replace {name}` again first")
    if (found is not None and opts.collect_triples is None and found.sha256
            and opts.source_sha256 and found.sha256 != opts.source_sha256):
        note = (f"source {name!r} was loaded from another file (sha256 "
                f"{found.sha256[:12]}...); this load adds to it; `--replace {name}` would "
                "replace it")
        log.warning("%s", note)
        writer.report.warnings.append(note)
    record = SourceRecord(
        id=found.id if found is not None else store.next_source_id(),
        name=name, sha256=opts.source_sha256, format=reader.format,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        state="replacing" if opts.collect_triples is not None else "loading",
    )  # fmt: skip
    writer.source_record, writer.source_id = record, record.id
    if writer.bulk_active():
        writer.bulk.source = record
        writer.source_put = False
    else:
        store.put_source(record)
    return record


def _bulk_session(store: Any, embedder: Any, opts: LoadOptions) -> Any:
    """The store's bulk session when it offers one and the graph is empty, else None."""
    make = getattr(store, "bulk_session", None)
    if make is None:
        return None
    session = make(embedder.dimension, opts.bulk_max_ids)
    if session is not None:
        log.info("the graph is empty: writing with the store's bulk command")
    return session


def _prepare(
    number: int,
    batch: _Batch,
    store: GraphStore | None,
    embedder: TextEmbedder | None,
    opts: LoadOptions,
    report: LoadReport,
    writer: Writer | None,
) -> Prepared:
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
    prep = Prepared(number, batch.last_line, edges, [], [])
    if writer is None:
        return prep
    assert store is not None and embedder is not None

    with timed(report, "checks"):
        # while the bulk session writes an empty graph, what exists is what it wrote
        bulk = writer.bulk if writer.bulk_active() else None
        ids = list(names)
        have = bulk.known_entities(ids) if bulk else store.existing_entities(ids)
        have |= writer.inflight_entities & names.keys()
        new_ids = [i for i in names if i not in have]
        rels = list(relations)
        have_rel = bulk.known_relations(rels) if bulk else store.existing_relations(rels)
        have_rel |= writer.inflight_relations & relations.keys()
        new_rels = [r for r in relations if r not in have_rel]

    t = time.perf_counter()
    if hasattr(embedder, "overlapped"):  # BulkEmbedder: all cores when nothing runs beside it
        embedder.overlapped = writer.overlapping()
    if new_ids and opts.vectors == "later":
        prep.entities = [(i, names[i], None) for i in new_ids]
    elif new_ids:
        vecs = embedder.encode([names[i] for i in new_ids])
        prep.entities = [(i, names[i], v) for i, v in zip(new_ids, vecs, strict=True)]
        report.new_entities_embedded += len(new_ids)
    if new_rels:
        vecs = embedder.encode(new_rels)
        prep.relations = [(n, v) for n, v in zip(new_rels, vecs, strict=True)]
    report.embed_seconds += time.perf_counter() - t
    report.new_relations_embedded += len(new_rels)
    return prep


__all__ = [
    "AtomicJsonl",
    "check_output_path",
    "check_outputs",
    "BadRow",
    "Item",
    "LoadError",
    "LoadOptions",
    "LoadProgress",
    "LoadReport",
    "OnError",
    "Reader",
    "Record",
    "Row",
    "SelfLoops",
    "TextEmbedder",
    "run_load",
]
