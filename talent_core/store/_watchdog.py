"""Watchdog of an embedded FalkorDB server: `python -I -S _watchdog.py OWNER_PID SERVER_PID`.

Started by `falkordb_server.EmbeddedServer` next to a server that an ordinary command
started (not `talent server start`). It waits until either process ends:
  * the server ended (stopped cleanly by its owner, or by anyone): exit;
  * the owner ended while the server still runs (kill -9, a crash, os._exit): SIGTERM the
    server (Redis then flushes and fsyncs the AOF and exits), SIGKILL it after 60 s.
Stdlib only and run in isolated mode: it must start in milliseconds and import nothing of
the project. On Linux both processes are watched through pidfds (no polling, and a pid
reused by another process can never be signalled); elsewhere it polls every 0.5 s.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

GRACE_S = 60.0


def _log(msg: str) -> None:
    stamp = time.strftime("%d %b %Y %H:%M:%S")
    print(f"{os.getpid()}:W {stamp} talent watchdog: {msg}", flush=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return None


def main(owner: int, server: int) -> int:
    owner_fd, server_fd = _open(owner), _open(server)
    if server_fd is None and not _alive(server):
        return 0
    if owner_fd is None and not _alive(owner):
        owner_gone = True
    elif owner_fd is not None and server_fd is not None:
        poller = select.poll()
        poller.register(owner_fd, select.POLLIN)
        poller.register(server_fd, select.POLLIN)
        ready = {fd for fd, _ in poller.poll()}
        owner_gone = server_fd not in ready
    else:
        while _alive(owner) and _alive(server):
            time.sleep(0.5)
        owner_gone = _alive(server)
    if not owner_gone:
        return 0  # the server ended first: its owner (or someone) stopped it
    _log(f"process {owner} that started the server (pid {server}) is gone; stopping it")

    def send(sig: int) -> None:
        try:
            if server_fd is not None:
                signal.pidfd_send_signal(server_fd, sig)  # type: ignore[attr-defined]
            else:
                os.kill(server, sig)
        except (ProcessLookupError, OSError):
            pass

    send(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        if server_fd is not None:
            if select.select([server_fd], [], [], 0.2)[0]:
                return 0
        elif not _alive(server):
            return 0
        else:
            time.sleep(0.2)
    _log(f"server pid {server} did not stop in {GRACE_S:.0f} s; killing it")
    send(signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
