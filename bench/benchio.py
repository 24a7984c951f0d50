"""What the bench scripts share: atomic JSON results and the machine's load."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def retrieval_bench_setup(product_threads: bool = False) -> Path:
    """Before numpy is imported: one torch/OpenMP thread (``product_threads``: torch's own
    count, as `talent ask` runs: the language-model stages pick their threads per call,
    `talent_core.llm.threads`; whole-ask latency benches use it), and numpy's BLAS with every core
    as in the product (the numpy query embedder picks its threads per call,
    `embedding_numpy.free_cores`). OMP_NUM_THREADS alone would also cap OpenBLAS, which
    falls back to it. (Until the query embedder moved to numpy, torch embedded questions
    and its spinning pool stalled numpy's: MiniLM question embedding p50 686 ms with 2
    threads at load ~10, 85 ms with 1; so torch stays at one.) Puts the repository and
    bench/ on sys.path; returns the repository root."""
    # (not talent_core.embedding.available_cores: importing it would import numpy first)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(cores or 1))
    if not product_threads:
        for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(v, "1")
    for p in (ROOT, ROOT / "bench"):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))
    return ROOT


def write_json_atomic(path: Path, data: dict) -> None:
    """``data`` as indented JSON at ``path``, all or nothing (temp file + fsync + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def load_average() -> dict:
    """1/5/15-minute load averages, `uptime`'s line and the CPU count."""
    out: dict = dict(zip(("1m", "5m", "15m"), (round(x, 2) for x in os.getloadavg()),
                         strict=True))
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out["uptime"] = subprocess.run(
            ["uptime"], capture_output=True, text=True, timeout=5, check=False
        ).stdout.strip()
    out["cpu_count"] = os.cpu_count()
    return out


def paired_difference(a: list[float], b: list[float], seed: int = 0, rounds: int = 2000
                      ) -> dict:
    """Mean of ``a - b`` over paired per-question scores with a bootstrap 95 % interval
    (questions resampled with replacement), and the questions each side wins."""
    import numpy as np

    if len(a) != len(b) or not a:
        raise ValueError(f"need two equally long, non-empty score lists ({len(a)}, {len(b)})")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    boot = np.random.default_rng(seed).choice(d, size=(rounds, len(d))).mean(axis=1)
    return {"n": len(d), "diff": round(float(d.mean()), 4),
            "ci95": [round(float(np.quantile(boot, 0.025)), 4),
                     round(float(np.quantile(boot, 0.975)), 4)],
            "wins": int((d > 0).sum()), "losses": int((d < 0).sum())}


def wait_healthy(base: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Return once ``proc`` (a `talent serve`) answers /healthz at ``base``; SystemExit when
    it exits first or ``timeout`` seconds pass."""
    from talent_core.api.process import wait_healthy as waited

    if not waited(base, proc, timeout):
        raise SystemExit(f"talent serve at {base} did not start (exit {proc.poll()})")


def wait_ready(base: str, key: str, timeout: float = 3600.0) -> None:
    """Return once `talent serve` at ``base`` says ready (/readyz 200: its models loaded in
    the background, TALENT_API_PRELOAD); SystemExit after ``timeout`` seconds."""
    import time

    import httpx

    deadline = time.time() + timeout
    while httpx.get(base + "/readyz", headers={"Authorization": f"Bearer {key}"},
                    timeout=60).status_code != 200:
        if time.time() > deadline:
            raise SystemExit(f"talent serve at {base} not ready after {timeout:.0f} s")
        time.sleep(0.5)


@contextlib.contextmanager
def busy_processes(n: int):
    """``n`` busy processes (a spinning Python loop each) while the block runs: the "beside
    two busy processes" of the figures."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()


def wait_for_fill(log: Path, timeout: float = 1800.0) -> None:
    """Return once the vector fill logging to ``log`` (`talent vectors`: its last line says
    what is "still without an embedding") has ended; SystemExit after ``timeout`` seconds.
    Reads the file once a second: the wait adds no load of its own."""
    import time

    deadline = time.monotonic() + timeout
    while not (log.exists() and "still without an embedding" in log.read_text()):
        if time.monotonic() > deadline:
            raise SystemExit(f"the fill did not end in {timeout:.0f} s: {log}")
        time.sleep(1.0)
