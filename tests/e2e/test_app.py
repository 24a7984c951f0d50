"""The Streamlit UI, driven headless with streamlit.testing.v1.AppTest."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from app_helpers import ask
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def _ask_gravity(at: AppTest) -> None:
    ask(at, "who directed Gravity", topic="Gravity")


def test_app_shows_candidate_evidence(use_toy):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    at.radio(key="mode").set_value("retrieval")  # the page opens in full mode
    assert [m.value for m in at.metric][2] != "0"  # triples loaded
    _ask_gravity(at)
    frames = [df.value for df in at.dataframe]
    names = set(frames[0]["name"])  # "Candidate nodes" tab
    assert {"Gravity", "Alfonso Cuarón"} <= names


def test_app_empty_question_says_so(use_toy):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.button(key="ask").click()
    at.run()
    assert not at.exception
    assert not at.dataframe  # nothing retrieved for an empty question
    assert [w.value for w in at.warning if "Type a question" in w.value]


def test_app_full_ranked_with_frozen_notice(use_toy, tmp_path, monkeypatch):
    """Full mode, ranked decoding, no adapters for the (tiny) base model: the page says the
    frozen model answers, and the answers are KG nodes of S with their scores."""
    from tiny_llm import tiny_llama

    from talent_core.config import get_settings

    monkeypatch.setenv("TALENT_BASE_MODEL", str(tiny_llama(tmp_path / "tiny")))
    get_settings.cache_clear()
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.radio(key="mode").set_value("full")
    at.radio(key="decode").set_value("ranked")
    _ask_gravity(at)
    assert any("frozen base model" in w.value for w in at.warning)
    ranked = at.dataframe[0].value  # the ranked candidate answers
    candidates = set(at.dataframe[1].value["name"])
    # the bundled planner serves the toy KG's MetaQA relations: the ends of its planned
    # paths join S's nodes as candidate answers, and the page shows the plan
    on_path = set(ranked.loc[ranked["planned path"] != "", "answer"])
    assert set(ranked["answer"]) <= candidates | on_path and ranked["chosen"].iloc[0]
    # every candidate's score is the model's plus w log(prior + eps) (the shipped planner's
    # w and eps): the director, on the planned path, gains w log(1000) on names off it
    from talent_core.retrieval.planner import BUNDLED, PlannerModel

    shipped = PlannerModel.load(BUNDLED / "metaqa")
    for _, r in ranked.iterrows():
        assert r["score"] == pytest.approx(
            r["model score"] + shipped.answer_weight * math.log(r["path prior"] + shipped.eps),
            abs=0.02)
    assert ranked.set_index("answer").loc["Alfonso Cuarón", "planned path"] == "directed_by"
    assert any("trained (metaqa) planner" in c.value for c in at.caption)
    assert any(m.value.startswith("Planned relation paths\\: directed\\_by \\(p 0\\.9")
               for m in at.markdown), [m.value for m in at.markdown]  # shown as text

    at.checkbox(key="planner").uncheck()  # the language model alone: answers are nodes of S
    _ask_gravity(at)
    ranked = at.dataframe[0].value
    assert "planned path" not in ranked.columns
    assert set(ranked["answer"]) <= set(at.dataframe[1].value["name"])
    assert any("ranked decoding" in c.value for c in at.caption)


def test_app_refuses_a_bad_retrieval_setting(use_toy, monkeypatch):
    """A slider value the model does not accept (here: the UI's bound drifted from the
    RetrievalConfig field's) is refused with the Pipeline's message naming the setting."""
    import talent_core.retrieval.config as rc

    real = rc.field_bounds
    monkeypatch.setattr(rc, "field_bounds", lambda n: (1, 5) if n == "hops" else real(n))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.slider(key="hops").set_value(5)
    at.text_input(key="question").input("who directed [Gravity]")
    at.button(key="ask").click()
    at.run()
    assert not at.exception, at.exception
    assert any("hops" in e.value and "less than or equal to 3" in e.value for e in at.error)
    assert not at.dataframe  # nothing retrieved


def test_app_answers_with_each_retriever_in_retrieval_mode(use_toy):
    """The retriever selector reaches the pipeline: the caption names the method that built
    S (vector: top-k entities, no edges)."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.selectbox(key="method").set_value("vector")
    at.run()
    at.radio(key="mode").set_value("retrieval")
    at.text_input(key="question").input("who directed [Gravity]")
    at.button(key="ask").click()
    at.run()
    assert not at.exception, at.exception
    assert any("S (vector)" in c.value for c in at.caption), [c.value for c in at.caption]
