"""Bench: a new analyst's first minutes with `talent demo` on a fresh data dir (issue 46).

In a fresh data dir (the base model already prepared, as `make install` leaves it):
  * `demo_s`: `talent demo --no-app`: the bundled MetaQA KB loaded graph first, without
    its names' vectors, and `talent vectors` started behind (what `make demo` runs before
    the UI starts);
  * `first_ask_s`: then `talent ask QUESTION` from a fresh shell (it starts the warm model
    process: the models load) while the vectors fill beside it; its answers;
  * `vectors_filled_s`: from the demo's start until the store holds every vector; the
    fill's own report (from its log);
  * `ask_after_fill_s` and its answers (must be the same list);
  * with `--baseline`: `talent load` of the same KB embedding as it goes (`--vectors now`,
    what `talent demo` did before) into another fresh data dir.
`--busy N` runs N busy processes (a spinning Python loop each) beside all of it.

    python bench/demo_start.py [--busy 2] [--baseline] [--out bench/results/demo_start.json]

Timings are measurements, never assertions; the JSON records the machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from benchio import load_average, write_json_atomic

QUESTION = "which movies did Tom Hanks star in"
SPIN = "while True: pass"


def talent(env: dict, *args: str) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "talent_core", *args], capture_output=True,
                       text=True, env=env, cwd=ROOT, check=False)  # fmt: skip
    if r.returncode != 0:
        raise SystemExit(f"talent {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return round(time.perf_counter() - t, 2), r.stdout


def stats(env: dict) -> dict:
    return json.loads(talent(env, "stats", "--json")[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=0, help="busy processes beside the run")
    ap.add_argument("--baseline", action="store_true", help="also a load that embeds as it goes")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "demo_start.json")
    args = ap.parse_args(argv)

    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
    tmp = Path(tempfile.mkdtemp(prefix="talent-demo-"))
    env = {**os.environ, "TALENT_DATA_DIR": str(tmp / "demo"), "TALENT_STORE": "embedded"}
    for k in ("TALENT_API_URL", "TALENT_API_KEY"):
        env.pop(k, None)
    out: dict = {"question": QUESTION, "busy_processes": args.busy,
                 "load_average_before": load_average()}
    try:
        t0 = time.perf_counter()
        out["demo_s"], demo_out = talent(env, "demo", "--no-app")
        out["demo_output"] = demo_out.strip().splitlines()
        s = stats(env)
        out["after_demo"] = {k: s[k] for k in ("entities", "entities_with_embedding", "triples")}
        out["first_ask_s"], first = talent(env, "ask", QUESTION, "--json")
        out["first_ask_since_start_s"] = round(time.perf_counter() - t0, 2)
        first_answer = json.loads(first)["answer"]
        out["first_ask_answers"] = len(first_answer)
        out["first_ask_timings_ms"] = {k: round(v) for k, v in
                                       json.loads(first).get("timings_ms", {}).items()}
        s = stats(env)
        out["vectors_when_first_answered"] = s["entities_with_embedding"]
        log = tmp / "demo" / "vectors.log"
        deadline = time.monotonic() + 1800
        while "still without an embedding" not in log.read_text():  # the fill's last line
            if time.monotonic() > deadline:
                raise SystemExit(f"the fill did not end in 30 min: {log}")
            time.sleep(1.0)  # a file read: the poll adds no load of its own
        out["vectors_filled_s"] = round(time.perf_counter() - t0, 2)
        s = stats(env)
        out["vectors_after_fill"] = s["entities_with_embedding"]
        out["fill_log_tail"] = log.read_text().strip().splitlines()[-1:]
        out["ask_after_fill_s"], after = talent(env, "ask", QUESTION, "--json")
        out["same_answers_after_fill"] = json.loads(after)["answer"] == first_answer
        out["ask_after_fill_timings_ms"] = {k: round(v) for k, v in
                                            json.loads(after).get("timings_ms", {}).items()}
        if args.baseline:
            env2 = {**env, "TALENT_DATA_DIR": str(tmp / "baseline")}
            kb = ROOT / "talent_core" / "demo" / "metaqa" / "kb.txt.gz"
            out["baseline_load_vectors_now_s"], _ = talent(env2, "load", str(kb), "--format",
                                                           "metaqa", "--no-progress")
        out["load_average_after"] = load_average()
    finally:
        for p in spinners:
            p.kill()
        for d in ("demo", "baseline"):
            if (tmp / d).exists():
                subprocess.run([sys.executable, "-m", "talent_core", "server", "stop"],
                               env={**env, "TALENT_DATA_DIR": str(tmp / d)}, cwd=ROOT,
                               capture_output=True, check=False)  # fmt: skip
        subprocess.run(["pkill", "-f", f"talent_core serve --socket {tmp}"], check=False)
    print(json.dumps(out, indent=2))
    write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
