"""Bench: `make demo` on a fresh data dir, timed to the first answer in a real browser.

From a checkout whose `make install` is done (a fresh clone after `make test`, say): starts
`make demo PORT=...` with a fresh TALENT_DATA_DIR, waits for the UI to answer HTTP
(`ui_up_s`), then asks the README's first question in headless Chromium
(bench/ui_screenshots.py: the screenshot and the answer text) and records when the answer
was on the page (`first_answer_s`, from `make demo`'s start). `--busy N`: N busy processes
(a spinning Python loop each) beside it.

    python bench/demo_browser.py --repo /tmp/fresh [--busy 2] --out bench/results/demo_browser.json

Timings are measurements, never assertions; the JSON records the machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from benchio import load_average, write_json_atomic

QUESTION = "which movies did Tom Hanks star in"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, required=True, help="a checkout with make install done")
    ap.add_argument("--port", type=int, default=8790)
    ap.add_argument("--busy", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="talent-demo-browser-"))
    env = {**os.environ, "TALENT_DATA_DIR": str(tmp / "data"), "PORT": str(args.port)}
    for k in ("TALENT_API_URL", "TALENT_API_KEY", "VIRTUAL_ENV"):
        env.pop(k, None)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.busy)]
    out: dict = {"repo": str(args.repo), "question": QUESTION, "busy_processes": args.busy,
                 "load_average_before": load_average()}
    log = open(tmp / "demo.log", "wb")
    t0 = time.perf_counter()
    demo = subprocess.Popen(["make", "demo"], cwd=args.repo, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{args.port}"
        while True:
            if demo.poll() is not None:
                raise SystemExit(f"make demo ended ({demo.returncode}): {tmp / 'demo.log'}")
            try:
                urllib.request.urlopen(url, timeout=2).read(1)
                break
            except OSError:
                time.sleep(0.5)
        out["ui_up_s"] = round(time.perf_counter() - t0, 1)
        shots = args.out.with_suffix("")
        r = subprocess.run([sys.executable, str(ROOT / "bench" / "ui_screenshots.py"), "--url",
                            url, "--out", str(shots), QUESTION], capture_output=True,
                           text=True, check=False)  # fmt: skip
        out["first_answer_s"] = round(time.perf_counter() - t0, 1)
        if r.returncode != 0:
            raise SystemExit(f"ui_screenshots failed: {r.stderr[-2000:]}")
        got = json.loads((shots / "answers.json").read_text())
        out["answer"] = got[0]
        out["demo_log"] = (tmp / "demo.log").read_text(errors="replace").splitlines()[-12:]
        fill_log = tmp / "data" / "vectors.log"  # the fill ends by itself: waited for here
        deadline = time.monotonic() + 1800
        while not (fill_log.exists() and "still without an embedding" in fill_log.read_text()):
            if time.monotonic() > deadline:
                raise SystemExit(f"the fill did not end in 30 min: {fill_log}")
            time.sleep(1.0)
        out["vectors_filled_s"] = round(time.perf_counter() - t0, 1)
        out["load_average_after"] = load_average()
    finally:
        for p in spinners:
            p.kill()
        os.killpg(demo.pid, signal.SIGTERM)
        subprocess.run([str(args.repo / ".venv" / "bin" / "talent"), "server", "stop"], env=env,
                       capture_output=True, check=False)  # fmt: skip
        subprocess.run(["pkill", "-f", f"[t]alent_core serve --socket {tmp}"], check=False)
    print(json.dumps(out, indent=2))
    write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
