"""Start / stop the development and CI Neo4j server (no Docker): `make neo4j-up` / `neo4j-down`.

The server is tests/neo4j's launcher (Neo4j 5.26 Community, embedded, from Maven Central):
Bolt on a free 127.0.0.1 port, auth on, a random password for user neo4j. State lives under
`.talent/neo4j/` (the database, Neo4j's own logs, `launcher.log`, `neo4j.pid`); the
connection goes to `.talent/neo4j.env` (mode 0600: NEO4J_URI, NEO4J_USER, NEO4J_PASSWORD),
which the settings (talent_core/config.py), the tests and .ci/run read when present.

    python tests/neo4j/neo4j_ctl.py up       # build if needed, start, wait for Bolt
    python tests/neo4j/neo4j_ctl.py down     # stop; delete the data unless --keep (KEEP=1)
    python tests/neo4j/neo4j_ctl.py status
    python tests/neo4j/neo4j_ctl.py admin database import full ...   # neo4j-admin, offline

`admin` runs Neo4j's own admin tool (`neo4j-admin`: org.neo4j.cli.AdminTool, whose
`database import full` is org.neo4j:neo4j-import-tool, already on the launcher's class path)
on the launcher's home, with the server stopped; `tests/neo4j/bin/neo4j-admin` is the same
as a command, so the `import.sh` of `talent export --neo4j-import` runs with that folder on
PATH.

Environment: NEO4J_HEAP (JVM -Xmx, default 1g), NEO4J_PORT (default: a free port),
NEO4J_START_TIMEOUT (seconds, default 180), MVN (default mvn), NEO4J_STATE (another state
folder, e.g. a scratch server beside the development one: its env file is then
`$NEO4J_STATE/neo4j.env`, not `.talent/neo4j.env`).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STATE = Path(os.environ.get("NEO4J_STATE") or ROOT / ".talent" / "neo4j").absolute()
ENV_FILE = STATE / "neo4j.env" if os.environ.get("NEO4J_STATE") else ROOT / ".talent" / "neo4j.env"
PID_FILE = STATE / "neo4j.pid"
LOG_FILE = STATE / "launcher.log"
HOME = STATE / "home"
MAIN = "talent.neo4j.Launcher"
ADMIN_MAIN = "org.neo4j.cli.AdminTool"  # neo4j-admin
READY = b" ready: bolt://"  # the launcher's line once its password is set
CLASSES = HERE / "target" / "classes"
CLASSPATH = HERE / "target" / "classpath.txt"
SOURCES = [HERE / "pom.xml", HERE / "src" / "main" / "java" / "talent" / "neo4j" / "Launcher.java"]


def shown(path: Path) -> Path:
    """``path`` relative to the checkout when it is inside it (messages)."""
    try:
        return path.relative_to(ROOT)
    except ValueError:
        return path


def say(msg: str) -> None:
    print(f"neo4j: {msg}", flush=True)


def fail(msg: str) -> None:
    print(f"neo4j: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


# --- build -------------------------------------------------------------------------------
def classpath() -> str | None:
    """The launcher's class path when the build is current (every jar still present)."""
    if not CLASSPATH.is_file() or not (CLASSES / "talent" / "neo4j" / "Launcher.class").is_file():
        return None
    built = CLASSPATH.stat().st_mtime
    if any(src.stat().st_mtime > built for src in SOURCES):
        return None
    jars = CLASSPATH.read_text().strip().split(os.pathsep)
    if not all(Path(j).is_file() for j in jars):
        return None
    return os.pathsep.join([str(CLASSES), *jars])


def build() -> str:
    cp = classpath()
    if cp is not None:
        return cp
    mvn = os.environ.get("MVN", "mvn")
    if shutil.which(mvn) is None or shutil.which("java") is None:
        fail(
            "the launcher needs Java 17+ and Maven (apt-get install openjdk-17-jdk-headless maven)"
        )
    say("building the launcher (Maven; the first build downloads ~160 MB of jars)")
    t0 = time.monotonic()
    r = subprocess.run(
        [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(HERE / "pom.xml"), "compile"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        fail(f"the Maven build failed (exit {r.returncode}):\n{r.stdout}{r.stderr}")
    CLASSPATH.touch()  # newer than the sources even when Maven had nothing to do
    say(f"built in {time.monotonic() - t0:.1f} s")
    cp = classpath()
    if cp is None:
        fail(f"the Maven build did not produce {CLASSPATH}")
    return cp


# --- process -----------------------------------------------------------------------------
def running_pid() -> int | None:
    """The launcher's pid from the pid file, if that process is alive and is the launcher."""
    try:
        pid = int(PID_FILE.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if MAIN.encode() in cmdline else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_env() -> dict[str, str]:
    out: dict[str, str] = {}
    if ENV_FILE.is_file():
        for line in ENV_FILE.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.startswith("#"):
                out[key.strip()] = value.strip()
    return out


def write_env(values: dict[str, str]) -> None:
    """The env file, 0600 in a 0700 folder (it holds the password; the settings refuse a
    settings file others could write, talent_core/store/data_dir.settings_file_problem)."""
    folder = ENV_FILE.parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.lstat(folder)
    if st.st_uid == os.geteuid() and stat.S_ISDIR(st.st_mode) and st.st_mode & 0o077:
        os.chmod(folder, 0o700)
    tmp = ENV_FILE.with_name(ENV_FILE.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# written by `make neo4j-up` (tests/neo4j/neo4j_ctl.py); removed by neo4j-down\n")
        f.writelines(f"{k}={v}\n" for k, v in values.items())
    os.replace(tmp, ENV_FILE)


def bolt_answers(uri: str, password: str) -> bool:
    import logging

    import neo4j

    logging.getLogger("neo4j").setLevel(logging.CRITICAL)  # "Unable to retrieve routing..."

    try:
        with neo4j.GraphDatabase.driver(uri, auth=("neo4j", password)) as driver:
            driver.verify_connectivity()
        return True
    except Exception:
        return False


def started(offset: int) -> bool:
    """Whether the launcher wrote its ready line to the log after `offset`."""
    try:
        with open(LOG_FILE, "rb") as f:
            f.seek(offset)
            return READY in f.read()
    except OSError:
        return False


def log_tail(n: int = 30) -> str:
    try:
        return "\n".join(LOG_FILE.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def up() -> None:
    env = read_env()
    pid = running_pid()
    if pid is not None and env.get("NEO4J_URI"):
        if bolt_answers(env["NEO4J_URI"], env.get("NEO4J_PASSWORD", "")):
            say(f"already running at {env['NEO4J_URI']} (pid {pid}); env: {ENV_FILE}")
            return
        fail(f"pid {pid} runs the launcher but Bolt does not answer: `make neo4j-down` first")
    if pid is not None:
        fail(f"pid {pid} runs the launcher without {ENV_FILE}: `make neo4j-down` first")
    cp = build()
    STATE.mkdir(parents=True, exist_ok=True)
    os.chmod(STATE, 0o700)
    port = int(os.environ.get("NEO4J_PORT") or free_port())
    password = secrets.token_urlsafe(24)
    uri = f"neo4j://127.0.0.1:{port}"
    heap = os.environ.get("NEO4J_HEAP", "1g")
    cmd = ["java", f"-Xmx{heap}", "-XX:+ExitOnOutOfMemoryError", "-cp", cp, MAIN, str(HOME),
           str(port)]  # fmt: skip
    t0 = time.monotonic()
    offset = LOG_FILE.stat().st_size if LOG_FILE.exists() else 0
    with open(LOG_FILE, "ab") as log:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "NEO4J_PASSWORD": password}, start_new_session=True, cwd=STATE,
        )  # fmt: skip
    PID_FILE.write_text(f"{proc.pid}\n")
    deadline = t0 + float(os.environ.get("NEO4J_START_TIMEOUT", "180"))
    # The launcher prints READY once the password is set: logging in before that fails, and
    # Neo4j locks the user out for 5 s after 3 failed logins (that made starts take 12-30 s).
    while not (started(offset) and bolt_answers(uri, password)):
        if proc.poll() is not None:
            PID_FILE.unlink(missing_ok=True)
            fail(f"the launcher exited ({proc.returncode}) before Bolt answered; "
                 f"{LOG_FILE}:\n{log_tail()}")  # fmt: skip
        if time.monotonic() > deadline:
            stop(proc.pid)
            fail(f"Bolt did not answer within {deadline - t0:.0f} s; {LOG_FILE}:\n{log_tail()}")
        time.sleep(0.2)
    write_env({"NEO4J_URI": uri, "NEO4J_USER": "neo4j", "NEO4J_PASSWORD": password})
    say(f"Neo4j 5 Community up at {uri} (pid {proc.pid}) in {time.monotonic() - t0:.1f} s; "
        f"env: {shown(ENV_FILE)}, log: {shown(LOG_FILE)}")  # fmt: skip


def stop(pid: int, timeout: float = 60.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)  # the launcher's shutdown hook closes the DBMS cleanly
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _zombie(pid):
            return
        time.sleep(0.2)
    say(f"pid {pid} did not stop within {timeout:.0f} s: killing it")
    os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def down(keep: bool) -> None:
    pid = running_pid()
    if pid is not None:
        stop(pid)
        say(f"stopped (pid {pid})")
    else:
        say("not running")
    PID_FILE.unlink(missing_ok=True)
    ENV_FILE.unlink(missing_ok=True)
    if keep:
        say(f"data kept in {shown(HOME)}")
    elif STATE.exists():
        shutil.rmtree(STATE)
        say(f"removed {shown(STATE)}")


def status() -> None:
    pid = running_pid()
    env = read_env()
    if pid is None:
        say("not running")
        sys.exit(3)
    ok = bool(env.get("NEO4J_URI")) and bolt_answers(
        env["NEO4J_URI"], env.get("NEO4J_PASSWORD", "")
    )
    say(f"pid {pid}, {env.get('NEO4J_URI', '(no env file)')}, Bolt "
        f"{'answers' if ok else 'does not answer'}")  # fmt: skip
    sys.exit(0 if ok else 1)


def admin(args: list[str]) -> int:
    """Neo4j's admin tool (neo4j-admin) on the launcher's home; an import needs the server
    stopped (`make neo4j-down KEEP=1`). Returns its exit status."""
    cp = build()
    if running_pid() is not None and args[:2] == ["database", "import"]:
        fail("the server is running: stop it first (`make neo4j-down KEEP=1`); "
             "neo4j-admin imports into a stopped database")  # fmt: skip
    STATE.mkdir(parents=True, exist_ok=True)
    os.chmod(STATE, 0o700)
    conf = HOME / "conf"  # neo4j.conf may be added here; none: Neo4j's defaults
    conf.mkdir(parents=True, exist_ok=True)
    heap = os.environ.get("NEO4J_HEAP", "1g")
    env = {**os.environ, "NEO4J_HOME": str(HOME), "NEO4J_CONF": str(conf)}
    return subprocess.run(["java", f"-Xmx{heap}", "-cp", cp, ADMIN_MAIN, *args], env=env).returncode


def main() -> None:
    if sys.argv[1:2] == ["admin"]:  # everything after it is neo4j-admin's
        sys.exit(admin(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["up", "down", "status", "build", "admin"])
    ap.add_argument("--keep", action="store_true", help="down: keep the data")
    args = ap.parse_args()
    if args.action == "up":
        up()
    elif args.action == "down":
        down(args.keep or os.environ.get("KEEP", "") not in ("", "0"))
    elif args.action == "build":
        build()
    else:
        status()


if __name__ == "__main__":
    main()
