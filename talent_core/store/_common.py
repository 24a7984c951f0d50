"""Helpers shared by the store implementations (pure, no Cypher)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from talent_core.errors import StoreBusyError
from talent_core.models import Edge, Entity
from talent_core.store.base import Vector
from talent_core.text import char_problem, key_problem


def make_private_dirs(folder: Path) -> None:
    """Create `folder` and its missing parents owner-only (0700, whatever the umask): the
    data dir, and an export or rejects folder outside it (they hold KG text). An entry that
    appears meanwhile is left for the caller's checks to judge."""
    folder = Path(folder)
    missing = []
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=0o700)


def ensure_data_dir(path: Path) -> Path:
    """The real path of the data dir ``path`` once `data_dir.check_data_dir` passes, created
    first (with its missing parents) owner-only when absent; OSError when it cannot be."""
    from talent_core.store.data_dir import check_data_dir

    real, exists = check_data_dir(path)
    if not exists:
        make_private_dirs(real)
        real, _ = check_data_dir(path)
    return real


JOB_LOCK_NAME = "jobs.lock"
_held = threading.local()


def job_dir(store: Any, settings: Any) -> Path:
    """Where a store's job lock lives: an embedded store's own data dir, else the
    settings' one."""
    return Path(getattr(store, "data_dir", None) or settings.data_dir)


@contextlib.contextmanager
def flocked(lock: Path, what: str, error: type[Exception], *, shared: bool = False,
            wait: bool = True, busy: Callable[[int], str] | None = None) -> Iterator[int]:
    """Hold flock() on the lock file ``lock`` until the block ends (or the process does,
    however it ends). The file is created 0600, never opened through a symlink, and refused
    unless it is this user's regular file. ``shared``: beside other shared holders;
    ``wait=False``: ``error`` at once when another holds it, saying ``busy(fd)`` (it may
    read who holds it). Yields the fd (a holder may write who it is). The lock of the
    data dir's lock files: keys, conversations, the job lock, the vector fill, training
    (not `answering`'s signal, which must never fail or hold up an answer)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        why = "a symlink" if e.errno == errno.ELOOP else e.strerror
        raise error(f"{lock}: cannot open the {what} lock ({why})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise error(f"{lock}: not a regular file of this user; remove it")
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
                        | (0 if wait else fcntl.LOCK_NB))  # held until fd closes
        except BlockingIOError:
            raise error(busy(fd) if busy else
                        f"{lock}: another process holds the {what} lock now") from None
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def exclusive_job(data_dir: Path, what: str, shared: bool = False) -> Iterator[None]:
    """Hold the data dir's job lock while a load (``shared``: loads may run together, their
    MERGEs are exact) or an unload / replace (exclusive: its sweeps would delete what a load
    wrote but has not linked yet) runs. A job the lock refuses, from any process, fails at
    once with StoreBusyError naming the running one. Re-entrant in one thread (a replace
    runs a load). Take it after the store is open (the store checks who owns the data dir
    first). Per data dir: a Neo4j server shared by several data dirs is not covered."""
    key = str(Path(data_dir).absolute())
    held: set[str] = getattr(_held, "dirs", None) or set()
    _held.dirs = held
    if key in held:
        yield
        return

    def busy(fd: int) -> str:
        holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "another job"
        return (f"{key}: {holder} is running on this store; run this after it ends "
                "(loads may run together; an unload or replace runs alone)")

    make_private_dirs(Path(key))
    with flocked(Path(key) / JOB_LOCK_NAME, "job", StoreBusyError, shared=shared, wait=False,
                 busy=busy) as fd:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({what})".encode(), 0)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
            if not shared:
                os.ftruncate(fd, 0)


ANSWERING_LOCK_NAME = "answering.lock"


def _answering_fd(data_dir: Path) -> int | None:
    """The data dir's answering lock file, opened (created 0600, never through a symlink);
    None where it cannot be: then nothing is signalled."""
    try:
        return os.open(Path(data_dir) / ANSWERING_LOCK_NAME,
                       os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None


@contextlib.contextmanager
def answering(data_dir: Path) -> Iterator[None]:
    """Held (shared: any number at once) while a question is answered on the store of
    ``data_dir``: a background vector fill gives way while any is held (`answering_now`).
    Never blocks an answer for longer than the fill's instant probe; a data dir it cannot
    open the lock file in signals nothing."""
    fd = _answering_fd(data_dir)
    if fd is None:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def answering_now(data_dir: Path) -> bool:
    """Whether a question is being answered on the store of ``data_dir`` (`answering`)."""
    fd = _answering_fd(data_dir)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases the probe's lock


def owner_only(path: str, flags: int) -> int:
    """An `open(..., opener=owner_only)` opener: a new file is created 0600 whatever the
    umask."""
    return os.open(path, flags, 0o600)


def spans(n: int, size: int) -> Iterator[slice]:
    """Slices of at most `size` items covering range(n)."""
    for i in range(0, n, size):
        yield slice(i, i + size)


def chunks(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for part in spans(len(seq), size):
        yield seq[part]


def query_vector(vector: Vector) -> list[float]:
    arr = np.asarray(vector, dtype=np.float64).ravel()
    if arr.size == 0 or not np.isfinite(arr).all():
        raise ValueError("query vector must be non-empty and finite")
    return arr.tolist()


def last_per_key(rows: Sequence[Any]) -> list[Any]:
    """Rows deduplicated on their first field, the last occurrence winning."""
    return list({r[0]: r for r in rows}.values())


def ordered_by_key(rows: list[list[Any]], keys: list[str]) -> list[Entity]:
    """Rows (key, id, name) -> entities in the order of `keys`, then by id; each id once."""
    rank = {k: i for i, k in enumerate(keys)}
    seen: set[str] = set()
    out: list[Entity] = []
    for _, i, n in sorted(rows, key=lambda r: (rank.get(r[0], len(rank)), r[1])):
        if i not in seen:
            seen.add(i)
            out.append(Entity(id=i, name=n))
    return out


def raise_missing_endpoints(store: Any, chunk: Sequence[Edge]) -> None:
    ids = list(dict.fromkeys(x for e in chunk for x in (e.src, e.dst)))
    present = {e.id for e in store.entities_by_id(ids)}
    missing = [i for i in ids if i not in present]
    raise ValueError(
        f"{len(missing)} entity id(s) referenced by triples are not stored (upsert entities "
        f"before triples), e.g. {missing[:5]!r}; the other triples of the batch were written"
    )


def check_keys(kind: str, keys: Iterable[str]) -> None:
    """Raise ValueError for the first key that cannot be stored (text.key_problem)."""
    for key in keys:
        problem = key_problem(key)
        if problem:
            raise ValueError(f"{kind} {key!r} {problem}; nothing of this call was written")


def check_names(kind: str, names: Iterable[str]) -> None:
    """Raise ValueError for the first name that cannot be stored (text.char_problem: NUL,
    U+0001 and other non-whitespace controls, lone surrogates) before anything is written."""
    for name in names:
        problem = char_problem(name)
        if problem:
            raise ValueError(f"{kind} name {name!r} {problem}; nothing of this call was written")


def check_entities(rows: Sequence[Sequence[Any]]) -> None:
    """ValueError for the first entity row (id, name, ...) whose id or name cannot be stored:
    the check of every store's entity write, before anything is written."""
    check_keys("entity id", (r[0] for r in rows))
    check_names("entity", (r[1] for r in rows))


def distinct_edges(edges: Iterable[Edge]) -> list[Edge]:
    """One edge per (src, rel, dst), in the order first seen: a triple written twice in one
    call is written once."""
    return list({(e.src, e.rel, e.dst): e for e in edges}.values())


def check_edges(edges: Sequence[Edge], source: int | None = None) -> None:
    """ValueError for the first entity id or relation name of ``edges`` that cannot be
    stored, or a ``source`` that is no source id: the check of every store's triple write,
    before anything is written."""
    check_keys("entity id", (x for e in edges for x in (e.src, e.dst)))
    check_keys("relation name", (e.rel for e in edges))
    check_source(source)


def lookup_keys(keys: Iterable[str]) -> list[str]:
    """Distinct keys, minus those that cannot be stored (so cannot match anything)."""
    return [k for k in dict.fromkeys(keys) if key_problem(k) is None]


def check_source(source: int | None) -> None:
    """ValueError unless `source` is None (a legacy write) or a source id >= 1 (0 is the
    legacy source, which no load asserts anew)."""
    if source is None:
        return
    if isinstance(source, bool) or not isinstance(source, int) or source < 1:
        raise ValueError(f"a source id is an integer >= 1, got {source!r}")
