"""Issue 46's "two `talent ask` in a row from a fresh shell": the wall time of each (the first
starts the data dir's warm model process and loads the models, the second answers through
it), beside one `--local` ask (loads the models in its own process, as every ask did
before), quiet and with ``--busy N`` CPU-bound processes beside them.

    python bench/warm_ask.py DATA_DIR --out bench/results/warm_ask.json [--busy 2]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import ROOT, load_average, write_json_atomic  # noqa: E402

QUESTIONS = ["which movies did [Tom Hanks] star in", "who directed [Inception]"]


def _ask(data: Path, question: str, *extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TALENT_API_KEY", "TALENT_API_URL",
                                                            "TALENT_MODEL_SERVER_IDLE_TIMEOUT")}
    env["TALENT_DATA_DIR"] = str(data)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "talent_core", "ask", question, "--json",
                          *extra], env=env, capture_output=True, text=True, timeout=900,
                         cwd=ROOT)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(out.stderr)
    doc = json.loads(out.stdout)
    return {"question": question, "args": list(extra), "wall_s": round(wall, 2),
            "answers": len(doc["answer"]), "first_answer": doc["answer"][:1]}


def _stop_warm(data: Path) -> None:
    """SIGTERM every warm model process of ``data`` (the next ask starts cold)."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--socket" in cmd and any(str(data).encode() in c for c in cmd):
            os.kill(int(p.name), signal.SIGTERM)
    time.sleep(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/warm_ask.json")
    ap.add_argument("--busy", type=int, default=0, help="CPU-bound processes beside")
    args = ap.parse_args()
    result = json.loads(args.out.read_text()) if args.out.is_file() else {}
    _stop_warm(args.data_dir)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    try:
        time.sleep(3 if busy else 0)
        run = {"busy_processes": args.busy, "load_before": load_average()}
        run["local"] = _ask(args.data_dir, QUESTIONS[0], "--local")
        run["first"] = _ask(args.data_dir, QUESTIONS[0])
        run["second"] = _ask(args.data_dir, QUESTIONS[1])
        run["third"] = _ask(args.data_dir, QUESTIONS[0])
        run["load_after"] = load_average()
    finally:
        for p in busy:
            p.kill()
        _stop_warm(args.data_dir)
    result["busy" if args.busy else "quiet"] = run
    write_json_atomic(args.out, result)
    print(json.dumps(run, indent=1))


if __name__ == "__main__":
    main()
