"""The data dir of the embedded server, safely: `check_data_dir` walks its path with lstat
before anything follows a link into it or talks to a socket there (a dir another user
controls is a `DataDirError`, never a warning); its files are owner-only; the server's
socket path in it, reached through a checked private symlink dir (`$XDG_RUNTIME_DIR/talent/`
or a mkdtemp dir) when the path is too long for sun_path, and recorded in `falkordb.socket`
for the other processes."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pwd
import stat
import tempfile
from pathlib import Path

from talent_core.errors import DataDirError, EmbeddedServerError
from talent_core.store._watchdog import SOCKET_RECORD_NAME

log = logging.getLogger(__name__)

SOCKET_NAME = "falkordb.sock"
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux (104 on macOS)


def _who(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _trusted(uid: int) -> bool:
    """Root or this user: nobody else may own a directory or link on the data dir's path."""
    return uid in (0, os.geteuid())


def _parent_problem(st: os.stat_result) -> str | None:
    """Why another user could replace an entry of the directory `st` describes: they own
    it, or may write it (without the sticky bit, which keeps /tmp's entries their owners')."""
    if not _trusted(st.st_uid):
        return f"is owned by {_who(st.st_uid)}, who could replace what is in it"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return (f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}), who "
                "could replace what is in it")
    return None


def _walk(path: Path) -> tuple[Path, os.stat_result | None]:
    """`path` resolved as `Path.resolve()` does, but each component is lstat()ed and checked
    before it is followed: directories on the way owned by root or this user and not
    writable by others (sticky ones apart), symlinks owned by root or this user. Returns
    the real path and its lstat (None when it does not exist yet); DataDirError else."""
    full = Path(os.path.expanduser(path))
    parts = list(reversed((full if full.is_absolute() else Path.cwd() / full).parts))
    cur, cur_st, links = Path("/"), os.lstat("/"), 0
    while parts:
        name = parts.pop()
        if name in ("", ".", "/"):
            continue
        if name == "..":
            cur = cur.parent
            cur_st = os.lstat(cur)
            continue
        problem = _parent_problem(cur_st)
        if problem:
            raise DataDirError(f"{cur} {problem}")
        nxt = cur / name
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            return Path(os.path.normpath(Path(nxt, *reversed(parts)))), None
        except OSError as e:
            raise DataDirError(f"{nxt} cannot be examined ({e.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            if not _trusted(st.st_uid):
                raise DataDirError(f"{nxt} is a symlink owned by {_who(st.st_uid)}")
            links += 1
            if links > 40:
                raise DataDirError(f"{nxt}: too many levels of symbolic links")
            target = Path(os.readlink(nxt))
            if target.is_absolute():
                cur, cur_st = Path("/"), os.lstat("/")
            parts += reversed(target.parts)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise DataDirError(f"{nxt} is not a directory")
        cur, cur_st = nxt, st
    return cur, cur_st


def check_data_dir(path: Path) -> tuple[Path, bool]:
    """The real path of the data dir `path` and whether it exists, once it is safe to use;
    else DataDirError naming the path and the problem. Its path must pass `_walk`; an
    existing one must be this user's, not writable by others (a shared directory such as
    /tmp is refused, not chmod-ed), and is made 0700 here when others may read it. Every
    file in it (the socket, the record of the socket's path, the AOF) must be this user's:
    another user's was planted while the directory was open to them. Once that holds,
    only this user (and root) can change any of it."""
    try:
        real, st = _walk(Path(path))
    except DataDirError as e:
        raise DataDirError(f"data dir {path}: {e}; not using it (choose a directory of "
                           "yours with TALENT_DATA_DIR)") from None
    if st is None:
        return real, False
    mode = stat.S_IMODE(st.st_mode)
    problem = None
    if st.st_uid != os.geteuid():
        problem = f"{real} is owned by {_who(st.st_uid)}, not by this user ({_who(os.geteuid())})"
    elif mode & 0o022 or mode & stat.S_ISVTX:
        problem = f"{real} is writable by other users (mode {mode:04o})"
    else:
        make_private(real)
        mode = stat.S_IMODE(os.lstat(real).st_mode)
        if mode & 0o077:
            problem = f"{real} has mode {mode:04o} and cannot be made 0700"
    if problem is None:
        problem = _foreign_entry(real)
    if problem:
        raise DataDirError(f"data dir {path}: {problem}; not using it (another user could "
                           "read the store or swap its socket; choose a directory of yours "
                           "with TALENT_DATA_DIR)")
    return real, True


def settings_file_problem(path: Path) -> str | None:
    """Why the settings file `path` (`.env` and the like) must not be read, in words (None:
    it is safe, or absent): a file another user could write would choose where our keys
    and passwords go. Its folders must pass `_walk`, it must be a regular file of root or
    this user, not writable by others; a symlink is followed only if it is ours (or root's)
    and its target passes the same rule. A directory is no settings file (skipped)."""
    full = Path(os.path.expanduser(path))
    full = full if full.is_absolute() else Path.cwd() / full
    for _ in range(40):
        try:
            parent, pst = _walk(full.parent)
        except DataDirError as e:
            return str(e)
        if pst is None:  # a folder on the way is missing: so is the file
            return None
        problem = _parent_problem(pst)
        if problem:
            return f"{parent} {problem}"
        leaf = parent / full.name
        try:
            st = os.lstat(leaf)
        except FileNotFoundError:
            return None
        except OSError as e:
            return f"{leaf} cannot be examined ({e.strerror})"
        if stat.S_ISLNK(st.st_mode):
            if not _trusted(st.st_uid):
                return f"{leaf} is a symlink owned by {_who(st.st_uid)}"
            full = parent / os.readlink(leaf)  # an absolute target replaces parent
            continue
        if stat.S_ISDIR(st.st_mode):
            return None
        if not stat.S_ISREG(st.st_mode):
            return f"{leaf} is not a regular file"
        if not _trusted(st.st_uid):
            return f"{leaf} is owned by {_who(st.st_uid)}, not by this user or root"
        if st.st_mode & 0o022:
            return (f"{leaf} is writable by other users (mode "
                    f"{stat.S_IMODE(st.st_mode):04o}; chmod 600)")
        return None
    return f"{path}: too many levels of symbolic links"


def _foreign_entry(d: Path) -> str | None:
    """A file in the data dir (or in its appendonlydir) that is not this user's, in words."""
    dirs = [d]
    while dirs:
        sub = dirs.pop()
        try:
            entries = list(os.scandir(sub))
        except OSError as e:
            return f"{sub} cannot be listed ({e.strerror})"
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:  # gone since the listing (a temporary file renamed)
                continue
            if st.st_uid != os.geteuid():
                return f"{e.path} is owned by {_who(st.st_uid)}, not by this user"
            if sub == d and e.name == "appendonlydir" and stat.S_ISDIR(st.st_mode):
                dirs.append(Path(e.path))
    return None


def private_dir_problem(path: Path) -> str | None:
    """Why `path` is not a private directory of this user (None when it is): it must be a
    real directory (not a symlink), owned by the effective uid, with no group/other bits."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot be examined ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory" + (" (a symlink)" if stat.S_ISLNK(st.st_mode) else "")
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o077:
        return f"has mode {stat.S_IMODE(st.st_mode):04o}, not 0700"
    return None


def make_private(path: Path) -> None:
    """chmod `path` to 0700 (a directory) or 0600 (a file) if it is ours and looser."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if st.st_uid != os.geteuid() or stat.S_ISLNK(st.st_mode):
            return
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(st.st_mode) & want)


# --- the socket path -----------------------------------------------------------------


def recorded_socket(data_dir: Path, record: Path) -> Path | None:
    """The socket path the running server was started with, read from the data dir:
    the data dir's own socket, or one reached through a link in a private directory of
    ours (see `choose_socket_path`); None when there is none or it fails the checks."""
    try:
        text = record.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    sock = Path(text) if text else None
    if sock is None or not sock.is_absolute() or sock.name != SOCKET_NAME:
        return None
    if sock.parent == data_dir:
        return sock
    link = sock.parent
    problem = private_dir_problem(link.parent)
    if problem is None and not (link.is_symlink() and link.resolve() == data_dir):
        problem = "does not lead to the data dir"
    if problem:
        log.warning("ignoring the recorded socket %s: %s %s", sock, link.parent, problem)
        return None
    return sock

def _runtime_dir(data_dir: Path, record: Path) -> Path:
    """A private directory for the socket's link when the data dir's path is too long
    for sun_path: the previous one (still checked), $XDG_RUNTIME_DIR/talent when
    XDG_RUNTIME_DIR is ours with mode 0700, else a fresh mkdtemp directory."""
    old = recorded_socket(data_dir, record)
    if old is not None and old.parent != data_dir:
        return old.parent.parent
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg) and private_dir_problem(Path(xdg)) is None:
        d = Path(xdg) / "talent"
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=0o700)
        problem = private_dir_problem(d)
        if problem is None:
            return d
        log.warning("not using %s for the socket: it %s", d, problem)
    d = Path(tempfile.mkdtemp(prefix="talent-"))  # 0700, ours, an unpredictable name
    problem = private_dir_problem(d)
    if problem:  # cannot happen with mkdtemp; checked before use anyway
        raise EmbeddedServerError(f"socket directory {d} {problem}")
    return d

def choose_socket_path(data_dir: Path, record: Path) -> Path:
    """The socket path for a server about to start (we hold the start lock), recorded
    in the data dir for the other processes. The socket file is `falkordb.sock` in the
    data dir; when that path is too long for a unix socket (108 bytes) it is reached
    through a symlink to the data dir inside a private, owner-checked runtime directory
    (never a predictable name in a shared /tmp, which another user could pre-create or
    swap)."""
    sock = data_dir / SOCKET_NAME
    if len(os.fsencode(sock)) > _MAX_SOCKET_PATH:
        digest = hashlib.sha1(os.fsencode(data_dir)).hexdigest()[:16]
        runtime = _runtime_dir(data_dir, record)
        link = runtime / f"d-{digest}"
        if len(os.fsencode(link / SOCKET_NAME)) > _MAX_SOCKET_PATH:  # a long TMPDIR
            with contextlib.suppress(OSError):
                runtime.rmdir()  # only if empty (a fresh one)
            runtime = Path(tempfile.mkdtemp(prefix="talent-", dir="/tmp"))
            link = runtime / f"d-{digest}"
        if not (link.is_symlink() and link.resolve() == data_dir):
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            link.symlink_to(data_dir, target_is_directory=True)
        sock = link / SOCKET_NAME
        log.info("data dir path too long for a unix socket; using %s", sock)
    tmp = record.with_name(SOCKET_RECORD_NAME + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"{sock}\n")
    os.replace(tmp, record)
    return sock
