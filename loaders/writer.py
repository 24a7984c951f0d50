"""The writing side of a load: batches written on a background thread in file order, store
call timings, and the progress bar."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from talent_core.loaders.items import Reader
from talent_core.loaders.options import LoadOptions, LoadProgress, LoadReport
from talent_core.models import Edge
from talent_core.store.base import GraphWriter

log = logging.getLogger(__name__)


_TIMED = threading.Lock()  # the loader's two threads both add store call times


@contextlib.contextmanager
def timed(report: LoadReport, call: str) -> Iterator[None]:
    """Add the time of a store call to write_seconds and store_seconds_by_call[call]."""
    t = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t
        with _TIMED:
            report.write_seconds += dt
            by = report.store_seconds_by_call
            by[call] = by.get(call, 0.0) + dt


@dataclass
class Prepared:
    """A batch ready to write: unique edges plus the rows of the entities / relations that
    are new (not in the store, not in the batch being written) with their embeddings."""

    number: int
    last_line: int
    edges: list[Edge]
    entities: list[tuple[str, str, Any]]
    relations: list[tuple[str, Any]]


class ProgressBar:
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


class Writer:
    """Writes prepared batches on one background thread, so that the next batch is read,
    validated and embedded while the store works on this one (double buffering: at most
    one batch in flight and one in preparation, so memory stays bounded).

    `submit()` first waits for the previous batch's acknowledgement (and re-raises its
    error), so batches commit strictly in file order. The "committed" log line and the
    `on_commit` callback come from the writer thread, only after the store returned from
    the batch's last write."""

    def __init__(
        self,
        store: GraphWriter,
        opts: LoadOptions,
        report: LoadReport,
        source: str,
        bar: ProgressBar,
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
        # the store's bulk session (an empty embedded graph), or None: MERGE statements
        self.bulk: Any = None
        self._pending: Any = None
        # ids / relation names being written by the in-flight batch: the batch in
        # preparation must not embed them again (the store may not have them yet)
        self.inflight_entities: set[str] = set()
        self.inflight_relations: set[str] = set()
        # the load's source (None: the store records no sources) and whether its record is
        # in the store yet (run_load writes it before a MERGE load; a bulk load's first
        # GRAPH.BULK carries it)
        self.source_record: Any = None
        self.source_id: int | None = None
        self.source_put = True

    def submit(self, prep: Prepared) -> None:
        staged = None
        if self.opts.overlap and self.bulk_active():
            # encoded for GRAPH.BULK while the previous batch's vectors convert
            staged = self.bulk.stage(prep.entities, prep.relations, prep.edges, self._timer)
        self.wait()
        self.inflight_entities = {e[0] for e in prep.entities}
        self.inflight_relations = {r[0] for r in prep.relations}
        if self.overlapping():
            self._pending = self._pool.submit(self._write, prep)
        elif self._write(prep, defer_vectors=self.opts.overlap, staged=staged):
            # a bulk batch: GRAPH.BULK ran here, with nothing else in flight; its vector
            # conversion (the server's HNSW inserts) runs while the next batch is prepared
            self._pending = self._pool.submit(self._convert_and_commit, prep)

    def wait(self) -> None:
        """Block until the in-flight batch is acknowledged; re-raise its error."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def bulk_active(self) -> bool:
        return self.bulk is not None and self.bulk.active

    def overlapping(self) -> bool:
        """Whether the next batch is written while the one after it is prepared. Bulk
        batches are not: GRAPH.BULK runs on the server's main thread, and a query of the
        next batch's preparation running beside it hung the server in CI (a FalkorDB
        lock-order deadlock, we believe). Only their vector conversion (one Cypher
        statement) runs beside the next batch's preparation, which does not query the
        store while the bulk session is active."""
        return self.opts.overlap and not self.bulk_active()

    def _write(self, prep: Prepared, defer_vectors: bool = False, staged: Any = None) -> bool:
        """Write the batch and commit it; True when it was bulk-written with its vector
        conversion deferred (`_convert_and_commit` then finishes and commits it)."""
        r = self.report
        bulk = self.bulk_active()
        asserted = self.bulk.asserted_new if bulk else 0
        if bulk and self.bulk.write(
            prep.entities, prep.relations, prep.edges, timer=self._timer,
            defer_vectors=defer_vectors, staged=staged,
        ):  # fmt: skip
            r.bulk_batches += 1
            r.asserted_new += self.bulk.asserted_new - asserted
            self.source_put = True  # the first bulk batch carries the Source node
            if self.bulk.pending is not None:
                return True
        else:
            entities, relations = prep.entities, prep.relations
            if bulk:
                # the bulk session ended on this batch, maybe after writing it: what is
                # stored is not written again (its vectors would be re-written)
                with timed(r, "checks"):
                    have = self.store.existing_entities([e[0] for e in entities])
                    entities = [e for e in entities if e[0] not in have]
                    have = self.store.existing_relations([x[0] for x in relations])
                    relations = [x for x in relations if x[0] not in have]
            if entities:
                with timed(r, "entities"):
                    self.store.upsert_entities(entities)
            if relations:
                with timed(r, "relations"):
                    self.store.upsert_relations(relations)
            with timed(r, "triples"):
                if self.source_id is None:
                    self.store.upsert_triples(prep.edges)
                else:
                    if not self.source_put:  # the bulk path ended before writing its node
                        self.store.put_source(self.source_record)  # type: ignore[attr-defined]
                        self.source_put = True
                    r.asserted_new += self.store.upsert_triples(prep.edges, self.source_id)
        self._commit(prep)
        return False

    def _timer(self, call: str) -> contextlib.AbstractContextManager[None]:
        return timed(self.report, call)

    def _convert_and_commit(self, prep: Prepared) -> None:
        self.bulk.convert_pending(self._timer)
        self._commit(prep)

    def _commit(self, prep: Prepared) -> None:
        r = self.report
        if self.opts.collect_triples is not None:
            self.opts.collect_triples.update((e.src, e.rel, e.dst) for e in prep.edges)
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
