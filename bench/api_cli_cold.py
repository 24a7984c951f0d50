"""What the HTTP API saves per question: the wall time of one `talent ask` process (store
opened, models loaded, one answer, exit), for the questions bench/api_latency.py streams
over a running `talent serve` (issue 32). With --with-server, a `talent serve` process
is up on the same store meanwhile (both processes share it; the CLI does not use the
server yet), and one streamed ask over HTTP is timed right after each CLI answer.

    python bench/api_cli_cold.py --data-dir .talent/b/metaqa --questions .talent/exp2/test.txt \
        -n 3 --out bench/results/api_cli_cold.json
    python bench/api_cli_cold.py --data-dir .talent/b/metaqa --questions .talent/exp2/test.txt \
        -n 2 --with-server --out bench/results/api_cli_with_server.json
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from api_latency import questions, served, streamed_ask
from benchio import load_average, write_json_atomic


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--with-server", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    env = {**os.environ, "TALENT_DATA_DIR": str(args.data_dir.resolve())}
    before = load_average()
    runs = []
    with contextlib.ExitStack() as stack:
        base = key = None
        if args.with_server:
            base, key, _ = stack.enter_context(served(args.data_dir.resolve(),
                                                      "bench-api-cli"))
        for q in questions(args.questions, args.n + 1)[1:]:  # api_latency's timed questions
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "talent_core", "ask", q, "--json"], env=env,
                           cwd=ROOT, check=True, capture_output=True)
            runs.append({"question": q, "wall_s": round(time.perf_counter() - t0, 2)})
            if base is not None:
                runs[-1]["api_streamed_whole_s"] = streamed_ask(base, key, q)["end"]
            print(f"{runs[-1]}", file=sys.stderr)
    walls = [r["wall_s"] for r in runs]
    write_json_atomic(args.out, {
        "what": "wall time of one `talent ask QUESTION --json` process per question (the "
                "process opens the store and loads the models itself)"
                + ("; a `talent serve --preload` process up on the same store meanwhile, "
                   "api_streamed_whole_s: the same question streamed over HTTP right after"
                   if args.with_server else "; no server"),
        "command": "python bench/api_cli_cold.py --data-dir .talent/b/metaqa --questions "
                   f".talent/exp2/test.txt -n {args.n}"
                   + (" --with-server" if args.with_server else "") + f" --out {args.out}",
        "n": len(runs), "wall_s_median": round(statistics.median(walls), 2),
        "per_question": runs, "load_before": before, "load_after": load_average(),
    })


if __name__ == "__main__":
    main()
