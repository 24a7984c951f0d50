"""The newcomer's walk in the real UI (issue 28): headless Chromium asks the README's
questions on Ask as it opens (no setting touched; a follow-up after the first), runs
Evaluate's default, then opens an entity on Explore and double-clicks two of its neighbours,
saving a screenshot of each step (the page, and the graph in view) and what the page says.

    talent app --port 8531 &    # the bundled MetaQA store, the shipped models
    python bench/ui_walk.py --url http://127.0.0.1:8531 --out bench/results/ui/walk

Needs Debian's chromium + chromium-driver and `pip install selenium`. Writes OUT/*.png and
OUT/walk.json: per step the answer line, the notices, the evidence lines, the graph's node
roles and legend, the rendered label size, the seconds from the click to the page settled,
and the load average (`uptime`) before and after.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

QUESTIONS = [  # README's first questions: a list, a typo, an absent entity, two hops
    ("1-list", "which movies did Tom Hanks star in"),
    ("1-follow-up", "who directed them?"),
    ("2-typo", "who directed Incepton"),
    ("3-absent", "who directed Oppenheimer"),
    ("4-two-hops", "who directed the films starred by [Tom Hanks]"),
]
EXPLORE = ("Inception", ["Christopher Nolan", "Leonardo DiCaprio"])  # opened, then expanded
MAIN = '[data-testid="stMain"]'
FRAME = 'iframe[title*="talent_graph"]'
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"]'
# in the graph's frame: what is drawn, and how large a node label renders (font x zoom)
GRAPH_JS = """
const cy = document.getElementById('cy')?._cyreg?.cy; if (!cy) return null;
const n = cy.nodes(), roles = {};
n.forEach(x => { const r = x.data('role'); roles[r] = (roles[r] || 0) + 1; });
const f = n.length ? parseFloat(n[0].style('font-size')) : 0;
return {nodes: n.length, edges: cy.edges().length, roles: roles, zoom: cy.zoom(),
        label_px: f * cy.zoom(),
        evidence_edges: cy.edges().filter(e => e.data('group') === 'EVIDENCE').length,
        width: cy.width(), height: cy.height()};
"""


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages, as `uptime` shows them."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def answer_lines(d) -> list[str]:
    """The bold answer lines: "Answer: X" or "M answers: A | B …"."""
    return [el.text for el in d.find_elements(
        "css selector", f'{MAIN} [data-testid="stMarkdown"] p')
        if el.find_elements("css selector", "strong")
        and re.match(r"(Answer:|\d+ answers:)", el.text)]


def busy(d) -> bool:
    return bool(d.find_elements("css selector", '[data-testid="stStatusWidget"]'))


def main_text(d) -> str:
    return d.find_element("css selector", MAIN).text


def wait(d, cond, timeout: float, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(d, timeout, poll_frequency=0.3).until(cond, message=what)


def settle(d, timeout: float) -> None:
    time.sleep(0.8)
    wait(d, lambda d: not busy(d), timeout, "the app stays busy")


def press(d, css: str) -> None:
    el = wait(d, lambda d: d.find_elements("css selector", css), 120, f"no {css}")[0]
    d.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
    time.sleep(0.3)
    el.click()


def graph_info(d) -> dict[str, Any] | None:
    frames = d.find_elements("css selector", FRAME)
    if not frames:
        return None
    d.switch_to.frame(frames[0])
    try:
        return d.execute_script(GRAPH_JS)
    finally:
        d.switch_to.default_content()


def ask(d, out: Path, name: str, question: str, timeout: float) -> dict[str, Any]:
    from selenium.webdriver.common.keys import Keys

    box = wait(d, lambda d: d.find_elements("css selector", ".st-key-question input"), 120,
               "no question box")[0]
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(question, Keys.ENTER)
    settle(d, 120)
    before = load()

    def heads(d) -> list[str]:
        return [h.text for h in d.find_elements("css selector", f"{MAIN} h3")]

    shown_before = heads(d)
    t0 = time.monotonic()
    press(d, ".st-key-ask button")

    def done(d) -> bool:
        # a new heading (the question as read: brackets dropped, a typo read as the KG's
        # name) or an error line
        return not busy(d) and (heads(d) != shown_before
                                or bool(d.find_elements("css selector", ERRORS)))

    wait(d, done, timeout, f"no answer to {question!r}")
    seconds = round(time.monotonic() - t0, 1)
    time.sleep(2)  # the graph's layout
    text = main_text(d)
    notices = [el.text for el in d.find_elements("css selector",
                                                 '[data-testid="stAlertContainer"]')]
    evidence = [ln for ln in text.splitlines()  # "X: Seed —rel→ X" (or ←rel—)
                if ": " in ln and re.search(r"—\S+→|←\S+—", ln)]
    wall = re.search(r"wall ([\d.]+) s", text)
    d.execute_script("window.scrollTo(0, 0)")
    time.sleep(0.5)
    d.save_screenshot(str(out / f"{name}.png"))
    shots = [str(out / f"{name}.png")]
    try:  # the graph's frame renders after the page's main block
        wait(d, lambda d: d.find_elements("css selector", FRAME), 20, "no graph")
    except Exception:
        pass
    if d.find_elements("css selector", FRAME):
        for _ in range(2):  # again once the frame has its final height
            d.execute_script("arguments[0].scrollIntoView({block: 'center'})",
                             d.find_element("css selector", FRAME))
            time.sleep(1.5)
        d.save_screenshot(str(out / f"{name}-graph.png"))
        shots.append(str(out / f"{name}-graph.png"))
    legend = d.find_elements("css selector", '[data-testid="talent-legend"]')
    return {"step": name, "question": question, "answers": answer_lines(d),
            "notices": notices, "evidence": evidence[:8],
            "errors": [e.text for e in d.find_elements("css selector", ERRORS)],
            "seconds": seconds, "ask_wall_s": float(wall.group(1)) if wall else None,
            "graph": graph_info(d), "legend": legend[0].text if legend else None,
            "load_before": before, "load_after": load(), "screenshots": shots}


def evaluate(d, url: str, out: Path, timeout: float) -> dict[str, Any]:
    d.get(url + "/evaluate")
    wait(d, lambda d: d.find_elements("css selector", ".st-key-eval_run button"), 120,
         "no Evaluate page")
    settle(d, 120)
    before = load()
    t0 = time.monotonic()
    press(d, ".st-key-eval_run button")
    wait(d, lambda d: not busy(d) and ("rows (" in main_text(d)
                                       or d.find_elements("css selector", ERRORS)),
         timeout, "Evaluate's default did not finish")
    seconds = round(time.monotonic() - t0, 1)
    time.sleep(2)
    result = next((ln for ln in main_text(d).splitlines() if "rows (" in ln), None)
    d.save_screenshot(str(out / "5-evaluate.png"))
    d.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    time.sleep(1)
    d.save_screenshot(str(out / "5-evaluate-report.png"))
    return {"step": "5-evaluate", "result": result,
            "errors": [e.text for e in d.find_elements("css selector", ERRORS)],
            "seconds": seconds, "load_before": before, "load_after": load(),
            "screenshots": [str(out / "5-evaluate.png"), str(out / "5-evaluate-report.png")]}


def double_click(d, name: str) -> None:
    """A real double-click on the node drawn as ``name`` (centred and zoomed first)."""
    from selenium.webdriver.common.action_chains import ActionChains

    frame = d.find_element("css selector", FRAME)
    d.execute_script("arguments[0].scrollIntoView({block: 'center'})", frame)
    d.switch_to.frame(frame)
    try:
        at = d.execute_script(
            "const cy = document.getElementById('cy')._cyreg.cy;"
            "const n = cy.nodes().filter(n => n.data('name') === arguments[0]);"
            "if (n.length !== 1) return null; cy.zoom(1.2); cy.center(n);"
            "const p = n.renderedPosition(); return [p.x - cy.width() / 2,"
            " p.y - cy.height() / 2];", name)
        if at is None:
            raise RuntimeError(f"no node {name!r} in the graph")
        time.sleep(0.4)
        ActionChains(d).move_to_element_with_offset(
            d.find_element("id", "cy"), round(at[0]), round(at[1])).double_click().perform()
    finally:
        d.switch_to.default_content()


def explore(d, url: str, out: Path, entity: str, clicks: list[str]) -> dict[str, Any]:
    """Explore ``entity``, then double-click each of ``clicks``: the graph after each."""
    from selenium.webdriver.common.keys import Keys

    d.get(url + "/explore")
    box = wait(d, lambda d: d.find_elements("css selector", ".st-key-explore_query input"),
               120, "no Explore page")[0]
    settle(d, 120)
    box.send_keys(entity, Keys.ENTER)
    wait(d, lambda d: (graph_info(d) or {}).get("nodes", 0) > 1, 120, "no neighbourhood")
    graphs, shots = [], []
    for k in range(len(clicks) + 1):
        time.sleep(2)
        graphs.append(graph_info(d))
        name = "6-explore" + (f"-expanded-{k}" if k else "")
        d.execute_script("arguments[0].scrollIntoView({block: 'center'})",
                         d.find_element("css selector", FRAME))
        time.sleep(1)
        d.save_screenshot(str(out / f"{name}.png"))
        shots.append(str(out / f"{name}.png"))
        if k < len(clicks):
            before = graphs[-1]["nodes"]
            double_click(d, clicks[k])
            wait(d, lambda d, n=before: not busy(d) and (graph_info(d) or {}).get("nodes", 0) > n,
                 120, f"the double-click on {clicks[k]!r} added no node")
    return {"step": "6-explore", "entity": entity, "expanded": clicks,
            "graphs": graphs, "errors": [e.text for e in d.find_elements("css selector",
                                                                           ERRORS)],
            "screenshots": shots}


def main() -> int:
    from selenium import webdriver

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8501")
    ap.add_argument("--out", type=Path, default=Path("bench/results/ui/walk"))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--window", default="1440,1000", help="the browser window, w,h")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={args.window}"):
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"  # Debian's; selenium must not download one
    d = webdriver.Chrome(options=opts,
                         service=webdriver.ChromeService("/usr/bin/chromedriver"))
    steps: list[dict[str, Any]] = []
    mode: list[str] = []
    try:
        d.get(args.url)
        wait(d, lambda d: d.find_elements("css selector", ".st-key-question input"), 300,
             "no Ask page")
        settle(d, 300)
        mode = [el.text.strip() for el in d.find_elements(
            "xpath", '//div[contains(@class,"st-key-mode")]//label[.//input[@checked]]')]
        for name, q in QUESTIONS:
            steps.append(ask(d, args.out, name, q, args.timeout))
            print(json.dumps(steps[-1], ensure_ascii=False), flush=True)
        steps.append(evaluate(d, args.url, args.out, args.timeout))
        print(json.dumps(steps[-1], ensure_ascii=False), flush=True)
        steps.append(explore(d, args.url, args.out, *EXPLORE))
        print(json.dumps(steps[-1], ensure_ascii=False), flush=True)
    except Exception:
        d.save_screenshot(str(args.out / "failure.png"))
        raise
    finally:
        d.quit()
        (args.out / "walk.json").write_text(json.dumps(
            {"url": args.url, "window": args.window,
             "default_mode": mode[0] if mode else None,
             "steps": steps}, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
