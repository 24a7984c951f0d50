"""Latency of a streamed ask over HTTP (issue 32): a real `talent serve` process on a loaded
store with the shipped models; per question, the time to the first Server-Sent Event
(seeds), to the candidate S event, to the answer event and to the end of the stream, seen by
a real HTTP client (httpx). A temporary read key is created and revoked.

    python bench/api_latency.py --data-dir .talent/b/metaqa --questions .talent/exp2/test.txt \
        -n 10 --out bench/results/api_latency.json
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import httpx
from benchio import load_average, wait_healthy, wait_ready, write_json_atomic

from talent_core.api.keys import KeyStore


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(data_dir: Path, name: str, scope: str = "read", env: dict[str, str] | None = None,
           ) -> Iterator[tuple[str, str, subprocess.Popen]]:
    """(base URL, a temporary key of ``scope``, the process) of `talent serve --preload` on
    ``data_dir`` and a free port (``env`` added to its environment), once /healthz answers
    (the models are loaded then); the server is stopped and the key revoked afterwards (the
    keys file removed if this made it: the data dir is left as it was found)."""
    ks = KeyStore(data_dir)
    had_keys_file = ks.path.exists()
    rec, key = ks.create(f"{name}-{os.getpid()}", scope)  # type: ignore[arg-type]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "talent_core", "serve", "--port", str(port),
                             "--preload"],
                            env={**os.environ, "TALENT_DATA_DIR": str(data_dir), **(env or {})},
                            cwd=ROOT)
    try:
        wait_healthy(base, proc, timeout=3600)
        wait_ready(base, key)  # the models loaded (in the background since the start)
        yield base, key, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        ks.revoke(rec.id)
        if not had_keys_file and not ks.keys():
            ks.path.unlink()


def questions(path: Path, n: int) -> list[str]:
    """The first ``n`` questions of a MetaQA-style file (question TAB answers)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(line.split("\t")[0])
        if len(out) == n:
            break
    return out


def streamed_ask(base: str, key: str, question: str) -> dict:
    """One streamed ask: seconds from the request to each event's arrival."""
    t0 = time.perf_counter()
    at: dict[str, float] = {}
    event = None
    with httpx.stream("POST", base + "/v1/ask", json={"question": question, "stream": True},
                      headers={"Authorization": f"Bearer {key}"}, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
                at.setdefault(event, round(time.perf_counter() - t0, 3))
    at["end"] = round(time.perf_counter() - t0, 3)
    at["first_event"] = min(v for k, v in at.items() if k != "end")
    at["order"] = list(k for k in at if k not in ("end", "first_event"))  # type: ignore[assignment]
    return at


def summary(xs: list[float]) -> dict:
    return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3),
            "max": round(max(xs), 3), "mean": round(statistics.fmean(xs), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    before = load_average()
    t_start = time.perf_counter()
    with served(args.data_dir.resolve(), "bench-api-latency") as (base, key, _):
        ready_s = round(time.perf_counter() - t_start, 2)
        qs = questions(args.questions, args.n + 1)
        warm = streamed_ask(base, key, qs[0])  # the first ask also loads the query embedder
        runs = []
        for q in qs[1:]:
            r = streamed_ask(base, key, q)
            r["question"] = q
            runs.append(r)
            print(f"{r['first_event']:.3f}s first event, {r['end']:.3f}s whole  {q}",
                  file=sys.stderr)
    write_json_atomic(args.out, {
        "what": "streamed POST /v1/ask over HTTP against `talent serve --preload` (one "
                "process, models loaded once); seconds from the request to each event",
        "command": "python bench/api_latency.py --data-dir .talent/b/metaqa --questions "
                   f".talent/exp2/test.txt -n {args.n} --out {args.out}",
        "store": str(args.data_dir), "questions_file": str(args.questions),
        "n": len(runs), "server_start_to_ready_s": ready_s, "warmup_ask": warm,
        "first_event_s": summary([r["first_event"] for r in runs]),
        "candidate_event_s": summary([r["candidate"] for r in runs]),
        "answer_event_s": summary([r["answer"] for r in runs]),
        "whole_answer_s": summary([r["end"] for r in runs]),
        "stage_order_ok": all(r["order"] == ["seeds", "candidate", "selection", "plan",
                                             "answer", "done"] for r in runs),
        "per_question": runs,
        "note": "the pipeline has no hooks inside its language-model half: selection, plan "
                "and answer are sent together when Pipeline.answer returns",
        "load_before": before, "load_after": load_average(),
    })


if __name__ == "__main__":
    main()
