"""Embeddings filled after a load: `talent load --vectors later` (and `talent demo`) write
the graph without its entity embeddings, so that it answers at once, and `fill_vectors`
embeds them afterwards, page by page, while the store serves questions.

Until it ends, name and fuzzy linking work as always, vector linking finds only the
entities embedded so far, and retrieval embeds the names it scores that have no vector yet
(`retrieval.neighbourhood.entity_similarity`), so answers do not change, only their speed.
A fill that stops (Ctrl-C, a crash) is resumed by the next one: it reads the entities
still without an embedding. It holds the data dir's job lock shared, as a load does (an
unload runs alone: it is refused while a fill runs), and one fill runs per data dir at a time."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from talent_core.errors import StoreBusyError

log = logging.getLogger(__name__)

PAGE = 512  # names embedded and written per step: the progress granularity, and the most
# a question waits for the fill (one page: about 0.4 s on 2 cores)
GIVE_WAY_POLL_S = 0.2
LOCK_NAME = "vectors.lock"
LOG_NAME = "vectors.log"


class VectorFill(BaseModel):
    """What a fill did: entities it embedded, those still without an embedding after it,
    and its time (`embed_seconds` of it embedding)."""

    embedded: int = 0
    left: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    waited_seconds: float = 0.0  # paused while questions were answered on the store
    cancelled: bool = False


def _give_way(job_dir: Any, cancel: Any) -> float:
    """Wait while a question is answered on the store (`store._common.answering`): the
    fill's pages then cost the asker nothing but the page in flight. Seconds waited."""
    from talent_core.store._common import answering_now

    t = time.perf_counter()
    while answering_now(job_dir) and not (cancel is not None and cancel()):
        time.sleep(GIVE_WAY_POLL_S)
    return time.perf_counter() - t


def vectors_left(store: Any) -> tuple[int, int]:
    """(entities without an embedding, entities) from the store's counts."""
    s = store.stats()
    return max(0, s.entities - s.entities_with_embedding), s.entities


def fill_vectors(
    store: Any,
    embedder: Any,
    job_dir: Any = None,
    page: int = PAGE,
    on_progress: Callable[[int, int], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> VectorFill:
    """Embed every entity of ``store`` stored without an embedding; ``on_progress(done,
    total)`` after each page. ``job_dir``: the data dir whose locks it takes (None: none,
    for a store no other process uses); StoreBusyError when another fill runs there."""
    with ExitStack() as held:
        if job_dir is not None:
            from talent_core.private_files import locked
            from talent_core.store._common import exclusive_job

            held.enter_context(locked(job_dir, LOCK_NAME, "vector fill", StoreBusyError,
                                      wait=False))  # fmt: skip
            held.enter_context(exclusive_job(job_dir, "talent vectors", shared=True))
        return _fill(store, embedder, page, on_progress, cancel, job_dir)


def _fill(store: Any, embedder: Any, page: int, on_progress: Any, cancel: Any,
          job_dir: Any) -> VectorFill:
    t0 = time.perf_counter()
    report = VectorFill()
    total, _ = vectors_left(store)
    if hasattr(embedder, "overlapped"):  # BulkEmbedder: every core (nothing runs beside it)
        embedder.overlapped = False
    while True:
        if cancel is not None and cancel():
            report.cancelled = True
            break
        if job_dir is not None:
            report.waited_seconds += _give_way(job_dir, cancel)
        rows = store.entities_without_vectors(page)
        if not rows:
            break
        t = time.perf_counter()
        vecs = embedder.encode([name for _, name in rows])
        report.embed_seconds += time.perf_counter() - t
        done = store.set_entity_vectors([(i, v) for (i, _), v in zip(rows, vecs, strict=True)])
        if done == 0:  # should not happen: stop rather than embed the same page again
            log.warning("vectors: the store set none of %d vectors; stopping", len(rows))
            break
        report.embedded += done
        log.info("vectors: %d of %d entities embedded", report.embedded, total)
        if on_progress is not None:
            on_progress(report.embedded, max(total, report.embedded))
    report.left, _ = vectors_left(store)
    report.seconds = time.perf_counter() - t0
    return report


def fill_in_background(settings: Any) -> tuple[int, Path]:
    """Start `talent vectors --behind` for ``settings``'s store as a detached process (its
    own session: it outlives the command that started it, and ends when the store's vectors
    are all there) on one core fewer than there are, pausing while questions are answered;
    (its pid, its log file in the data dir)."""
    from talent_core.loaders.embedders import default_threads
    from talent_core.store._common import ensure_data_dir

    logfile = ensure_data_dir(Path(settings.data_dir)) / LOG_NAME
    with open(logfile, "ab", opener=lambda p, f: os.open(p, f, 0o600)) as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "talent_core", "vectors", "--no-progress", "--behind",
             "--threads", str(default_threads())],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True)
    log.info("filling the entity vectors behind (pid %d, log %s)", proc.pid, logfile)
    return proc.pid, logfile


FILL_NOTE = "entity vectors:"  # how `fill_behind`'s line starts (the Load page shows it)


def fill_behind(store: Any, settings: Any) -> str | None:
    """After a load with its vectors left for later: start the fill behind
    (`fill_in_background`) when names are left, and say so in a line for the analyst
    (None when every name has its vector). A fill that cannot start is said in that line:
    the load it follows stands."""
    left, entities = vectors_left(store)
    if not left:
        return None
    try:
        pid, logfile = fill_in_background(settings)
    except OSError as e:
        log.warning("the vector fill did not start: %s", e)
        return (f"{FILL_NOTE} {left:,} of {entities:,} names wait for their vectors: the "
                f"fill behind did not start ({e}); run talent vectors")
    return (f"{FILL_NOTE} embedding {left:,} of {entities:,} names behind (pid {pid}, "
            f"log {logfile}); answers meanwhile are the same, a little slower, and vector "
            "linking finds only the names embedded so far")


def run_behind() -> None:
    """This process at nice 10. It does not starve: a machine busy with other work still
    lets the fill end (SCHED_IDLE and an autogroup at nice 19 left it at 1,024 names in
    three minutes beside two busy processes); questions on its store are served first by
    `_give_way`, not by priorities (with Linux's autogroups, a detached session's share of
    the CPU is its group's whatever its nice)."""
    os.nice(10)
