"""`talent server start|status|stop`: a kept-alive embedded server outlives the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def talent(env: dict[str, str], *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "talent_core", *args], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_server_start_status_stop(tmp_path):
    env = {**os.environ, "TALENT_DATA_DIR": str(tmp_path / "d"), "TALENT_STORE": "embedded"}
    assert talent(env, "server", "status")["running"] is False
    started = talent(env, "server", "start")
    try:
        assert started["running"] is True
        # the starting command has exited; the server is still there
        assert talent(env, "server", "status")["running"] is True
        assert talent(env, "stats", "--json")["triples"] == 0
        assert talent(env, "server", "status")["running"] is True  # stats did not stop it
    finally:
        stopped = talent(env, "server", "stop")
    assert stopped["stopped"] is True
    assert talent(env, "server", "status")["running"] is False
