"""The embedded server between commands: `talent server start|status|stop` (a kept-alive
server outlives the command), and the default detached server, which outlives the command
that started it and stops by itself after TALENT_SERVER_IDLE_TIMEOUT seconds without a
client, with its AOF intact. Every test stops what it starts (conftest runs the others in
owner mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def talent(env: dict[str, str], *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "talent_core", *args], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _env(data: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "TALENT_DATA_DIR": str(data), "TALENT_STORE": "embedded", **extra}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def test_server_start_status_stop(tmp_path):
    env = _env(tmp_path / "d")
    assert talent(env, "server", "status", "--json")["running"] is False
    started = talent(env, "server", "start", "--json")
    try:
        assert started["running"] is True and started["mode"] == "kept"
        # the starting command has exited; the server is still there
        assert talent(env, "server", "status", "--json")["running"] is True
        assert talent(env, "stats", "--json")["triples"] == 0
        assert talent(env, "server", "status", "--json")["running"] is True  # stats did not stop it
    finally:
        stopped = talent(env, "server", "stop")
    assert stopped["stopped"] is True
    assert talent(env, "server", "status", "--json")["running"] is False


def test_status_says_where_the_store_is_in_words(tmp_path):
    env = _env(tmp_path / "d")
    out = subprocess.run([sys.executable, "-m", "talent_core", "server", "status"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"data dir {tmp_path / 'd'}" in out.stdout and "not running" in out.stdout


def test_detached_server_outlives_its_command_and_stops_when_idle(tmp_path):
    """The default: a command starts the server detached; it serves the next command,
    stays up while a client is connected, and stops cleanly once unused for the timeout
    (the data reloads from the AOF)."""
    import redis

    data = tmp_path / "d"
    env = _env(data, TALENT_SERVER_IDLE_TIMEOUT="3", TALENT_EMBEDDING_MODEL="hash:16",
               PYTHONPATH=str(REPO))
    kb = tmp_path / "kb.txt"
    kb.write_text("".join(f"e{i}|r{i % 3}|e{i + 1}\n" for i in range(40)))
    try:
        load = subprocess.run(
            [sys.executable, str(REPO / "tests" / "hash_cli.py"), "talent_core", "load",
             str(kb), "--format", "metaqa", "--no-progress"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert load.returncode == 0, load.stderr
        st = talent(env, "stats", "--json")
        assert st["triples"] == 40
        srv = st["server"]
        assert srv["running"] and srv["mode"] == "detached" and srv["idle_timeout"] == 3
        assert srv["data_dir"] == str(data) and srv["socket"].endswith("falkordb.sock")
        pid = srv["pid"]
        assert not _alive(srv["owner_pid"])  # the loader that started it has exited
        assert _alive(pid)
        # a connected client keeps it up past the timeout, even without commands
        client = redis.Redis(unix_socket_path=srv["socket"])
        client.ping()
        time.sleep(6)
        assert _alive(pid)
        client.close()
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid), "the idle server did not stop"
        log = (data / "falkordb.log").read_text()
        assert "idle timeout 3 s); stopping it" in log
        assert "Redis is now ready to exit" in log.split("idle timeout 3 s)")[-1]
        assert talent(env, "server", "status", "--json")["running"] is False
        # clean stop: the next command restarts it from the AOF, data intact
        again = talent(env, "stats", "--json")
        assert again["triples"] == 40 and again["server"]["pid"] != pid
    finally:
        talent(env, "server", "stop")
    assert talent(env, "server", "status", "--json")["running"] is False


def test_server_stop_stops_a_detached_server_now(tmp_path):
    env = _env(tmp_path / "d", TALENT_SERVER_IDLE_TIMEOUT="600")
    try:
        srv = talent(env, "stats", "--json")["server"]
        assert srv["mode"] == "detached" and _alive(srv["pid"])
    finally:
        stopped = talent(env, "server", "stop")
    assert stopped["stopped"] is True
    deadline = time.monotonic() + 10
    while _alive(srv["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(srv["pid"])


def test_idle_timeout_zero_stops_with_the_command(tmp_path):
    env = _env(tmp_path / "d", TALENT_SERVER_IDLE_TIMEOUT="0")
    srv = talent(env, "stats", "--json")["server"]
    assert srv["mode"] == "owner"
    deadline = time.monotonic() + 10
    while _alive(srv["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(srv["pid"])


@pytest.mark.parametrize(
    ("after", "own", "other"),
    [
        ({"total_commands_processed": "11", "total_connections_received": "6",
              "connected_clients": "1"}, 1, False),  # only the watchdog's INFO
        ({"total_commands_processed": "12", "total_connections_received": "6",
              "connected_clients": "1"}, 1, True),  # one more command
        ({"total_commands_processed": "11", "total_connections_received": "7",
              "connected_clients": "1"}, 1, True),  # a client came and went silently
        ({"total_commands_processed": "11", "total_connections_received": "6",
              "connected_clients": "2"}, 1, True),  # a client is connected
        ({"total_commands_processed": "12", "total_connections_received": "7",
              "connected_clients": "1"}, 2, False),  # the watchdog's own two commands
    ],
)
def test_watchdog_counts_only_other_clients(after, own, other):
    from talent_core.store import _watchdog as w

    use = w._Use()
    assert use.look({"total_commands_processed": "10", "total_connections_received": "5",
                     "connected_clients": "1"}) is True  # the first look: in use
    busy = use.look(after, own_cmds=own, own_conns=own)
    assert use.last_other is other and busy is other
    assert use.look({**after, "connected_clients": "1", "loading": "1"}) is True


def test_idle_stop_compacts_the_aof_first(tmp_path, monkeypatch):
    """Above COMPACT_AT_STOP_BYTES of new AOF, the idle watchdog rewrites the AOF before the
    stop, as `EmbeddedServer.stop` does; the data reloads after it."""
    from talent_core.store import falkordb_server as fs

    monkeypatch.setattr(fs, "COMPACT_AT_STOP_BYTES", 1)
    data = tmp_path / "d"
    srv = fs.EmbeddedServer(data)
    srv.idle_timeout = 2
    try:
        srv.ensure_running()
        assert srv.status()["mode"] == "detached"
        c = srv._client()
        c.set("k", "v" * 1000)
        c.close()
        pid = srv.pid
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid), "the idle server did not stop"
        log = (data / "falkordb.log").read_text()
        assert "compacting the AOF" in log and "idle timeout 2 s); stopping it" in log
        assert "Background AOF rewrite finished successfully" in log
    finally:
        srv.shutdown()
    again = fs.EmbeddedServer(data)  # owner mode: stopped below
    try:
        again.ensure_running()
        c = again._client()
        assert c.get("k") == b"v" * 1000
        c.close()
    finally:
        again.stop()


def test_a_detached_server_whose_data_dir_was_deleted_stops(tmp_path):
    """rm -rf of the data dir while its detached server runs: no client can reach it again
    (its socket is gone), so its watchdog stops it instead of keeping it up forever (it
    cannot read INFO any more, which it took for a server still starting)."""
    import shutil

    data = tmp_path / "d"
    env = _env(data, TALENT_SERVER_IDLE_TIMEOUT="40")  # the watchdog looks every 2 s
    srv = talent(env, "stats", "--json")["server"]
    pid = srv["pid"]
    assert srv["mode"] == "detached" and _alive(pid)
    try:
        shutil.rmtree(data)
        deadline = time.monotonic() + 25
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid), "the server of a deleted data dir is still running"
    finally:
        if _alive(pid):
            os.kill(pid, 9)


def test_the_watchdog_stops_a_server_whose_socket_folder_went_before_its_first_look(tmp_path):
    """A watchdog that starts late (a busy machine) after the data dir was already deleted
    never sees the socket: the socket's folder being gone stops the server all the same
    (it took the failing INFO for a server still starting, and kept it up forever)."""
    import subprocess
    import sys
    import threading

    from talent_core.store import _watchdog

    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        gone = tmp_path / "deleted-data-dir" / "falkordb.sock"
        watch = threading.Thread(target=_watchdog.idle_main,
                                 args=(4.0, server.pid, str(gone), 1 << 20), daemon=True)
        watch.start()
        watch.join(15)
        assert not watch.is_alive(), "the watchdog still waits for a server nobody can reach"
        assert server.wait(10) is not None
    finally:
        if server.poll() is None:
            server.kill()
