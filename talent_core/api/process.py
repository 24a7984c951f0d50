"""A `talent serve` child process: waited for until it answers, and stopped. The warm model
process (`api.local`) is waited for so; the tests and the benches that start a server on a
port wait for it and stop it with the same code. Plain `urllib`, as `api.client`."""

from __future__ import annotations

import http.client
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable


def healthy(url: str, timeout: float = 1.0) -> bool:
    """Whether a `talent serve` answers /healthz at ``url`` (200) within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return False


def wait_up(proc: subprocess.Popen, answers: Callable[[], bool], timeout: float,
            interval: float = 0.2) -> bool:
    """True once ``answers()`` is (polled every ``interval`` seconds); False when ``proc``
    exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> bool:
    """`wait_up` for the `talent serve` ``proc`` answering /healthz at ``url``."""
    return wait_up(proc, lambda: healthy(url), timeout)


def stop(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM (a clean shutdown); SIGKILL when ``proc`` has not exited after ``timeout``
    seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
