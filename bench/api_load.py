"""Concurrent clients against one `talent serve` process (issue 32) while a load job runs:
first one client asking alone (asks per minute, nothing else running), then a load job
started through `POST /v1/loads` (a server-side path: TALENT_API_LOAD_DIRS is the load
file's folder) and at once N clients mixing ask / retrieve / entity search for a while; per
endpoint the status counts and p50/p95 latency, completed asks per minute, the load job's
progress during the window and its end, and the server's peak RSS. Only 429 and 503 (the
model queue is full) are expected refusals; anything else is an error. A temporary write key
is created and revoked. The load writes into the data dir: give a COPY of a store (copied
with its server stopped), never the store other benches measure.

    cp -r .talent/b/metaqa /tmp/apiload    # its server stopped
    python bench/api_load.py --data-dir /tmp/apiload --questions .talent/exp2/test.txt \
        --clients 16 --seconds 60 --alone-seconds 30 --load-file ../shared/data/metaqa/kb.txt \
        --out bench/results/api_load.json
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
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


def call(client: httpx.Client, op: str, q: str, stages: list[dict] | None = None) -> int:
    """One request of kind ``op``; its HTTP status (an answered ask's server-side stage
    timings go to ``stages``)."""
    if op == "ask":
        r = client.post("/v1/ask", json={"question": q})
        if r.status_code == 200 and stages is not None:
            stages.append(r.json().get("timings_ms", {}))
        return r.status_code
    if op == "retrieve":
        return client.post("/v1/retrieve", json={"question": q}).status_code
    name = q.split("[", 1)[-1].split("]", 1)[0] if "[" in q else q.split()[-1]
    return client.get("/v1/entities", params={"q": name}).status_code


def model_busy_s(base: str, key: str) -> float:
    """The server's summed model-slot time (/readyz llm.busy_s)."""
    r = httpx.get(base + "/readyz", headers={"Authorization": f"Bearer {key}"}, timeout=120)
    return float(r.json()["llm"].get("busy_s", 0.0))


def run_clients(base: str, key: str, qs: list[str], clients: int, seconds: float,
                ops: tuple[str, ...], nice: int = 0) -> dict:
    """``clients`` threads, each cycling through ``ops`` on random questions until the
    time is up (a request in flight then finishes and counts); ``nice``: the client
    threads' CPU priority (19: as if the clients ran on other machines)."""
    lat: dict[str, list[float]] = defaultdict(list)
    status: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    errors: list[str] = []
    stages: list[dict] = []
    done_at: list[float] = []  # seconds from the start to each answered ask
    lock = threading.Lock()
    t_start = time.perf_counter()
    stop = t_start + seconds
    busy0 = model_busy_s(base, key)

    def client(i: int) -> None:
        if nice:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        rng = random.Random(i)
        with httpx.Client(base_url=base, timeout=600,
                          headers={"Authorization": f"Bearer {key}"}) as c:
            n = i
            while time.perf_counter() < stop:
                op = ops[n % len(ops)]
                n += 1
                t0 = time.perf_counter()
                try:
                    code = call(c, op, rng.choice(qs), stages)
                except httpx.HTTPError as e:
                    with lock:
                        errors.append(f"{op}: {type(e).__name__}: {e}")
                    continue
                dt = time.perf_counter() - t0
                with lock:
                    status[op][code] += 1
                    if code == 200:
                        lat[op].append(dt)
                        if op == "ask":
                            done_at.append(time.perf_counter() - t_start)
                if code in (429, 503):
                    time.sleep(0.5)  # the Retry-After a polite client honours, shortened

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    busy = model_busy_s(base, key) - busy0
    return {
        "asks_answered_in_window": sum(t <= seconds for t in done_at),
        "model_slot_busy_share": round(busy / wall, 3),
        "clients": clients, "seconds": round(wall, 1),
        "status": {op: dict(v) for op, v in status.items()},
        "unexpected": sum(n for v in status.values() for c, n in v.items()
                          if c not in (200, 429, 503)) + len(errors),
        "transport_errors": errors[:10],
        "asks_per_min": round(len(lat["ask"]) * 60 / wall, 2),
        "latency_s": {op: {"n": len(xs), "p50": round(percentile(xs, 50) or 0, 3),
                           "p95": round(percentile(xs, 95) or 0, 3)}
                      for op, xs in lat.items()},
        # the answered asks' own stage times on the server (ms, median): a slower model
        # stage under load is CPU contention, a slower total with the same stages is waiting
        "ask_stage_ms_median": {k: round(statistics.median(t[k] for t in stages if k in t), 1)
                                for k in sorted({k for t in stages for k in t})},
        "ask_stage_ms_mean": {k: round(statistics.fmean(t[k] for t in stages if k in t), 1)
                              for k in sorted({k for t in stages for k in t})},
    }


def watch_jobs(base: str, key: str, job_ids: list[str], t_window: float,
               done: threading.Event, samples: list[dict]) -> None:
    """Poll the load jobs every second until ``done`` or all ended: (seconds since the
    window opened, the job running (else the last), its status, rows, triples)."""
    with httpx.Client(base_url=base, timeout=60,
                      headers={"Authorization": f"Bearer {key}"}) as c:
        while not done.wait(1.0):
            jobs = [c.get(f"/v1/loads/{j}").json() for j in job_ids]
            live = [j for j in jobs if j["status"] == "running"] or jobs[-1:]
            j = live[0]
            samples.append({"t_s": round(time.perf_counter() - t_window, 1),
                            "job": job_ids.index(j["id"]), "status": j["status"],
                            "rows": j["progress"]["rows"],
                            "triples": j["progress"]["triples"]})
            if all(x["status"] not in ("queued", "running") for x in jobs):
                return


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--alone-seconds", type=float, default=30)
    ap.add_argument("--load-file", type=Path, help="a file to load during the clients' window")
    ap.add_argument("--load-format", default="metaqa")
    ap.add_argument("--load-repeat", type=int, default=1,
                    help="load jobs of the file queued at once (they run one after another)")
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting of the server (e.g. TALENT_API_BROWSE_SLOTS=64)")
    ap.add_argument("--load-wait", type=float, default=900,
                    help="seconds to wait for the load job to end after the window")
    ap.add_argument("--client-nice", type=int, default=0,
                    help="the client threads' nice (19: as if the clients ran elsewhere; the "
                    "server keeps its priority)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    data_dir = args.data_dir.resolve()
    if args.load_file and data_dir.is_relative_to((ROOT / ".talent").resolve()):
        raise SystemExit(f"{data_dir}: the load writes into the store: give a copy (see the "
                         "docstring), not a store under .talent/")

    qs = questions(args.questions, 100)
    before = load_average()
    rss: list[int] = []
    done = threading.Event()

    def sample(pid: int) -> None:
        p = psutil.Process(pid)
        while not done.wait(0.5):
            try:  # the server and its model process(es)
                rss.append(p.memory_info().rss + sum(
                    c.memory_info().rss for c in p.children() if "redis" not in c.name()))
            except psutil.Error:
                return

    env = dict(kv.split("=", 1) for kv in args.server_env)
    if args.load_file:
        env["TALENT_API_LOAD_DIRS"] = str(args.load_file.resolve().parent)
    load: dict = {}
    with served(data_dir, "bench-api-load", "write", env) as (base, key, proc):
        try:
            threading.Thread(target=sample, args=(proc.pid,), daemon=True).start()
            run_clients(base, key, qs[:2], 1, 0.1, OPS)  # warm-up
            alone = run_clients(base, key, qs, 1, args.alone_seconds, ("ask",),
                                args.client_nice)
            print(f"alone: {alone['asks_per_min']} asks/min", file=sys.stderr)
            samples: list[dict] = []
            watch_done = threading.Event()
            watcher = None
            t_window = time.perf_counter()
            job_ids: list[str] = []
            if args.load_file:
                for _ in range(args.load_repeat):
                    r = httpx.post(base + "/v1/loads",
                                   headers={"Authorization": f"Bearer {key}"},
                                   json={"path": str(args.load_file.resolve()),
                                         "format": args.load_format}, timeout=60)
                    r.raise_for_status()
                    job_ids.append(r.json()["id"])
                watcher = threading.Thread(target=watch_jobs, args=(
                    base, key, job_ids, t_window, watch_done, samples), daemon=True)
                watcher.start()
            many = run_clients(base, key, qs, args.clients, args.seconds, OPS,
                               args.client_nice)
            print(f"{args.clients} clients: {many['asks_per_min']} asks/min, "
                  f"unexpected {many['unexpected']}", file=sys.stderr)
            if args.load_file:
                at_end = samples[-1] if samples else None
                deadline = time.perf_counter() + args.load_wait
                jobs = []
                with httpx.Client(base_url=base, timeout=60,
                                  headers={"Authorization": f"Bearer {key}"}) as c:
                    for job_id in job_ids:
                        while True:
                            job = c.get(f"/v1/loads/{job_id}").json()
                            if job["status"] not in ("queued", "running") or \
                                    time.perf_counter() > deadline:
                                break
                            time.sleep(2)
                        jobs.append(job)
                watch_done.set()
                load = {"file": str(args.load_file), "format": args.load_format,
                        "jobs": len(jobs), "status_at_window_end": at_end,
                        "running_during_window_s": sum(
                            1 for s in samples if s["status"] == "running"
                            and s["t_s"] <= many["seconds"]),
                        "final": [{"status": j["status"], "progress": j["progress"],
                                   "new_triples": (j["result"] or {}).get("new_triples"),
                                   "seconds": (j["result"] or {}).get("seconds")}
                                  for j in jobs],
                        "progress_samples": samples[::5]}
                print(f"load jobs: {[j['status'] for j in jobs]}", file=sys.stderr)
        finally:
            done.set()
    write_json_atomic(args.out, {
        "what": "one `talent serve --preload` process (TALENT_API_LLM_SLOTS=1, "
                "TALENT_API_LLM_QUEUE=8 defaults): one client asking alone (nothing else "
                "running), then a load job through POST /v1/loads (server-side path) and at "
                "once N clients cycling ask / retrieve / entity search (non-streamed) on "
                "random held-out questions; 429 = the model queue was full (the client waits "
                "0.5 s); asks_per_min counts every ask answered until the last client "
                "returned (the window plus the drain of the admitted asks)",
        "command": f"python bench/api_load.py --data-dir {args.data_dir} --questions "
                   f"{args.questions} --clients {args.clients} --seconds {args.seconds:g} "
                   f"--alone-seconds {args.alone_seconds:g}"
                   + (f" --load-file {args.load_file} --load-repeat {args.load_repeat}"
                      if args.load_file else "")
                   + "".join(f" --server-env {kv}" for kv in args.server_env)
                   + (f" --client-nice {args.client_nice}" if args.client_nice else "")
                   + f" --out {args.out}",
        "server_env": env, "client_nice": args.client_nice, "alone": alone,
        "concurrent": many, "load_jobs": load or None,
        "server_rss_mb_peak": round(max(rss) / 2**20, 1) if rss else None,
        "load_before": before, "load_after": load_average(),
    })


if __name__ == "__main__":
    main()
