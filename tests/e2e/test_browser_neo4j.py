"""The UI's four pages on a Neo4j store, in a real browser (issue 30).

`streamlit run app/main.py` with TALENT_STORE=neo4j on the server of NEO4J_URI (`make
neo4j-up`; the tests read .talent/neo4j.env), holding the toy MetaQA KG (the demo KB's
films around the README's questions, real MiniLM vectors); the shipped models answer.
Ask (full mode: an answer and its graph), Explore (a name's neighbourhood), Load (the same
file again: nothing new, the counts unchanged) and Evaluate (a three-question report), each
page with no error box and the server log without warnings. Screenshots go to
$TALENT_BROWSER_ARTIFACTS/neo4j (default build/browser-test/neo4j; the bench's copies are in
bench/results/ui/neo4j/).

Like the contract suite's Neo4j tests it clears that database (Community has one user
database). Skips without NEO4J_URI, chromium, chromedriver or selenium, unless
TALENT_REQUIRE_NEO4J / TALENT_REQUIRE_BROWSER (.ci/run) make that a failure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_browser import (
    CHROMIUM,
    DRIVER,
    FIXTURES,
    HAVE_SELENIUM,
    REPO,
    _answer_lines,
    _choose,
    _click,
    _click_until,
    _el,
    _idle,
    _in_graph,
    _log_clean,
    _open,
    _serve,
    _text,
    _type,
    _wait,
    driver,  # noqa: F401  (the module-scoped selenium fixture)
)

ARTIFACTS = Path(os.environ.get("TALENT_BROWSER_ARTIFACTS", REPO / "build" / "browser-test"))
SHOTS = ARTIFACTS / "neo4j"
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"]'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.neo4j,
    pytest.mark.skipif(
        not (CHROMIUM and DRIVER and HAVE_SELENIUM)
        and not os.environ.get("TALENT_REQUIRE_BROWSER"),
        reason="needs chromium, chromedriver and selenium",
    ),  # fmt: skip
]


@pytest.fixture(scope="module")
def neo4j_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """TALENT_* / NEO4J_* of the Neo4j store, cleared and loaded with the toy MetaQA KG."""
    if not os.environ.get("NEO4J_URI"):
        if os.environ.get("TALENT_REQUIRE_NEO4J"):
            pytest.fail("TALENT_REQUIRE_NEO4J is set but NEO4J_URI is not (`make neo4j-up`)")
        pytest.skip("NEO4J_URI not set: run `make neo4j-up`")
    from talent_core.config import Settings
    from talent_core.loaders.api import load_path
    from talent_core.store.neo4j import Neo4jStore

    data = tmp_path_factory.mktemp("e2e-neo4j")
    settings = Settings(store="neo4j", data_dir=data, _env_file=None)
    store = Neo4jStore.from_settings(settings)
    try:
        store.clear()
        load_path(FIXTURES / "metaqa" / "kb.txt", "metaqa", store=store, settings=settings,
                  progress=False)  # fmt: skip
    finally:
        store.close()
    env = {"TALENT_DATA_DIR": str(data), "TALENT_STORE": "neo4j",
           **{k: v for k, v in os.environ.items() if k.startswith("NEO4J_")}}  # fmt: skip
    yield env
    store = Neo4jStore.from_settings(settings)
    store.clear()
    store.close()


@pytest.fixture(scope="module")
def neo4j_server(neo4j_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[str, Path]]:  # fmt: skip
    tmp = tmp_path_factory.mktemp("browser-neo4j")
    env = {**os.environ, **neo4j_env, "PYTHONWARNINGS": "default",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}  # fmt: skip
    with _serve(REPO / "app" / "main.py", env, tmp) as served:
        yield served


def _shot(d, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(SHOTS / f"{name}.png"))


def _no_error(d) -> None:
    errors = d.find_elements("css selector", ERRORS)
    assert not errors, [e.text for e in errors]


def _on_neo4j(d) -> None:
    """The sidebar's store caption names the Neo4j store (store_caption)."""
    _wait(
        d,
        lambda d: (
            "store: neo4j" in d.find_element("css selector", '[data-testid="stSidebar"]').text
        ),
        60,
        "the page is not on Neo4j",
    )


def _nodes(d) -> int:
    return _in_graph(d, "return cy.nodes().length;") or 0


def test_four_pages_on_neo4j(neo4j_server, driver):  # noqa: F811
    url, log = neo4j_server
    try:
        _walk(url, driver)
    except Exception:
        _shot(driver, "failure")
        (SHOTS / "failure.html").write_text(driver.page_source)
        raise
    _log_clean(log)


def _walk(url: str, d) -> None:
    # --- Ask (full mode, as it opens): the answer and the graph, from Neo4j
    _open(d, url + "/")
    _on_neo4j(d)
    _type(d, "question", "who directed [Gravity]")
    _click(d, "ask")
    _wait(d, lambda d: _answer_lines(d), 300, "no answer")
    assert any("Alfonso Cuarón" in line for line in _answer_lines(d)), _answer_lines(d)
    _wait(d, lambda d: _nodes(d) > 1, 60, "the graph did not render")
    _no_error(d)
    time.sleep(1.5)  # the layout's animation
    _shot(d, "1-ask")

    # --- Explore: a name's neighbourhood
    _open(d, url + "/explore")
    _on_neo4j(d)
    _type(d, "explore_query", "Gravity")
    _wait(d, lambda d: _nodes(d) > 1, 90, "Explore drew no graph")
    _no_error(d)
    time.sleep(1.5)
    _shot(d, "2-explore")

    # --- Load: the same file again into Neo4j (idempotent: no new triple)
    _open(d, url + "/load")
    _on_neo4j(d)
    _el(d, '.st-key-upload input[type="file"]').send_keys(str(FIXTURES / "metaqa" / "kb.txt"))
    _idle(d)
    _click_until(d, "load", lambda d: "Loaded: kb.txt" in _text(d), 300, "no load result")
    _no_error(d)
    _shot(d, "3-load")

    # --- Evaluate: three questions of a file, on the Neo4j store
    _open(d, url + "/evaluate")
    _on_neo4j(d)
    _choose(d, "eval_src", "upload a question file")
    _el(d, '.st-key-eval_upload input[type="file"]').send_keys(
        str(FIXTURES / "metaqa" / "qa_1hop.txt"))  # fmt: skip
    _idle(d)
    _type(d, "eval_limit", "3")
    _click(d, "eval_run")
    _wait(d, lambda d: "rows (" in _text(d) or d.find_elements("css selector", ERRORS), 600,
          "Evaluate did not finish")  # fmt: skip
    _no_error(d)
    d.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    time.sleep(1)
    _shot(d, "4-evaluate")
