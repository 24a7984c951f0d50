"""Small private files in the data dir that several processes share (the API keys, the
CLI's conversations): read through one fd that follows no symlink and is checked to be
this user's regular file that no one else may write; changed under an exclusive lock
file; replaced atomically (a 0600 temporary file beside it, fsync, rename, fsync of the
folder). ``error`` is the exception each caller raises, ``what`` names the file in it."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

MAX_BYTES = 16 * 1024 * 1024  # far above any real keys or conversation file


def read_private(path: Path, what: str, error: type[Exception],
                 max_bytes: int = MAX_BYTES) -> bytes | None:
    """The bytes of ``path`` (None: absent); another user's file, or one others may write,
    is refused: it could hold what they put there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        why = "a symlink" if e.errno == errno.ELOOP else e.strerror
        raise error(f"{path}: not a readable {what} ({why})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path}: not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise error(f"{path}: owned by another user or writable by others; "
                        "it must be yours with mode 0600 (chmod 600)")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise error(f"{path}: not a readable {what} (over {max_bytes} bytes)")
        return b"".join(chunks)
    except OSError as e:
        raise error(f"{path}: not a readable {what} ({e.strerror})") from None
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(folder: Path, lock_name: str, what: str, error: type[Exception],
           wait: bool = True) -> Iterator[Path]:
    """The real path of the data dir ``folder`` (checked as every command checks it, created
    0700 when absent) with the exclusive lock on ``folder/lock_name`` held (`flocked`): one
    change at a time across processes and threads (each holder opens the lock file itself).
    ``wait=False``: ``error`` at once when another holder has it."""
    from talent_core.store._common import ensure_data_dir, flocked

    try:
        real = ensure_data_dir(folder)
    except OSError as e:
        raise error(f"{folder}: cannot create the data dir ({e.strerror})") from None
    with flocked(real / lock_name, what, error, wait=wait):
        yield real


def write_atomic(path: Path, body: bytes, what: str, error: type[Exception]) -> None:
    """``path`` replaced atomically by ``body`` (mode 0600); call it holding `locked`."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", dir=path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)  # the rename itself survives a crash
        finally:
            os.close(dfd)
    except OSError as e:
        raise error(f"{path}: cannot write the {what} ({e})") from None
