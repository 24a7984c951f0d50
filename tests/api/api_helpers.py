"""Helpers of the HTTP API tests: the Bearer header, an SSE parser, the stage order, a real
`talent serve` process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def sse_events(text: str) -> list[tuple[str, dict]]:
    """(event, data) of each Server-Sent Event in ``text``."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        if not lines:  # a comment (heartbeat) only
            continue
        event = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "message")
        data = "\n".join(ln[5:].lstrip() for ln in lines if ln.startswith("data:"))
        out.append((event, json.loads(data)))
    return out


def wait_load(c, job: dict, h: dict, seconds: float = 60) -> dict:
    """A load job's document once it has ended (or ``seconds`` have passed), polled with
    the read headers ``h`` through the client ``c``."""
    deadline = time.time() + seconds
    while job["status"] in ("queued", "running") and time.time() < deadline:
        time.sleep(0.05)
        job = c.get(f"/v1/loads/{job['id']}", headers=h).json()
    return job


STAGES = ["seeds", "candidate", "selection", "plan", "answer", "done"]


def api_settings(env: dict[str, str], **extra):
    from talent_core.config import Settings

    extra.setdefault("api_browse_nice", 0)  # as api_env: request threads at normal priority
    extra.setdefault("api_llm_slots", 1)  # the queue tests hold the one slot
    extra.setdefault("api_preload", False)  # no model load behind every app of the tests
    extra.setdefault("planner", "none")
    return Settings(data_dir=Path(env["TALENT_DATA_DIR"]), base_model=env["TALENT_BASE_MODEL"],
                    model_cache_dir=Path(env["TALENT_MODEL_CACHE_DIR"]), _env_file=None,
                    **extra)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(env: dict[str, str], log: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """(base URL, process) of `talent serve` on a free port with ``env`` added, once
    /healthz answers; stopped (SIGTERM: a clean shutdown) afterwards."""
    from talent_core.api.process import stop, wait_healthy

    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "talent_core", "serve", "--port", str(port), *args],
            env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
            cwd=Path(env["TALENT_DATA_DIR"]))
    base = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(base, proc, 60):
            raise AssertionError("talent serve did not start:\n" + log.read_text())
        yield base, proc
    finally:
        stop(proc, 15)
