"""Concurrent clients against one `talent serve` process (issue 32): first one client asking
alone (asks per minute), then N clients mixing ask / retrieve / entity search for a while;
per endpoint the status counts and p50/p95 latency, completed asks per minute, and the
server's peak RSS. Only 429 (the model queue is full) is an expected refusal; anything else
is an error. A temporary read key is created and revoked; the store is not written.

    python bench/api_load.py --data-dir .talent/b/metaqa --questions .talent/exp2/test.txt \
        --clients 16 --seconds 30 --alone-seconds 20 --out bench/results/api_load.json
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import httpx
import psutil
from api_latency import questions, served
from benchio import load_average, write_json_atomic

from talent_core.evaluation.latency import percentile

OPS = ("ask", "retrieve", "entities")


def call(client: httpx.Client, op: str, q: str) -> int:
    """One request of kind ``op``; its HTTP status."""
    if op == "ask":
        return client.post("/v1/ask", json={"question": q}).status_code
    if op == "retrieve":
        return client.post("/v1/retrieve", json={"question": q}).status_code
    name = q.split("[", 1)[-1].split("]", 1)[0] if "[" in q else q.split()[-1]
    return client.get("/v1/entities", params={"q": name}).status_code


def run_clients(base: str, key: str, qs: list[str], clients: int, seconds: float,
                ops: tuple[str, ...]) -> dict:
    """``clients`` threads, each cycling through ``ops`` on random questions until the
    time is up (a request in flight then finishes and counts)."""
    lat: dict[str, list[float]] = defaultdict(list)
    status: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    errors: list[str] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def client(i: int) -> None:
        rng = random.Random(i)
        with httpx.Client(base_url=base, timeout=600,
                          headers={"Authorization": f"Bearer {key}"}) as c:
            n = i
            while time.perf_counter() < stop:
                op = ops[n % len(ops)]
                n += 1
                t0 = time.perf_counter()
                try:
                    code = call(c, op, rng.choice(qs))
                except httpx.HTTPError as e:
                    with lock:
                        errors.append(f"{op}: {type(e).__name__}: {e}")
                    continue
                dt = time.perf_counter() - t0
                with lock:
                    status[op][code] += 1
                    if code == 200:
                        lat[op].append(dt)
                if code == 429:
                    time.sleep(0.5)  # the Retry-After a polite client honours, shortened

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {
        "clients": clients, "seconds": round(wall, 1),
        "status": {op: dict(v) for op, v in status.items()},
        "unexpected": sum(n for v in status.values() for c, n in v.items()
                          if c not in (200, 429)) + len(errors),
        "transport_errors": errors[:10],
        "asks_per_min": round(len(lat["ask"]) * 60 / wall, 2),
        "latency_s": {op: {"n": len(xs), "p50": round(percentile(xs, 50) or 0, 3),
                           "p95": round(percentile(xs, 95) or 0, 3)}
                      for op, xs in lat.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--alone-seconds", type=float, default=20)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    qs = questions(args.questions, 100)
    before = load_average()
    rss: list[int] = []
    done = threading.Event()

    def sample(pid: int) -> None:
        p = psutil.Process(pid)
        while not done.wait(0.5):
            try:
                rss.append(p.memory_info().rss)
            except psutil.Error:
                return

    with served(args.data_dir.resolve(), "bench-api-load") as (base, key, proc):
        try:
            threading.Thread(target=sample, args=(proc.pid,), daemon=True).start()
            run_clients(base, key, qs[:2], 1, 0.1, OPS)  # warm-up: embedder, planner
            alone = run_clients(base, key, qs, 1, args.alone_seconds, ("ask",))
            print(f"alone: {alone['asks_per_min']} asks/min", file=sys.stderr)
            many = run_clients(base, key, qs, args.clients, args.seconds, OPS)
            print(f"{args.clients} clients: {many['asks_per_min']} asks/min, "
                  f"unexpected {many['unexpected']}", file=sys.stderr)
        finally:
            done.set()
    write_json_atomic(args.out, {
        "what": "one `talent serve --preload` process (TALENT_API_LLM_SLOTS=1, "
                "TALENT_API_LLM_QUEUE=8 defaults): one client asking alone, then N clients "
                "cycling ask / retrieve / entity search (non-streamed) on random held-out "
                "questions; 429 = the model queue was full (the client waits 0.5 s)",
        "command": f"python bench/api_load.py --data-dir {args.data_dir} --questions "
                   f"{args.questions} --clients {args.clients} --seconds {args.seconds:g} "
                   f"--alone-seconds {args.alone_seconds:g} --out {args.out}",
        "alone": alone, "concurrent": many,
        "server_rss_mb_peak": round(max(rss) / 2**20, 1) if rss else None,
        "note": "no load job ran meanwhile (the measured store is shared and not written)",
        "load_before": before, "load_after": load_average(),
    })


if __name__ == "__main__":
    main()
