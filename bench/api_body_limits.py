"""Issue 44's two server figures, against a real `talent serve` on an empty store:

1. peak server memory while four clients without a key each send a 200 MB body to
   /v1/ask at once (the gate refuses them before a byte of the body is read);
2. what a 2 MB upload of 1,000,000 bad one-character rows (on_error=skip) leaves: the
   rejects the job keeps, and the job folder's largest size while it ran.

`--code DIR` runs the server from another checkout (e.g. a worktree of the commit before the
fix, for the before-figures); the JSON says which.

    python bench/api_body_limits.py --out bench/results/api_body_limits.json
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import ROOT, load_average, wait_healthy, write_json_atomic  # noqa: E402

from talent_core.api.process import stop  # noqa: E402

MB = 1024 * 1024


def _status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM of ``pid`` and its children summed (kB)."""
    out = {"rss_kb": 0, "hwm_kb": 0}
    pids = [pid]
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(k) for k in kids]
    except OSError:
        pass
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out["rss_kb"] += int(line.split()[1])
                if line.startswith("VmHWM:") and p == pid:
                    out["hwm_kb"] += int(line.split()[1])
        except OSError:
            pass
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _send_big(port: int, size: int, result: list, i: int) -> None:
    """POST a ``size``-byte JSON body without a key; (bytes sent, status line)."""
    sent, status = 0, ""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(f"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {size}\r\n\r\n".encode())
            chunk = b"x" * MB
            try:
                while sent < size:
                    s.sendall(chunk)
                    sent += len(chunk)
            except OSError:
                pass  # the server closed the connection: it read no more
            try:
                status = s.recv(200).split(b"\r\n", 1)[0].decode(errors="replace")
            except OSError:
                pass
    except OSError as e:
        status = f"error: {e}"
    result[i] = {"sent_mb": round(sent / MB, 1), "status": status}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/api_body_limits.json")
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout the server runs from")
    ap.add_argument("--body-mb", type=int, default=200)
    args = ap.parse_args()
    import httpx

    work = Path(tempfile.mkdtemp(prefix="talent-bench-limits-"))
    data = work / "data"
    env = {**os.environ, "TALENT_DATA_DIR": str(data), "TALENT_STORE": "embedded",
           "TALENT_API_PRELOAD": "false", "TALENT_SERVER_IDLE_TIMEOUT": "0",
           "TMPDIR": str(work)}
    key = subprocess.run([sys.executable, "-m", "talent_core", "keys", "create", "--name",
                          "bench", "--scope", "write"], env=env, cwd=args.code,
                         capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    port = _free_port()
    log = (work / "serve.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "talent_core", "serve", "--port", str(port)],
                            env=env, cwd=args.code, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    out: dict = {"code": str(args.code.resolve()), "commit": subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=args.code, capture_output=True,
        text=True).stdout.strip(), "load_before": load_average()}
    try:
        wait_healthy(base, proc)
        h = {"Authorization": f"Bearer {key}"}
        httpx.get(base + "/v1/stats", headers=h, timeout=60)  # the store opened
        before = _status(proc.pid)
        results: list = [None] * 4
        t0 = time.perf_counter()
        threads = [threading.Thread(target=_send_big, args=(port, args.body_mb * MB, results, i))
                   for i in range(4)]
        for t in threads:
            t.start()
        peak = dict(before)
        while any(t.is_alive() for t in threads):
            now = _status(proc.pid)
            peak = {k: max(peak[k], now[k]) for k in peak}
            time.sleep(0.05)
        after = _status(proc.pid)
        out["unauthenticated_bodies"] = {
            "clients": 4, "body_mb": args.body_mb, "seconds": round(time.perf_counter() - t0, 2),
            "replies": results, "server_rss_mb_before": round(before["rss_kb"] / 1024, 1),
            "server_rss_mb_peak": round(peak["rss_kb"] / 1024, 1),
            "server_hwm_mb_before": round(before["hwm_kb"] / 1024, 1),
            "server_hwm_mb_after": round(after["hwm_kb"] / 1024, 1),
            "peak_growth_mb": round((max(peak["rss_kb"], after["hwm_kb"]) - before["hwm_kb"])
                                    / 1024, 1)}
        # the rejects of a 2 MB upload of 1,000,000 bad rows
        body = b"Bench Film|directed_by|Bench Person\n" + b"x\n" * 1_000_000
        r = httpx.post(base + "/v1/loads", headers=h, timeout=120,
                       files={"file": ("bad_rows.txt", body)},
                       data={"format": "metaqa", "on_error": "skip"})
        r.raise_for_status()
        job = r.json()
        biggest = 0
        while job["status"] in ("queued", "running"):
            for d in work.glob("talent-api-load-*"):
                size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
                biggest = max(biggest, size)
            time.sleep(0.05)
            job = httpx.get(f"{base}/v1/loads/{job['id']}", headers=h, timeout=30).json()
        rej = httpx.get(f"{base}/v1/loads/{job['id']}/rejects", headers=h, timeout=60)
        left = sum(f.stat().st_size for d in work.glob("talent-api-load-*")
                   for f in d.rglob("*") if f.is_file())
        out["rejects"] = {"upload_mb": round(len(body) / MB, 2), "status": job["status"],
                          "rejected": (job.get("result") or {}).get("rejected"),
                          "rejects_served_mb": round(len(rej.content) / MB, 3),
                          "job_folder_peak_mb": round(biggest / MB, 3),
                          "job_folders_left_mb": round(left / MB, 3)}
    finally:
        stop(proc, 30)
        log.close()
    out["load_after"] = load_average()
    write_json_atomic(args.out, out)
    print(out)


if __name__ == "__main__":
    main()
