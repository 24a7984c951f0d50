"""Issue 26, items 2 and 7: a data dir another local user controls is refused (a clear
message naming it, exit 2, nothing written, no connection to a socket in it) before
anything follows a link into it or talks to a socket there; and a stopped server leaves no
private socket-link folder behind.

The attacks are run for real: an "attacker" process of a throwaway uid (started as root,
it drops to that uid first) creates the directory (or link, or socket) and listens on a
fake `falkordb.sock` that records every connection; the victim's `talent stats` / `talent
load` run as a second throwaway uid (root would ignore the 0700 of item 7), or, where no
other user can run this interpreter (it lives in /root here), as root stripped of every
capability, which the kernel then holds to file permissions like any user.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to act as two other local users (CI runs as root)"
)


def _free_uids(n: int) -> list[int]:
    """Uids no account uses: throwaway users without touching /etc/passwd."""
    used = {p.pw_uid for p in pwd.getpwall()}
    return [u for u in range(61000, 65000) if u not in used][:n]


ATTACKER = textwrap.dedent(
    """
    import os, socket, sys, threading
    uid, how, d, log = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
    os.umask(0)
    where = d
    if how == "symlink":  # the victim's data dir path: a link to the attacker's directory
        where = d + ".real"
        os.mkdir(where, 0o777)
        os.symlink(where, d)
    elif how != "plant":  # plant: the directory exists and is open to others
        os.mkdir(d, int(how, 8))
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(os.path.join(where, "falkordb.sock"))  # mode 0777 (umask 0): anyone connects
    srv.listen(8)

    def serve():
        while True:
            c, _ = srv.accept()
            c.settimeout(2)
            try:
                got = c.recv(4096)
            except OSError:
                got = b""
            with open(log, "ab") as f:
                f.write(b"connection: %r\\n" % got)
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()  # until the test is done
    """
)

@functools.cache
def _runs_as(uid: int) -> bool:
    """Whether `uid` can run this interpreter and import the project (not when they live
    in a directory other users cannot enter, as the interpreter in /root here)."""
    try:
        r = subprocess.run(
            [sys.executable, "-c", "import talent_core.commands"], user=uid, group=uid,
            extra_groups=[], cwd="/", env={"PYTHONPATH": str(REPO), "HOME": "/"},
            capture_output=True, timeout=60, check=False,
        )
    except OSError:
        return False
    return r.returncode == 0


class World:
    """A shared directory like /tmp (root's, mode 1777), an attacker uid and a victim: a
    second throwaway uid when it can run this interpreter, else root without any
    capability (`setpriv`), which file permissions bind as they bind any user."""

    def __init__(self, base: Path):
        self.base = base
        self.attacker, victim = _free_uids(2)
        if _runs_as(victim):
            self.victim, self.prefix = victim, []
            self.run_as = {"user": victim, "group": victim, "extra_groups": []}
        elif shutil.which("setpriv"):
            self.victim, self.run_as = 0, {}
            self.prefix = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"]
        else:
            pytest.skip("no other user can run this interpreter and setpriv is missing")
        self.home = base / "home"  # the victim's
        self.home.mkdir(mode=0o700)
        os.chown(self.home, self.victim, self.victim)
        self.log = base / "attacker.log"  # what the fake socket received
        self.kb = base / "kb.txt"
        self.kb.write_text("Tom Hanks|starred_in|Big\n")
        self.kb.chmod(0o644)
        self._procs: list[subprocess.Popen[str]] = []

    def attack(self, how: str, d: Path) -> None:
        p = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", ATTACKER, str(self.attacker), how, str(d),
             str(self.log)],  # fmt: skip
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self._procs.append(p)
        assert p.stdout is not None and p.stdout.readline() == "ready\n"

    def talent(self, d: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """`talent ARGS` as the victim (`python -m talent_core`, with the test-only hash
        embedder selectable: no model to load)."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(REPO),
               "TALENT_DATA_DIR": str(d), "TALENT_STORE": "embedded",
               "TALENT_EMBEDDING_MODEL": "hash:16", "TALENT_SERVER_IDLE_TIMEOUT": "0"}
        return subprocess.run(
            [*self.prefix, sys.executable, str(REPO / "tests" / "hash_cli.py"), "talent_core",
             *args],  # fmt: skip
            cwd=self.base, env=env, capture_output=True, text=True, timeout=120, check=False,
            **self.run_as,
        )

    def close(self) -> None:
        for p in self._procs:
            p.communicate(timeout=10)  # closes its stdin: it exits


@pytest.fixture
def world():
    base = Path(tempfile.mkdtemp(prefix="talent-owner-"))  # outside pytest's 0700 tmp
    os.chmod(base, 0o1777)
    w = World(base)
    try:
        yield w
    finally:
        w.close()
        shutil.rmtree(base, ignore_errors=True)


def _snapshot(*dirs: Path) -> dict[str, tuple[int, int, int, int]]:
    """Every entry under `dirs` (not following links): owner, mode, size, mtime."""
    out = {}
    for d in dirs:
        if not os.path.lexists(d):
            continue
        for p in [d, *(d.rglob("*") if not d.is_symlink() else [])]:
            st = os.lstat(p)
            out[str(p)] = (st.st_uid, st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def _setup(w: World, case: str) -> tuple[Path, str]:
    """Build one attack; the victim's data dir path and the problem the refusal names."""
    d = w.base / "talent"
    a = f"uid {w.attacker}"
    if case == "another-users-0777-dir":
        w.attack("0777", d)
        return d, f"{d} is owned by {a}, not by this user"
    if case == "another-users-symlink":
        w.attack("symlink", d)
        return d, f"{d} is a symlink owned by {a}"
    if case == "another-users-0700-dir":  # item 7: was a PermissionError traceback
        w.attack("0700", d)
        return d, f"{d} is owned by {a}, not by this user"
    if case in ("own-dir-open-to-others", "own-dir-with-planted-socket"):
        d.mkdir()
        os.chown(d, w.victim, w.victim)
        os.chmod(d, 0o777)
        w.attack("plant", d)
        if case == "own-dir-open-to-others":
            return d, f"{d} is writable by other users (mode 0777)"
        os.chmod(d, 0o700)  # made private since, but the planted socket stayed
        return d, f"{d / 'falkordb.sock'} is owned by {a}, not by this user"
    if case == "parent-open-to-others":  # anyone may rename the data dir and put theirs
        parent = w.base / "open"
        parent.mkdir()
        os.chmod(parent, 0o777)
        d = parent / "talent"
        d.mkdir(mode=0o700)
        os.chown(d, w.victim, w.victim)
        return d, f"{parent} is writable by other users (mode 0777)"
    raise AssertionError(case)


CASES = ["another-users-0777-dir", "another-users-symlink", "another-users-0700-dir",
         "own-dir-open-to-others", "own-dir-with-planted-socket", "parent-open-to-others"]


@as_root
@pytest.mark.parametrize("case", CASES)
def test_a_data_dir_another_user_controls_is_refused_before_any_use(world, case):
    d, problem = _setup(world, case)
    before = _snapshot(d, Path(f"{d}.real"))
    commands = [["stats"]]
    if case in ("another-users-0777-dir", "own-dir-open-to-others"):
        commands.append(["load", str(world.kb), "--format", "metaqa", "--no-progress"])
    for args in commands:
        r = world.talent(d, *args)
        assert r.returncode == 2, (args, r.returncode, r.stderr[-3000:])
        assert r.stderr.startswith(f"error: data dir {d}: {problem}"), r.stderr[-3000:]
        assert "TALENT_DATA_DIR" in r.stderr and "Traceback" not in r.stderr
    assert not world.log.exists(), world.log.read_text()  # the fake socket got nothing
    assert _snapshot(d, Path(f"{d}.real")) == before  # nothing written, nothing chmod-ed
    assert not any(world.home.iterdir())


def test_a_shared_directory_of_ours_is_refused_not_chmod_ed(tmp_path):
    """Before, TALENT_DATA_DIR naming a shared directory of this user (as /tmp is root's)
    chmod-ed it to 0700 and put the store there."""
    from talent_core.errors import EmbeddedServerError
    from talent_core.store.falkordb_server import EmbeddedServer

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    with pytest.raises(EmbeddedServerError, match=r"shared is writable by other users \(mode"):
        EmbeddedServer(shared).ensure_running()  # DataDirError
    assert stat.S_IMODE(os.lstat(shared).st_mode) == 0o1777 and not any(shared.iterdir())


def test_own_data_dir_through_own_symlink_is_used_and_tightened(tmp_path):
    """Not over-strict: a link of ours (a data dir moved to a bigger disk) is followed, and
    a directory of ours that others may only read is made 0700, as before."""
    from talent_core.store.data_dir import check_data_dir

    real = tmp_path / "disk" / "talent"
    real.mkdir(parents=True, mode=0o755)
    os.chmod(real, 0o755)
    link = tmp_path / "talent"
    link.symlink_to(real)
    assert check_data_dir(link) == (real, True)
    assert stat.S_IMODE(os.lstat(real).st_mode) == 0o700
    fresh = tmp_path / "new" / "deeper" / "talent"
    assert check_data_dir(fresh) == (fresh, False)  # created 0700 when first used


def test_a_stopped_server_leaves_no_socket_link_folder(tmp_path, monkeypatch):
    """A data dir path too long for a unix socket is reached through a private mkdtemp
    folder; before, a server stopped by its idle watchdog (or killed) left it behind."""
    from talent_core.store.falkordb_server import EmbeddedServer

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    d = tmp_path / ("long-" * 25) / "data"
    srv = EmbeddedServer(d)
    srv.idle_timeout = 1  # detached: its watchdog stops it after 1 s without a client
    try:
        srv.ensure_running()
        runtime = srv.socket_path.parent.parent
        assert runtime.name.startswith("talent-") and runtime.is_dir()
        deadline = time.monotonic() + 30  # no ping meanwhile: that is a client
        while (srv.started_here or runtime.exists()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not srv.started_here, "the idle server did not stop"
        assert not runtime.exists()
        assert not (d / "falkordb.socket").exists()
    finally:
        srv.shutdown()
