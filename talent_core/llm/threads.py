"""Torch threads for one forward pass of the language models, chosen per call from the
cores free right now (as the query embedder picks its BLAS threads:
`embedding_numpy.free_cores`).

Why: torch starts one intra-op thread per core and its OpenMP threads spin while they wait:
beside other busy processes they fight them for the cores and the model stages slow down
several times over."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from talent_core.embedding_numpy import free_cores

_LOCK = threading.Lock()  # torch's thread count is process-wide: one change at a time


def threads_for_call(free: int, configured: int) -> int:
    """The threads for one call: the free cores, at most the ``configured`` count (torch's
    own, which OMP_NUM_THREADS / torch.set_num_threads set), at least 1."""
    return max(1, min(free, configured))


@contextlib.contextmanager
def torch_threads(free: int | None = None) -> Iterator[int]:
    """Run the body with `threads_for_call(free_cores(), torch's count)` intra-op threads
    and restore torch's count afterwards; yields the count used. A nested use keeps the
    outer count (the lock is not re-entrant: inner calls change nothing)."""
    import torch

    if not _LOCK.acquire(blocking=False):  # another call holds the setting: leave it
        yield torch.get_num_threads()
        return
    try:
        before = torch.get_num_threads()
        n = threads_for_call(free_cores() if free is None else free, before)
        if n != before:
            torch.set_num_threads(n)
        try:
            yield n
        finally:
            if n != before:
                torch.set_num_threads(before)
    finally:
        _LOCK.release()
