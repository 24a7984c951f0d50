"""The Ask page's Stance task, headless (AppTest) on the toy KG with the tiny model: a given
graph, a graph from the KG, no graph (said), a bad graph (one line), KG text kept plain."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


@pytest.fixture
def stance_page(use_toy, tmp_path, monkeypatch):
    from tiny_llm import tiny_llama

    from talent_core.config import get_settings

    monkeypatch.setenv("TALENT_BASE_MODEL", str(tiny_llama(tmp_path / "tiny")))
    get_settings.cache_clear()
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.radio(key="task").set_value("Stance (ExplaGraphs)")
    at.run()
    assert not at.exception, at.exception
    return at


def decide(at: AppTest, arg1: str, arg2: str, graph: str = "", use_kg: bool = True) -> None:
    at.text_area(key="stance_arg1").input(arg1)
    at.text_area(key="stance_arg2").input(arg2)
    at.text_area(key="stance_graph").input(graph)
    at.checkbox(key="stance_use_kg").set_value(use_kg)
    at.button(key="stance_ask").click()
    at.run()
    assert not at.exception, at.exception


def texts(elements) -> list[str]:
    return [e.value for e in elements]


def test_stance_with_graph_then_kg_then_none(stance_page):
    at = stance_page
    assert "question" not in [w.key for w in at.text_input]
    decide(at, "Cannabis should be legal.", "Marijuana is harmless **really**.",
           "(cannabis; synonym of; marijuana)(marijuana; is a; <b>harmless</b>)")
    md = " ".join(texts(at.markdown))
    assert "**Stance:** **support**" in md or "**Stance:** **counter**" in md
    assert "Graph\\: the given graph \\(3 nodes\\)" in md
    assert any("frozen base model" in w for w in texts(at.warning))
    labels = set(at.dataframe[0].value["label"])
    assert labels == {"support", "counter"}
    # the default stance mode (no retriever): the whole graph is the evidence
    assert at.checkbox(key="stance_full").value is False
    assert any("whole graph was the evidence" in c for c in texts(at.caption))
    assert any(r"frozen base model \(generator\)" in c for c in texts(at.caption))
    at.checkbox(key="stance_full").set_value(True)  # the label retriever selects first
    decide(at, "Cannabis should be legal.", "Marijuana is harmless **really**.",
           "(cannabis; synonym of; marijuana)(marijuana; is a; <b>harmless</b>)")
    assert any(r"frozen base model \(retriever and generator\)" in c
               for c in texts(at.caption))
    at.checkbox(key="stance_full").set_value(False)
    assert "<b>" not in md  # graph text reaches the page as plain text
    # no graph: the loaded (toy) KG gives the candidate
    decide(at, "Gravity was directed by Alfonso Cuarón.", "Alfonso Cuarón made Gravity.")
    assert any("retrieved from the loaded KG" in i for i in texts(at.info))
    # no graph and no KG: answered without one, and said
    decide(at, "Gravity is good.", "It is not.", use_kg=False)
    assert any("Answered without a graph" in w for w in texts(at.warning))
    assert "Graph\\: none \\(0 nodes\\)" in " ".join(texts(at.markdown))


def test_stance_bad_graph_and_missing_argument(stance_page):
    at = stance_page
    decide(at, "a", "b", "(a; b)")
    from talent_core.ui.safe import plain

    assert texts(at.error) == [plain("graph: not an explanation graph: triple 1 '(a; b)' has "
                                     "2 parts, expected 'concept; relation; concept'")]
    assert not [m for m in texts(at.markdown) if m.startswith("**Stance:**")]
    decide(at, "a", "  ")
    assert any("Type both arguments" in w for w in texts(at.warning))
