"""Sources (issue 33): list the loads a store holds, take one out (`unload`), or replace it
with a new version of its file (`load FILE --replace SOURCE`).

Every triple records the ids of the sources asserting it (`store.base.SourceStore`); a
triple without that list belongs to the `legacy` source 0 (a store loaded before sources
were recorded). Both operations are sequences of atomic, idempotent store statements, so a
run killed anywhere and run again finishes with the same store:

  unload S   mark S `unloading` -> delete the triples S alone asserts, `batch` at a time
             -> take S out of the triples other sources assert -> delete the entities left
             without a triple (their vectors with them) -> delete the catalogue relations
             no triple uses -> (FalkorDB) rebuild the vector indexes -> delete S's record.
  replace S  mark S `replacing` -> load FILE under S through MERGE (an unchanged triple
             already carries S: nothing is written) collecting the file's triples -> take
             S's assertion back from each triple S asserts that the file does not hold ->
             the same two sweeps -> S's record `complete` with the new file's sha256 and
             counts. The file's triple set is held in memory.
Nothing here is safe beside a concurrent load into the same graph (the sweeps delete the
entities that a load has written but not yet linked by a triple): unloads and replaces
hold the data dir's job lock exclusively, loads shared (`store._common.exclusive_job`), so
an overlapping job is refused at once with StoreBusyError.

A killed run is resumed by the next command that opens the store (`open_resumed`, the
Pipeline, `unload_source`, `replace_source`; `resume_interrupted`), before it reads: an
`unloading` source is unloaded to the end, so entities it left without a triple are never
seen by entity search, linking or vector seeds. A `replacing` source cannot be finished
without its file: its entities left without a triple are swept (and the vector indexes
rebuilt when needed), the source stays `replacing` (both versions' triples) and a warning
says to run the replace again, or to unload it.

Store write failures (no space left on device, a server refusing writes) end a job with
OutputError (one line, CLI exit 2); running the command again finishes it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from talent_core.config import Settings, get_settings
from talent_core.errors import OutputError, SourceError, StoreBusyError, TalentError
from talent_core.loaders.options import LoadReport, check_source_name
from talent_core.models import (
    LEGACY_SOURCE_ID,
    LEGACY_SOURCE_NAME,
    NameCollision,
    SourceChange,
    SourceInfo,
    SourceRecord,
    SourcesReport,
)
from talent_core.store.base import GraphStore, SourceStore
from talent_core.text import printable

log = logging.getLogger(__name__)

PENDING = ("unloading", "replacing")  # states a killed unload / replace leaves

def _write_failure(e: BaseException) -> str | None:
    """The reason when `e` is a store write failure of the disk or the server rather than a
    bug: an OSError with an errno (ENOSPC above all), or a server refusing writes (Redis
    MISCONF / OOM, "No space left on device"); None otherwise."""
    if isinstance(e, OSError):
        return (e.strerror or str(e)) if e.errno is not None else None
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    low = text.lower()
    if text.startswith(("MISCONF", "OOM")) or "no space left on device" in low:
        return text
    return None


@contextlib.contextmanager
def _store_errors(where: str, again: str) -> Iterator[None]:
    """A store write failure (`_write_failure`) as OutputError (the CLI's one line, exit
    2), naming what to run once it is fixed; anything else as it is."""
    try:
        yield
    except TalentError:
        raise
    except Exception as e:
        why = _write_failure(e)
        if why is None:
            raise
        place = getattr(e, "filename", None) or where
        raise OutputError(str(place), None,
                          f"{why.rstrip('.')}; once the store can write again, {again}") from None


def _sources(store: Any) -> SourceStore:
    if not isinstance(store, SourceStore):
        raise SourceError(f"{store!r} does not record sources")
    return store


def list_sources(store: GraphStore) -> SourcesReport:
    """Every source with its live counts (one scan of the triples), and the store's totals.
    `legacy` is listed when triples without a recorded source exist."""
    st = _sources(store)
    counts = st.source_counts()
    out = []
    legacy = counts.get(LEGACY_SOURCE_ID)
    if legacy is not None:
        out.append(SourceInfo(id=LEGACY_SOURCE_ID, name=LEGACY_SOURCE_NAME, triples=legacy[0],
                              only=legacy[1]))  # fmt: skip
    for r in st.source_records():
        n, only = counts.get(r.id, (0, 0))
        out.append(SourceInfo(**r.model_dump(), triples=n, only=only))
    return SourcesReport(sources=out, totals=store.stats())


def _lookup(records: list[SourceRecord], key: str | int) -> SourceRecord | None:
    """The record named `key` (else the one with id `key`); an int `key` is an id only."""
    if isinstance(key, int):
        return next((r for r in records if r.id == key), None)
    found = next((r for r in records if r.name == key), None)
    if found is None and key.isascii() and key.isdigit():  # 0-9 only (int() of "²" fails)
        found = next((r for r in records if r.id == int(key)), None)
    return found


def find_source(store: GraphStore, key: str | int) -> SourceRecord:
    """The source named `key` (else the one with id `key`; an int: the id only);
    SourceError naming the known sources when there is none."""
    st = _sources(store)
    records = st.source_records()
    found = _lookup(records, key)
    if found is None and str(key) in (LEGACY_SOURCE_NAME, str(LEGACY_SOURCE_ID)):
        if LEGACY_SOURCE_ID in st.source_counts():
            return SourceRecord(id=LEGACY_SOURCE_ID, name=LEGACY_SOURCE_NAME)
    if found is None:
        known = ", ".join(repr(r.name) for r in records[:20]) or "none"
        what = f"with id {key}" if isinstance(key, int) else repr(key)
        raise SourceError(f"no source {what} in {getattr(store, 'location', store)!r} "
                          f"(sources: {known}; `talent sources` lists them)")
    return found


class _Steps:
    """Seconds per step of an unload / replace (SourceChange.seconds_by_step)."""

    def __init__(self, change: SourceChange):
        self.change, self.t = change, time.perf_counter()

    def done(self, step: str) -> None:
        now = time.perf_counter()
        by = self.change.seconds_by_step
        by[step] = round(by.get(step, 0.0) + now - self.t, 3)
        self.t = now


def unload_source(store: GraphStore, key: str | int, batch: int = 5000,
                  rebuild_fraction: float | None = None,
                  settings: Settings | None = None) -> SourceChange:
    """Take source `key` (a name or id; an int: the id) out of the store (see the module
    docstring); other interrupted unloads are finished first. `rebuild_fraction`: see
    `_sweep` (default: the setting). `settings`: where the job lock is when the store has no
    data dir of its own (default: the environment's)."""
    from talent_core.store._common import exclusive_job, job_dir

    settings = settings or get_settings()
    with (_store_errors(getattr(store, "location", str(store)),
                        f"run `talent unload {key}` again to finish it"),
          exclusive_job(job_dir(store, settings), f"talent unload {key}")):
        target = _lookup(_sources(store).source_records(), key)
        finished = _resume(store, batch, rebuild_fraction)
        done = next((c for c in finished if target is not None and c.source_id == target.id),
                    None)
        return done or _unload(store, find_source(store, key), batch, rebuild_fraction)


def open_resumed(settings: Settings | None = None, store: GraphStore | None = None
                 ) -> GraphStore:
    """The store the settings select (or ``store``, which the caller just opened), with what
    a killed unload or replace left finished (`resume_interrupted`), closed again when that
    fails: how commands, the Pipeline and so `talent serve` open it."""
    settings = settings or get_settings()
    if store is None:
        from talent_core.store import open_store

        store = open_store(settings)
    try:
        resume_interrupted(store, settings)
    except BaseException:
        store.close()
        raise
    return store


def resume_interrupted(store: GraphStore, settings: Settings | None = None
                       ) -> list[SourceChange]:
    """Finish the unloads a killed process left (`unloading` sources) and sweep what a
    killed replace left (`replacing`; see the module docstring), under the job lock. One
    read of the Source records when nothing is pending; nothing while another job holds
    the lock (it is running, or finishing them). The unloads finished, as changes."""
    from talent_core.store._common import exclusive_job, job_dir

    if not isinstance(store, SourceStore):
        return []
    if not any(r.state in PENDING for r in store.source_records()):
        return []
    settings = settings or get_settings()
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(exclusive_job(job_dir(store, settings),
                                             "talent: finishing an interrupted unload"))
        except StoreBusyError as e:
            log.info("an interrupted unload or replace is left to the running job: %s", e)
            return []
        with _store_errors(getattr(store, "location", str(store)), "run a command on the "
                           "store again to finish the interrupted unload"):
            return _resume(store, settings.batch_size, settings.vector_rebuild_fraction)


def _resume(store: GraphStore, batch: int, fraction: float | None,
            skip: int | None = None) -> list[SourceChange]:
    """`resume_interrupted` under the job lock; `skip`: a source the caller finishes."""
    st = _sources(store)
    changes = []
    for rec in st.source_records():
        if rec.id == skip or rec.state not in PENDING:
            continue
        if rec.state == "unloading":
            log.warning("source %r (id %d): finishing its interrupted unload",
                        printable(rec.name), rec.id)  # fmt: skip
            changes.append(_unload(store, rec, batch, fraction))
            continue
        log.warning("source %r (id %d): its replace did not finish (killed, failed or "
                    "cancelled); it holds triples of both versions until `talent load FILE "
                    "--replace %d` runs again (or `talent unload %d` removes it)",
                    printable(rec.name), rec.id, rec.id, rec.id)  # fmt: skip
        deleted = st.sweep_entities(batch)  # a scan: only while a replace is unfinished
        if deleted:
            st.sweep_relations()
        rebuild = getattr(st, "rebuild_vector_indexes", None)
        missing = getattr(st, "vector_indexes_missing", None)
        if rebuild is not None and (deleted or (missing is not None and missing())):
            rebuild()  # deleted vectors out of the index, or a rebuild killed half-way
    return changes


def _unload(store: GraphStore, rec: SourceRecord, batch: int,
            rebuild_fraction: float | None) -> SourceChange:
    t0 = time.perf_counter()
    st = _sources(store)
    finish = getattr(store, "finish_pending_bulk", None)
    if finish is not None:
        finish()  # a killed bulk load's vectors first: its entities are the graph's
    change = SourceChange(source=rec.name, source_id=rec.id, action="unload",
                          store_before=store.stats())  # fmt: skip
    steps = _Steps(change)
    if rec.id != LEGACY_SOURCE_ID and rec.state != "unloading":
        st.put_source(rec.model_copy(update={"state": "unloading"}))
    touched: set[str] = set()
    deleted, shared = st.retract_all(rec.id, batch, touched)
    steps.done("retract")
    log.info("source %r: %d triples deleted, %d still asserted by other sources",
             rec.name, deleted, shared)  # fmt: skip
    change.removed, change.triples_deleted = deleted + shared, deleted
    rerun = rec.state == "unloading"  # a killed run's deletions: their endpoints are lost
    _sweep(st, change, batch, rerun, steps, rebuild_fraction, None if rerun else touched)
    if rec.id != LEGACY_SOURCE_ID:
        st.delete_source(rec.id)
    change.store_after = store.stats()
    change.seconds = time.perf_counter() - t0
    return change


def replace_source(
    path: str | Path, key: str, format: str | None = None, *, store: GraphStore | None = None,
    settings: Settings | None = None, source: str | None = None,
    batch_size: int | None = None,
    **load_options: Any,
) -> tuple[LoadReport, SourceChange]:
    """Replace source `key` by the file `path` (see the module docstring): afterwards the
    store holds exactly what the other sources and the file assert. `source` renames it.
    `load_options` go to `load_path`. A cancelled or failed load leaves the source
    `replacing` with both versions' triples: run the replace again."""
    from talent_core.store._common import exclusive_job, job_dir

    settings = settings or get_settings()
    if source is not None:
        check_source_name(source)
    owned = None
    if store is None:
        from talent_core.store import open_store

        store = owned = open_store(settings)
    try:
        with (_store_errors(getattr(store, "location", str(store)),
                            f"run `talent load FILE --replace {key}` again to finish it"),
              exclusive_job(job_dir(store, settings), f"talent load --replace {key}")):
            target = _lookup(_sources(store).source_records(), key)
            _resume(store, batch_size or settings.batch_size,
                    settings.vector_rebuild_fraction,
                    skip=target.id if target is not None and target.state == "replacing"
                    else None)  # fmt: skip
            return _replace(path, key, format, store, settings, source, batch_size,
                            load_options)
    finally:
        if owned is not None:
            owned.close()


def _replace(path: str | Path, key: str, format: str | None, store: GraphStore,
             settings: Settings, source: str | None, batch_size: int | None,
             load_options: dict[str, Any]) -> tuple[LoadReport, SourceChange]:
    from talent_core.loaders.api import file_sha256, load_path

    t0 = time.perf_counter()
    rec = find_source(store, key)
    if rec.id == LEGACY_SOURCE_ID:
        raise SourceError(f"{LEGACY_SOURCE_NAME!r} cannot be replaced: unload it, then load "
                          "the file as a source of its own")
    if rec.state == "unloading":
        raise SourceError(f"source {rec.name!r} is being unloaded (a killed `talent "
                          f"unload`?): run `talent unload {rec.name}` again first")
    st = _sources(store)
    before = store.stats()
    change = SourceChange(source=source or rec.name, source_id=rec.id, action="replace",
                          store_before=before)  # fmt: skip
    steps = _Steps(change)
    keys: set[tuple[str, str, str]] = set()
    sha = file_sha256(Path(path)) if Path(path).is_file() else None
    report = load_path(path, format, store=store, settings=settings,
                       source=source or rec.name, source_id=rec.id, collect_triples=keys,
                       batch_size=batch_size, source_sha256=sha, **load_options)  # fmt: skip
    change.added = report.asserted_new
    steps.done("load")
    if report.cancelled:
        log.warning("replace of %r cancelled: the source keeps both versions' triples; "
                    "run the replace again", rec.name)  # fmt: skip
        change.store_after = store.stats()
        return report, change
    gone = sorted(st.source_triples(rec.id) - keys)
    steps.done("read")
    deleted, shared = st.retract(rec.id, gone)
    steps.done("retract")
    change.removed, change.triples_deleted = deleted + shared, deleted
    change.unchanged = len(keys) - report.asserted_new
    rerun = rec.state == "replacing"
    among = None if rerun else {x for h, _, t in gone for x in (h, t)}
    _sweep(st, change, batch_size or settings.batch_size, rerun, steps,
           settings.vector_rebuild_fraction, among)
    st.put_source(SourceRecord(
        id=rec.id, name=source or rec.name, sha256=sha, format=report.format,
        created=datetime.now(UTC).isoformat(timespec="seconds"), state="complete",
        rows_read=report.rows_read, loaded=report.loaded, rejected=report.rejected,
    ))  # fmt: skip
    change.store_after = store.stats()
    change.seconds = time.perf_counter() - t0
    return report, change


def collisions(store: GraphStore, ids_per_name: int = 5) -> list[NameCollision]:
    """Names several entities share (normalised), most shared first."""
    return _sources(store).name_collisions(ids_per_name)


def _sweep(st: SourceStore, change: SourceChange, batch: int, rerun: bool, steps: _Steps,
           fraction: float | None, among: set[str] | None) -> None:
    """Entities without a triple, then unused relations. A store whose vector index keeps
    deleted entries (FalkorDB) rebuilds it when the entities deleted reach `fraction` of
    those left (TALENT_VECTOR_REBUILD_FRACTION), or relations were deleted, or on a rerun
    (the run before may have been killed before its rebuild): vector seeds then return k
    live entities without a server restart. Below that, its vector query's over-fetch and
    retry (store/falkordb.py) absorb the deleted entries. `among`: the endpoints of the
    triples this run deleted (None on a rerun: every entity is checked, a scan)."""
    change.entities_deleted = st.sweep_entities(batch, among)
    steps.done("sweep_entities")
    change.relations_deleted = st.sweep_relations()
    steps.done("sweep_relations")
    rebuild = getattr(st, "rebuild_vector_indexes", None)
    if rebuild is None:
        return
    if fraction is None:
        fraction = get_settings().vector_rebuild_fraction
    left = st.stats().entities  # type: ignore[attr-defined]
    if (change.entities_deleted and change.entities_deleted >= fraction * max(left, 1)) \
            or change.relations_deleted or rerun:
        rebuild()
        change.vector_indexes_rebuilt = True
        steps.done("rebuild_vector_indexes")
