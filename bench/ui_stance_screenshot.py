"""The Ask page's Stance task in the real UI (headless Chromium + selenium): type two
arguments and a graph, press Decide stance, save a screenshot and the text shown.

    talent app --port 8532 &
    python bench/ui_stance_screenshot.py --url http://127.0.0.1:8532 \
        --out bench/results/ui/explagraphs_stance.png

Needs Debian's chromium + chromium-driver and selenium (as bench/ui_screenshots.py).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ARG1 = "Cannabis should be legal."
ARG2 = "It's not a bad thing to make marijuana more available."
GRAPH = ("(cannabis; synonym of; marijuana)(legal; causes; more available)"
         "(marijuana; capable of; good thing)(good thing; desires; legal)")


def main() -> int:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8532")
    ap.add_argument("--out", type=Path, default=Path("bench/results/ui/explagraphs_stance.png"))
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1500"):
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(options=opts,
                              service=webdriver.ChromeService("/usr/bin/chromedriver"))
    main_area = (By.CSS_SELECTOR, '[data-testid="stMain"]')
    try:
        driver.get(args.url)
        wait = WebDriverWait(driver, args.timeout)
        wait.until(ec.element_to_be_clickable(
            (By.XPATH, '//div[contains(@class,"st-key-task")]//label'
                       '[.//p[normalize-space(.)="Stance (ExplaGraphs)"]]'))).click()
        for key, text in (("stance_arg1", ARG1), ("stance_arg2", ARG2),
                          ("stance_graph", GRAPH)):
            box = wait.until(ec.element_to_be_clickable(
                (By.CSS_SELECTOR, f".st-key-{key} textarea")))
            box.send_keys(text, Keys.TAB)  # leaving the box commits its text
            time.sleep(1)
        driver.find_element(By.CSS_SELECTOR, ".st-key-stance_ask button").click()
        t0 = time.time()
        wait.until(lambda d: "Stance:" in d.find_element(*main_area).text)
        seconds = round(time.time() - t0, 1)
        # the scores table is a canvas grid: drawn a moment after the text arrives
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"] '
                                                              'canvas'))
        time.sleep(4)
        text = driver.find_element(*main_area).text
        driver.save_screenshot(str(args.out))
        shown = [ln for ln in text.splitlines()
                 if ln.startswith(("Stance:", "Graph:", "Evidence nodes:", "No ExplaGraphs"))
                 or "frozen" in ln]
        result = {"arg1": ARG1, "arg2": ARG2, "graph": GRAPH, "shown": shown,
                  "seconds": seconds, "screenshot": str(args.out)}
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result))
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
