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
import hashlib
import hmac
import json
import re
import secrets
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from talent_core.errors import ApiKeyError
from talent_core.private_files import locked, read_private, write_atomic

Scope = Literal["read", "write"]
SCOPES: tuple[Scope, ...] = ("read", "write")
KEYS_FILE = "api_keys.json"
LOCK_FILE = "api_keys.lock"
PREFIX = "tk_"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ID = re.compile(r"[0-9a-f]{8}")
_KEY = re.compile(r"tk_([0-9a-f]{8})_([A-Za-z0-9_-]{20,100})")


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
        raw = read_private(path, "keys file", ApiKeyError)
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
        """The keys file's path with the exclusive lock held (`private_files.locked`)."""
        with locked(self.data_dir, LOCK_FILE, "keys", ApiKeyError) as real:
            yield real / KEYS_FILE

    def _write(self, path: Path, keys: list[ApiKey]) -> None:
        """``path`` replaced atomically (`private_files.write_atomic`); call it holding
        `_locked`."""
        body = (json.dumps({"keys": [k.model_dump() for k in keys]}, indent=1) + "\n").encode()
        write_atomic(path, body, "keys file", ApiKeyError)
        with self._lock:
            self._cache = (body, list(keys))
