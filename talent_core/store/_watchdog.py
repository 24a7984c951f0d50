"""Watchdog of an embedded FalkorDB server. Started by `falkordb_server.EmbeddedServer` next
to a server it starts (not for `talent server start`, which runs until stopped), in one of
two modes:

Owner mode, `python -I -S _watchdog.py OWNER_PID SERVER_PID [SOCKET]`
(TALENT_SERVER_IDLE_TIMEOUT=0: the server lives as long as the command that started it). It
waits until either process ends:
  * the server ended (stopped cleanly by its owner, or by anyone): exit;
  * the owner ended while the server still runs (kill -9, a crash, os._exit): SIGTERM the
    server (Redis then flushes and fsyncs the AOF and exits), SIGKILL it after 60 s.

Idle mode, `python -I -S _watchdog.py --idle SECONDS SERVER_PID SOCKET COMPACT_BYTES` (the
default: a detached server that outlives the command that started it). Every few seconds it
reads the server's INFO over the unix socket; the server is in use while another client is
connected, while any other client connected or ran a command since the last look (the
`total_connections_received` / `total_commands_processed` counters move by more than this
watchdog's own one connection and one INFO), while it loads its data or rewrites its AOF.
After SECONDS without use it stops the server cleanly: the AOF is first compacted
(BGREWRITEAOF, waited for) when more than COMPACT_BYTES were appended since its base, as
`EmbeddedServer.stop` does, and the stop is called off if a client came meanwhile; then
SIGTERM (Redis fsyncs the AOF and exits; every acknowledged write was already fsynced,
`appendfsync always`), SIGKILL after 60 s. It exits as soon as the server ends, whoever
stopped it (`talent server stop`). A client that connects in the instant of the stop sees a
closed connection; the stores then restart the server and retry (`FalkorDBStore._call`).

Either way, once the server has ended, the private `talent-*` directory its SOCKET path went
through (when the data dir's path is too long for a unix socket) is removed
(`remove_link_dir`), so a stopped server leaves no folder behind.

Stdlib only and run in isolated mode: it must start in milliseconds and import nothing of
the project. On Linux the server (and owner) are watched through pidfds (no polling, and a
pid reused by another process can never be signalled); elsewhere it polls every 0.5 s.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
import sys
import time

# the data dir's files (falkordb_server and data_dir import these: one spelling)
LOCK_NAME = "falkordb.lock"  # held by the running server (inherited fd)
SOCKET_RECORD_NAME = "falkordb.socket"  # the running server's socket path (one line)
GRACE_S = 60.0
COMPACT_WAIT_S = 600.0
IO_TIMEOUT_S = 10.0


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


class _Server:
    """The watched server process: its pidfd when there is one, else its pid."""

    def __init__(self, pid: int, fd: int | None = None):
        self.pid = pid
        self.fd = fd if fd is not None else _open(pid)

    def gone(self) -> bool:
        if self.fd is not None:
            return bool(select.select([self.fd], [], [], 0)[0])
        return not _alive(self.pid)

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking when the server ends; whether it ended."""
        if self.fd is not None:
            return bool(select.select([self.fd], [], [], max(seconds, 0.0))[0])
        deadline = time.monotonic() + seconds
        while _alive(self.pid):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(0.5, left))
        return True

    def send(self, sig: int) -> None:
        try:
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, sig)  # type: ignore[attr-defined]
            else:
                os.kill(self.pid, sig)
        except (ProcessLookupError, OSError):
            pass

    def terminate(self) -> None:
        """SIGTERM (a clean Redis shutdown), SIGKILL after GRACE_S."""
        self.send(signal.SIGTERM)
        if self.wait(GRACE_S):
            return
        _log(f"server pid {self.pid} did not stop in {GRACE_S:.0f} s; killing it")
        self.send(signal.SIGKILL)
        self.wait(5.0)


def remove_link_dir(sock: str) -> None:
    """After a server stopped: remove the private mkdtemp `talent-*` directory its socket
    path `sock` went through (a link to the data dir; see
    `data_dir.choose_socket_path`) and the data dir's record of that
    path, unless a server for the data dir runs or is starting (it holds the start lock)."""
    link = os.path.dirname(sock)
    runtime = os.path.dirname(link)
    if not os.path.basename(runtime).startswith("talent-") or not os.path.islink(link):
        return  # the data dir's own socket, or $XDG_RUNTIME_DIR/talent (kept, reused)
    try:
        fd: int | None = os.open(os.path.join(link, LOCK_NAME), os.O_RDWR)
    except OSError:
        fd = None  # the data dir is gone: its link is stale
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            record = os.path.join(link, SOCKET_RECORD_NAME)
            with contextlib.suppress(OSError), open(record, encoding="utf-8") as f:
                if f.read().strip() == sock:
                    os.unlink(record)
        with contextlib.suppress(OSError):
            os.unlink(link)
            os.rmdir(runtime)
    finally:
        if fd is not None:
            os.close(fd)


# --- owner mode ----------------------------------------------------------------------------
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
    _Server(server, server_fd).terminate()
    return 0


# --- idle mode -----------------------------------------------------------------------------
def _command(path: str, *args: str) -> bytes:
    """One command on a fresh connection (RESP); the reply's payload (a bulk string, or a
    simple string); RuntimeError for an error reply, OSError when unreachable."""
    req = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a.encode()
        req.append(b"$%d\r\n%s\r\n" % (len(b), b))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(IO_TIMEOUT_S)
        s.connect(path)
        s.sendall(b"".join(req))
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                raise OSError("connection closed")
            buf += chunk
            if b"\r\n" not in buf:
                continue
            head, rest = buf.split(b"\r\n", 1)
            kind = head[:1]
            if kind == b"-":
                raise RuntimeError(head[1:].decode(errors="replace"))
            if kind == b"+":
                return head[1:]
            if kind != b"$":
                raise OSError(f"unexpected reply {head[:40]!r}")
            n = int(head[1:])
            if n < 0:
                return b""
            if len(rest) >= n + 2:
                return rest[:n]


def _info(path: str) -> dict[str, str]:
    out = {}
    for line in _command(path, "INFO").decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


def _int(info: dict[str, str], key: str) -> int:
    try:
        return int(info.get(key, "0"))
    except ValueError:
        return 0


class _Use:
    """Whether clients other than this watchdog used the server between two INFOs."""

    def __init__(self) -> None:
        self.cmds: int | None = None
        self.conns: int | None = None
        self.last_other = False  # the last look saw another client

    def look(self, info: dict[str, str], own_cmds: int = 1, own_conns: int = 1) -> bool:
        """`own_*`: this watchdog's commands / connections since the previous INFO (the
        previous INFO itself included: Redis counts a command once it is done)."""
        cmds = _int(info, "total_commands_processed")
        conns = _int(info, "total_connections_received")
        first = self.cmds is None
        self.last_other = not first and (
            cmds - self.cmds > own_cmds or conns - self.conns > own_conns  # type: ignore[operator]
            or _int(info, "connected_clients") > 1)  # another client (the UI, a long command)
        self.cmds, self.conns = cmds, conns
        return bool(
            first or self.last_other
            or _int(info, "loading")
            or _int(info, "async_loading")
            or _int(info, "aof_rewrite_in_progress")
            or _int(info, "aof_rewrite_scheduled")
        )


def _compact(path: str, srv: _Server, use: _Use, compact_bytes: int) -> bool:
    """Compact the AOF before an idle stop when it grew by more than `compact_bytes`;
    whether the stop may go on (the server is unused, still)."""
    info = _info(path)
    if use.look(info):
        return False
    grown = _int(info, "aof_current_size") - _int(info, "aof_base_size")
    if compact_bytes <= 0 or grown <= compact_bytes:
        return True
    _log(f"compacting the AOF ({grown} bytes appended) before the idle stop")
    own_cmds, own_conns = 1, 2  # the INFO above; the BGREWRITEAOF's connection
    try:
        _command(path, "BGREWRITEAOF")
        own_cmds += 1
    except RuntimeError as e:  # Redis's own rewrite is running: wait for it
        _log(f"BGREWRITEAOF: {e}")
    deadline = time.monotonic() + COMPACT_WAIT_S
    while time.monotonic() < deadline:
        if srv.wait(0.2):
            return False
        info = _info(path)
        use.look(info, own_cmds, own_conns)  # busy: the rewrite itself; others: a client
        if use.last_other:
            _log("a client came during the compaction; not stopping")
            return False
        own_cmds = own_conns = 1
        if not (_int(info, "aof_rewrite_in_progress") or _int(info, "aof_rewrite_scheduled")):
            if info.get("aof_last_bgrewrite_status", "ok") != "ok":
                _log("the AOF rewrite failed; stopping anyway (the AOF is intact)")
            return True
    _log("the AOF rewrite is still running; not stopping now")
    return False


def _identity(path: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the socket at ``path`` (through the link dir), None when gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def idle_main(timeout: float, server: int, path: str, compact_bytes: int) -> int:
    srv = _Server(server)
    if srv.gone():
        return 0
    period = min(max(timeout / 20.0, 0.2), 15.0)
    use = _Use()
    last_use = time.monotonic()
    failing_since: float | None = None
    socket_id = _identity(path)  # None until the server has made its socket
    while not srv.wait(period):
        now_id = _identity(path)
        if socket_id is None and now_id is None and not os.path.isdir(os.path.dirname(path)):
            # never seen the socket (this watchdog started late, on a busy machine) and its
            # folder is gone too: the data dir was deleted before the first look
            socket_id = (-1, -1)
        if socket_id is None:
            socket_id = now_id
        elif now_id != socket_id:
            # the data dir (or the socket in it) was deleted or replaced: no client can reach
            # this server again, and its files are gone: stop it instead of waiting forever
            _log(f"the socket {path} of server pid {server} is gone (its data dir deleted?); "
                 "stopping it")
            srv.terminate()
            return 0
        try:
            busy = use.look(_info(path))
            failing_since = None
        except (OSError, RuntimeError, ValueError) as e:
            busy = True  # starting up, or stuck: never stopped for it
            use = _Use()
            if failing_since is None:
                failing_since = time.monotonic()
            elif 0 <= time.monotonic() - failing_since - timeout < period:
                _log(f"cannot read the server's INFO for {timeout:g} s ({e}); not stopping it")
        now = time.monotonic()
        if busy:
            last_use = now
            continue
        if now - last_use < timeout:
            continue
        try:
            go = _compact(path, srv, use, compact_bytes)
        except (OSError, RuntimeError, ValueError) as e:
            _log(f"cannot read the server's INFO ({e}); not stopping it")
            go = False
        if srv.gone():
            return 0
        if not go:
            last_use = time.monotonic()
            continue
        _log(f"server pid {server} unused for {now - last_use:.0f} s (idle timeout "
             f"{timeout:g} s); stopping it")
        srv.terminate()
        return 0
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--idle"]:
        rc = idle_main(float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
        sock = sys.argv[4]
    else:
        rc = main(int(sys.argv[1]), int(sys.argv[2]))
        sock = sys.argv[3] if len(sys.argv) > 3 else ""
    if sock:  # the server has ended (both modes return only then)
        remove_link_dir(sock)
    sys.exit(rc)
