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
`--browser REPO`: instead, `make demo PORT=...` in REPO (a checkout whose `make install` is
done: a fresh clone after `make test`) with a fresh data dir, timed to the UI answering HTTP
(`ui_up_s`) and to the README's first question answered in headless Chromium
(bench/ui_screenshots.py: its screenshot and answer text; `first_answer_s` from the start).

    python bench/demo_start.py [--busy 2] [--baseline] [--out bench/results/demo_start.json]
    python bench/demo_start.py --browser /tmp/fresh [--busy 2] --out bench/results/demo_browser.json

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

from benchio import busy_processes, load_average, wait_for_fill, write_json_atomic

from talent_core.api.process import wait_up

QUESTION = "which movies did Tom Hanks star in"


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
    ap.add_argument("--browser", type=Path, metavar="REPO", help="make demo in REPO, in a browser")
    ap.add_argument("--port", type=int, default=8790, help="--browser: the UI's port")
    args = ap.parse_args(argv)

    with busy_processes(args.busy):
        out = browser(args) if args.browser else run(args)
    print(json.dumps(out, indent=2))
    write_json_atomic(args.out, out)
    return 0


def serves(url: str) -> bool:
    """Whether something answers HTTP at ``url`` (the UI's page)."""
    try:
        urllib.request.urlopen(url, timeout=2).read(1)
        return True
    except OSError:
        return False


def browser(args) -> dict:
    """`make demo` in ``args.browser`` timed to the first answer in a real browser."""
    repo: Path = args.browser
    tmp = Path(tempfile.mkdtemp(prefix="talent-demo-browser-"))
    env = {**os.environ, "TALENT_DATA_DIR": str(tmp / "data"), "PORT": str(args.port)}
    for k in ("TALENT_API_URL", "TALENT_API_KEY", "VIRTUAL_ENV"):
        env.pop(k, None)
    out: dict = {"repo": str(repo), "question": QUESTION, "busy_processes": args.busy,
                 "load_average_before": load_average()}
    log = open(tmp / "demo.log", "wb")
    t0 = time.perf_counter()
    demo = subprocess.Popen(["make", "demo"], cwd=repo, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{args.port}"
        if not wait_up(demo, lambda: serves(url), timeout=3600, interval=0.5):
            raise SystemExit(f"make demo ended ({demo.poll()}) or served nothing in an hour: "
                             f"{tmp / 'demo.log'}")
        out["ui_up_s"] = round(time.perf_counter() - t0, 1)
        shots = args.out.with_suffix("")
        r = subprocess.run([sys.executable, str(ROOT / "bench" / "ui_screenshots.py"), "--url",
                            url, "--out", str(shots), QUESTION], capture_output=True,
                           text=True, check=False)  # fmt: skip
        out["first_answer_s"] = round(time.perf_counter() - t0, 1)
        if r.returncode != 0:
            raise SystemExit(f"ui_screenshots failed: {r.stderr[-2000:]}")
        out["answer"] = json.loads((shots / "answers.json").read_text())[0]
        out["demo_log"] = (tmp / "demo.log").read_text(errors="replace").splitlines()[-12:]
        wait_for_fill(tmp / "data" / "vectors.log")  # it ends by itself: waited for here
        out["vectors_filled_s"] = round(time.perf_counter() - t0, 1)
        out["load_average_after"] = load_average()
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        subprocess.run([str(repo / ".venv" / "bin" / "talent"), "server", "stop"], env=env,
                       capture_output=True, check=False)  # fmt: skip
        subprocess.run(["pkill", "-f", f"[t]alent_core serve --socket {tmp}"], check=False)
    return out


def run(args) -> dict:
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
        wait_for_fill(log)
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
        for d in ("demo", "baseline"):
            if (tmp / d).exists():
                subprocess.run([sys.executable, "-m", "talent_core", "server", "stop"],
                               env={**env, "TALENT_DATA_DIR": str(tmp / d)}, cwd=ROOT,
                               capture_output=True, check=False)  # fmt: skip
        subprocess.run(["pkill", "-f", f"[t]alent_core serve --socket {tmp}"], check=False)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
