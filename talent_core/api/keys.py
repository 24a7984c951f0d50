"""API keys of `talent serve`: created, listed and revoked by `talent keys`, checked on every
request but /healthz.

A key is `tk_<id>_<secret>` (the id names it in lists and logs; the secret is
`secrets.token_urlsafe`); only its SHA-256 is stored, in `<data_dir>/api_keys.json` (mode
0600, replaced atomically), and a presented key is compared in constant time. The plain key
is shown once, when it is created.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from talent_core.errors import ApiKeyError

Scope = Literal["read", "write"]
SCOPES: tuple[Scope, ...] = ("read", "write")
KEYS_FILE = "api_keys.json"
PREFIX = "tk_"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
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
    """The keys file of one data dir; reads it again when it changed (a key created or
    revoked while the server runs counts at once)."""

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir).expanduser() / KEYS_FILE
        self._lock = threading.Lock()
        self._cache: tuple[tuple[int, int, int], list[ApiKey]] | None = None

    # --- reading --------------------------------------------------------------------------
    def keys(self) -> list[ApiKey]:
        """Every stored key (an absent file: none)."""
        with self._lock:
            try:
                st = self.path.stat()
            except FileNotFoundError:
                return []
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                # another user could add a key of their own: refuse every key instead
                raise ApiKeyError(f"{self.path}: owned by another user or writable by others; "
                                  "it must be yours with mode 0600 (chmod 600)")
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)  # a replaced file: a new inode
            if self._cache and self._cache[0] == stamp:
                return list(self._cache[1])
            try:
                raw = json.loads(self.path.read_text(encoding="utf-8"))
                keys = [ApiKey.model_validate(k) for k in raw["keys"]]
            except (OSError, ValueError, KeyError, TypeError, ValidationError) as e:
                raise ApiKeyError(f"{self.path}: not a readable keys file ({e})") from None
            self._cache = (stamp, keys)
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
        if scope not in SCOPES:
            raise ApiKeyError(f"scope {scope!r}: must be read or write")
        keys = self.keys()
        if any(k.name == name for k in keys):
            raise ApiKeyError(f"a key named {name!r} exists already (revoke it first)")
        key_id = secrets.token_hex(4)
        while any(k.id == key_id for k in keys):
            key_id = secrets.token_hex(4)
        plain = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        rec = ApiKey(id=key_id, name=name, scope=scope, sha256=_digest(plain),  # type: ignore[arg-type]
                     created=datetime.now(UTC).isoformat(timespec="seconds"))
        self._write([*keys, rec])
        return rec, plain

    def revoke(self, name_or_id: str) -> ApiKey:
        """Remove the key named ``name_or_id`` (or with that id); the removed record."""
        keys = self.keys()
        gone = [k for k in keys if name_or_id in (k.name, k.id)]
        if not gone:
            raise ApiKeyError(f"no key named {name_or_id!r} (talent keys list)")
        self._write([k for k in keys if k not in gone])
        return gone[0]

    def _write(self, keys: list[ApiKey]) -> None:
        """The file replaced atomically (a temporary file beside it, 0600, then rename)."""
        body = json.dumps({"keys": [k.model_dump() for k in keys]}, indent=1) + "\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd, tmp = tempfile.mkstemp(prefix=".api_keys.", dir=self.path.parent)
                try:
                    os.fchmod(fd, 0o600)
                    with os.fdopen(fd, "w", encoding="utf-8") as f:
                        f.write(body)
                        f.flush()
                        os.fsync(f.fileno())
                    os.replace(tmp, self.path)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
            except OSError as e:
                raise ApiKeyError(f"{self.path}: cannot write the keys file ({e})") from None
            self._cache = None
