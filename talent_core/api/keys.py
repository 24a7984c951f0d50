"""API keys of `talent serve`: created, listed and revoked by `talent keys`, checked on every
request but /healthz.

A key is `tk_<id>_<secret>` (the id names it in lists and logs; the secret is
`secrets.token_urlsafe`); only its SHA-256 is stored, in `<data_dir>/api_keys.json` (mode
0600), and a presented key is compared in constant time. The plain key is shown once, when
it is created. Every change is one read-modify-write under an exclusive lock on
`<data_dir>/api_keys.lock` (processes and threads alike) and replaces the file atomically,
so a printed key is a stored key and a revoked one stays revoked; the data dir is checked
as every command checks it (`check_data_dir`) before anything is written in it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from talent_core.errors import ApiKeyError

Scope = Literal["read", "write"]
SCOPES: tuple[Scope, ...] = ("read", "write")
KEYS_FILE = "api_keys.json"
LOCK_FILE = "api_keys.lock"
PREFIX = "tk_"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ID = re.compile(r"[0-9a-f]{8}")
_KEY = re.compile(r"tk_([0-9a-f]{8})_([A-Za-z0-9_-]{20,100})")
_MAX_BYTES = 16 * 1024 * 1024  # far above any real keys file


class ApiKey(BaseModel):
    """One stored key: never the key itself, its SHA-256."""

    id: str
    name: str
    scope: Scope
    sha256: str
    created: str

    def allows(self, scope: Scope) -> bool:
        """write includes read."""
        return self.scope == "write" or scope == "read"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _read_private(path: Path) -> bytes | None:
    """The bytes of the keys file ``path`` (None: absent), read through one fd opened
    without following a symlink and checked with fstat: another user's file, or one others
    may write, could hold a key of theirs."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        why = "a symlink" if e.errno == errno.ELOOP else e.strerror
        raise ApiKeyError(f"{path}: not a readable keys file ({why})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ApiKeyError(f"{path}: not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise ApiKeyError(f"{path}: owned by another user or writable by others; "
                              "it must be yours with mode 0600 (chmod 600)")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if size > _MAX_BYTES:
                raise ApiKeyError(f"{path}: not a readable keys file (over {_MAX_BYTES} bytes)")
        return b"".join(chunks)
    except OSError as e:
        raise ApiKeyError(f"{path}: not a readable keys file ({e.strerror})") from None
    finally:
        os.close(fd)


class KeyStore:
    """The keys file of one data dir, read again on every call (a small file: a key
    created or revoked while the server runs counts at once) and parsed again only when its
    bytes changed (a file's inode, size and mtime can all repeat after a replace)."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir).expanduser()
        self.path = self.data_dir / KEYS_FILE
        self._lock = threading.Lock()  # the parse cache's
        self._cache: tuple[bytes, list[ApiKey]] | None = None

    # --- reading --------------------------------------------------------------------------
    def keys(self) -> list[ApiKey]:
        """Every stored key (an absent file: none)."""
        return self._read(self.path)

    def _read(self, path: Path) -> list[ApiKey]:
        raw = _read_private(path)
        if raw is None:
            return []
        with self._lock:
            if self._cache is not None and self._cache[0] == raw:
                return list(self._cache[1])
        try:
            keys = [ApiKey.model_validate(k) for k in json.loads(raw)["keys"]]
        except (ValueError, KeyError, TypeError, ValidationError) as e:
            raise ApiKeyError(f"{path}: not a readable keys file ({e})") from None
        with self._lock:
            self._cache = (raw, keys)
        return list(keys)

    def verify(self, key: str) -> ApiKey | None:
        """The stored key that ``key`` is, or None (malformed, unknown or revoked)."""
        m = _KEY.fullmatch(key.strip())
        if m is None:
            return None
        digest = _digest(key.strip())
        found = None
        for k in self.keys():  # every entry compared: the time does not tell which matched
            if hmac.compare_digest(k.sha256, digest) and k.id == m.group(1):
                found = k
        return found

    # --- writing --------------------------------------------------------------------------
    def create(self, name: str, scope: str) -> tuple[ApiKey, str]:
        """A new key named ``name``: (its stored record, the plain key to show once)."""
        if not _NAME.fullmatch(name or ""):
            raise ApiKeyError(f"key name {name!r}: use 1-64 letters, digits, '.', '_', '-' "
                              "(starting with a letter or digit)")
        if _ID.fullmatch(name):
            raise ApiKeyError(f"key name {name!r} looks like a key id (8 lowercase hex "
                              "digits): choose another name")
        if scope not in SCOPES:
            raise ApiKeyError(f"scope {scope!r}: must be read or write")
        with self._locked() as path:
            keys = self._read(path)
            if any(k.name == name for k in keys):
                raise ApiKeyError(f"a key named {name!r} exists already (revoke it first)")
            key_id = secrets.token_hex(4)
            while any(k.id == key_id for k in keys):
                key_id = secrets.token_hex(4)
            plain = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
            rec = ApiKey(id=key_id, name=name, scope=scope, sha256=_digest(plain),  # type: ignore[arg-type]
                         created=datetime.now(UTC).isoformat(timespec="seconds"))
            self._write(path, [*keys, rec])
        return rec, plain

    def revoke(self, key: str, by: Literal["either", "id", "name"] = "either") -> ApiKey:
        """Remove the key with the id or the exact name ``key`` (``by``: only that); the
        removed record. A ``key`` that is one key's id and another's name is an error."""
        with self._locked() as path:
            keys = self._read(path)
            by_id = [k for k in keys if k.id == key] if by != "name" else []
            by_name = [k for k in keys if k.name == key] if by != "id" else []
            if by_id and by_name and by_id[0] is not by_name[0]:
                raise ApiKeyError(
                    f"{key!r} is the id of key {by_id[0].name!r} and the name of another key "
                    f"(id {by_name[0].id}); nothing revoked: say which with --id or --name")
            gone = (by_id or by_name)[:1]
            if not gone:
                what = {"id": f"no key with id {key!r}", "name": f"no key named {key!r}",
                        "either": f"no key named {key!r} or with that id"}[by]
                raise ApiKeyError(f"{what} (talent keys list)")
            self._write(path, [k for k in keys if k is not gone[0]])
        return gone[0]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[Path]:
        """The keys file's path with the exclusive lock held (one change at a time, across
        processes and threads: each holder opens the lock file itself), once the data dir
        passed `check_data_dir` (a missing one is created 0700 first)."""
        from talent_core.store._common import ensure_data_dir

        try:
            real = ensure_data_dir(self.data_dir)
        except OSError as e:
            raise ApiKeyError(f"{self.data_dir}: cannot create the data dir ({e.strerror})"
                              ) from None
        lock = real / LOCK_FILE
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            why = "a symlink" if e.errno == errno.ELOOP else e.strerror
            raise ApiKeyError(f"{lock}: cannot open the keys lock ({why})") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                raise ApiKeyError(f"{lock}: not a regular file of this user; remove it")
            if st.st_mode & 0o077:
                os.fchmod(fd, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd closes
            yield real / KEYS_FILE
        finally:
            os.close(fd)

    def _write(self, path: Path, keys: list[ApiKey]) -> None:
        """``path`` replaced atomically (a temporary file beside it, 0600, fsync, rename);
        call it holding `_locked`."""
        body = (json.dumps({"keys": [k.model_dump() for k in keys]}, indent=1) + "\n").encode()
        try:
            fd, tmp = tempfile.mkstemp(prefix=".api_keys.", dir=path.parent)
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
            raise ApiKeyError(f"{path}: cannot write the keys file ({e})") from None
        with self._lock:
            self._cache = (body, list(keys))
