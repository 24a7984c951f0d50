"""Ask questions in the real UI (headless Chromium + selenium) and save a screenshot of each
answer, with the answer text read from the page.

    python bench/ui_screenshots.py --url http://127.0.0.1:8501 --out bench/results/ui \
        "what year was the movie [Repo Men] released" ...

Needs Debian's chromium + chromium-driver and `pip install selenium`; the app must be running
(`talent app` / `make demo`). Writes OUT/answer-N.png and OUT/answers.json.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

# one answer, a set of them, or an operator's typed answer (app/views/operation.py)
ANSWER = re.compile(r"^(Answer|\d+ answers|Count|Filter|Superlative|Comparison|Yes / no):",
                    re.M)


def main() -> int:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("questions", nargs="+")
    ap.add_argument("--url", default="http://127.0.0.1:8501")
    ap.add_argument("--out", type=Path, default=Path("bench/results/ui"))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--conversation", action="store_true",
                    help="ask the questions one after another in one session (follow-ups "
                    "refer to the answers before them); default: a fresh page each")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800"):
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"  # Debian's; selenium must not download one
    driver = webdriver.Chrome(options=opts,
                              service=webdriver.ChromeService("/usr/bin/chromedriver"))
    main = (By.CSS_SELECTOR, '[data-testid="stMain"]')
    results = []
    try:
        for i, q in enumerate(args.questions, start=1):
            wait = WebDriverWait(driver, args.timeout)
            if i == 1 or not args.conversation:
                driver.get(args.url)  # the default mode, full: the answer with its evidence
            box = wait.until(ec.element_to_be_clickable(
                (By.CSS_SELECTOR, ".st-key-question input")))
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(q, Keys.ENTER)
            time.sleep(1)
            driver.find_element(By.CSS_SELECTOR, ".st-key-ask button").click()
            t0 = time.time()

            def heading(lines: list[str], q: str = q) -> str | None:
                """The question's heading: as typed, or as a "what about X?" follow-up
                was asked ("Reading 'what about X?' as 'who directed X' ...")."""
                if q in lines:
                    return q
                said = next((x for x in lines if x.startswith(f"Reading '{q}' as '")), None)
                asked = said.split(" as '", 1)[1].split("' (", 1)[0] if said else None
                return asked if asked in lines else None

            def answered(d, m=main) -> bool:
                lines = d.find_element(*m).text.splitlines()
                h = heading(lines)
                return h is not None and any(ANSWER.match(x) for x in lines[lines.index(h):])

            wait.until(answered)
            q = heading(driver.find_element(*main).text.splitlines()) or q
            seconds = round(time.time() - t0, 1)
            time.sleep(2)  # let the tabs, tables and the graph render
            lines = driver.find_element(*main).text.splitlines()
            line = next(x for x in lines[lines.index(q):] if ANSWER.match(x))
            reading = next((x for x in lines if x.startswith("Reading '")), None)
            answer = ANSWER.sub("", line, count=1).strip()
            plan = next((x.removeprefix("Planned relation paths:").strip()
                         for x in driver.find_element(*main).text.splitlines()
                         if x.startswith("Planned relation paths:")), None)
            shot = args.out / f"answer-{i}.png"
            driver.save_screenshot(str(shot))
            results.append({"question": q, "answer_shown": answer, "plan_shown": plan,
                            "reading_shown": reading,
                            "seconds": seconds, "screenshot": str(shot)})
            print(json.dumps(results[-1], ensure_ascii=False))
    finally:
        driver.quit()
    (args.out / "answers.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
