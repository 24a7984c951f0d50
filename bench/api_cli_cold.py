"""What the HTTP API saves per question: the wall time of one `talent ask` process (store
opened, models loaded, one answer, exit), for the questions bench/api_latency.py streams
over a running `talent serve` (issue 32). With --with-server, a `talent serve --preload`
process is up on the same store meanwhile: per question, `talent ask Q --json` with the
read key in TALENT_API_KEY (it finds the server by the discovery file of the data dir and
asks it: no model load) and then `talent ask Q --json --local` (in-process, cold), their
documents compared (all but the timings).

    python bench/api_cli_cold.py --data-dir .talent/b/metaqa --questions .talent/exp2/test.txt \
        -n 3 --out bench/results/api_cli_cold.json
    python bench/api_cli_cold.py --data-dir /tmp/apiload --questions .talent/exp2/test.txt \
        -n 3 --with-server --out bench/results/api_cli_with_server.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from api_latency import questions, served
from benchio import load_average, write_json_atomic


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--with-server", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("TALENT_API_KEY", "TALENT_API_URL")}
    env["TALENT_DATA_DIR"] = str(args.data_dir.resolve())
    # the cold in-process ask this bench measures: no warm model process (bench/warm_ask.py)
    env["TALENT_MODEL_SERVER_IDLE_TIMEOUT"] = "0"
    before = load_average()
    runs = []

    def talent_ask(q: str, *extra: str, key: str | None = None) -> tuple[float, dict, str]:
        run_env = {**env, **({"TALENT_API_KEY": key} if key else {})}
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "talent_core", "ask", q, "--json", "-v",
                              *extra], env=run_env, cwd=ROOT, check=True, capture_output=True,
                             text=True)
        return round(time.perf_counter() - t0, 2), json.loads(out.stdout), out.stderr

    with contextlib.ExitStack() as stack:
        key = None
        if args.with_server:
            _base, key, _ = stack.enter_context(served(args.data_dir.resolve(),
                                                       "bench-api-cli"))
        for q in questions(args.questions, args.n + 1)[1:]:  # api_latency's timed questions
            row: dict = {"question": q}
            if key is not None:
                wall, doc, err = talent_ask(q, key=key)
                if "answered by talent serve" not in err:
                    raise SystemExit(f"talent ask did not use the server:\n{err}")
                row["via_server_wall_s"] = wall
                wall_l, doc_l, _ = talent_ask(q, "--local")
                row["local_wall_s"] = wall_l
                row["same_document"] = ({k: v for k, v in doc.items() if k != "timings_ms"}
                                        == {k: v for k, v in doc_l.items()
                                            if k != "timings_ms"})
            else:
                row["local_wall_s"] = talent_ask(q, "--local")[0]
            runs.append(row)
            print(f"{row}", file=sys.stderr)
    local = [r["local_wall_s"] for r in runs]
    served_walls = [r["via_server_wall_s"] for r in runs if "via_server_wall_s" in r]
    write_json_atomic(args.out, {
        "what": "wall time of one `talent ask QUESTION --json` process per question: "
                "local_wall_s in-process (`--local`: the process opens the store and loads "
                "the models itself)"
                + ("; via_server_wall_s: the same command with TALENT_API_KEY while a `talent "
                   "serve --preload` process is up on the data dir (found by its discovery "
                   "file; it answers, the CLI loads no model), run first; same_document: "
                   "both --json documents equal but for timings_ms"
                   if args.with_server else "; no server"),
        "command": f"python bench/api_cli_cold.py --data-dir {args.data_dir} --questions "
                   f"{args.questions} -n {args.n}"
                   + (" --with-server" if args.with_server else "") + f" --out {args.out}",
        "n": len(runs), "local_wall_s_median": round(statistics.median(local), 2),
        **({"via_server_wall_s_median": round(statistics.median(served_walls), 2)}
           if served_walls else {}),
        "per_question": runs, "load_before": before, "load_after": load_average(),
    })


if __name__ == "__main__":
    main()
