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
import time
from pathlib import Path


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
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800"):
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"  # Debian's; selenium must not download one
    driver = webdriver.Chrome(options=opts,
                              service=webdriver.ChromeService("/usr/bin/chromedriver"))
    results = []
    try:
        for i, q in enumerate(args.questions, start=1):
            driver.get(args.url)
            wait = WebDriverWait(driver, args.timeout)
            # sidebar: mode "full" (the radio labels are clickable text)
            wait.until(ec.element_to_be_clickable(
                (By.XPATH, "//label[.//p[normalize-space()='full']]"))).click()
            box = wait.until(ec.element_to_be_clickable(
                (By.XPATH, "//input[@aria-label='Question']")))
            box.send_keys(q, Keys.ENTER)
            time.sleep(1)
            driver.find_element(By.XPATH, "//button[.//p[normalize-space()='Ask']]").click()
            t0 = time.time()
            wait.until(ec.presence_of_element_located(
                (By.XPATH, "//h3[contains(., 'Answer')]")))
            seconds = round(time.time() - t0, 1)
            time.sleep(2)  # let the tabs and tables render
            h = driver.find_element(By.XPATH, "//h3[contains(., 'Answer')]")
            answer = h.find_element(By.XPATH, "following::p[1]").text
            shot = args.out / f"answer-{i}.png"
            driver.save_screenshot(str(shot))
            results.append({"question": q, "answer_shown": answer, "seconds": seconds,
                            "screenshot": str(shot)})
            print(json.dumps(results[-1], ensure_ascii=False))
    finally:
        driver.quit()
    (args.out / "answers.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
