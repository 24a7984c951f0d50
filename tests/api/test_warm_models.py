"""The warm model process (issue 46): a second `talent ask` from a fresh shell answers through
the model process the first one started, with no server started by hand and no key; it
listens on a unix socket in the data dir only (owner only), and stops by itself once idle."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

ARGS = ["who directed Gravity", "--topic", "Gravity"]


def talent(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    run_env = {k: v for k, v in os.environ.items()
               if k not in ("TALENT_API_KEY", "TALENT_API_URL")}
    run_env.update(env)
    return subprocess.run([sys.executable, "-m", "talent_core", *args], env=run_env,
                          capture_output=True, text=True, timeout=300,
                          cwd=env["TALENT_DATA_DIR"])


def _serving_pids(sock: Path) -> list[int]:
    """The processes whose command line serves ``sock``."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--socket" in cmd and str(sock).encode() in cmd:
                out.append(int(p.name))
    return out


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] == "Z"
    except OSError:
        return True


def test_a_second_ask_answers_through_the_warm_model_process(api_env):
    data = Path(api_env["TALENT_DATA_DIR"])
    env = {**api_env, "TALENT_MODEL_SERVER_IDLE_TIMEOUT": "10"}
    pids: list[int] = []
    try:
        first = talent(env, "ask", *ARGS, "--json", "-v")
        assert first.returncode == 0, first.stderr
        assert "started the warm model process" in first.stderr
        (sock,) = data.glob("models-*.sock")
        assert stat.S_ISSOCK(sock.stat().st_mode) and not sock.stat().st_mode & 0o077  # owner only
        pids = _serving_pids(sock)
        assert len(pids) == 1
        second = talent(env, "ask", *ARGS, "--json", "-v")
        assert second.returncode == 0, second.stderr
        assert "started the warm model process" not in second.stderr
        assert "answered by talent serve at unix:" in second.stderr
        assert "loading" not in second.stderr.lower()  # no model load in the CLI process
        one, two = json.loads(first.stdout), json.loads(second.stdout)
        assert one["answer"] == two["answer"] and one["evidence"] == two["evidence"]
        assert _serving_pids(sock) == pids  # the same process answered both
        # --local answers here, whatever runs
        local = talent(env, "ask", *ARGS, "--json", "--local", "-v")
        assert local.returncode == 0 and "answered by talent serve" not in local.stderr
        assert json.loads(local.stdout)["answer"] == one["answer"]
        # idle past its timeout: it stops by itself
        deadline = time.monotonic() + 90
        while not _gone(pids[0]) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert _gone(pids[0]), "the warm model process did not stop when idle"
    finally:
        for pid in pids:
            if not _gone(pid):
                os.kill(pid, 9)


def test_a_changed_setting_gets_its_own_process_and_off_means_none(api_env, tmp_path):
    from talent_core.api.local import fingerprint, socket_path
    from talent_core.config import Settings

    base = Settings(data_dir=tmp_path, _env_file=None)
    assert fingerprint(base) == fingerprint(base.model_copy(update={"api_port": 9999}))
    other = base.model_copy(update={"adapters": "none"})
    assert socket_path(base) != socket_path(other)
    off = talent({**api_env, "TALENT_MODEL_SERVER_IDLE_TIMEOUT": "0"}, "ask", *ARGS, "-v")
    assert off.returncode == 0 and "warm model process" not in off.stderr


def test_the_socket_must_lie_in_the_data_dir(api_env, tmp_path):
    out = talent(api_env, "serve", "--socket", str(tmp_path / "elsewhere.sock"))
    assert out.returncode == 2 and "must be in the data dir" in out.stderr
    assert "Traceback" not in out.stderr
