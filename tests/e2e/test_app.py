"""The Streamlit UI, driven headless with streamlit.testing.v1.AppTest."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def test_app_shows_candidate_evidence(use_toy):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert [m.value for m in at.metric][2] != "0"  # triples loaded
    at.text_input(key="question").input("who directed Gravity")
    at.text_input(key="topic").input("Gravity")
    at.button[0].click()
    at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    frames = [df.value for df in at.dataframe]
    names = set(frames[0]["name"])  # "Candidate nodes" tab
    assert {"Gravity", "Alfonso Cuarón"} <= names


def test_app_empty_question_does_nothing(use_toy):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.button[0].click()
    at.run()
    assert not at.exception
    assert not at.dataframe  # nothing retrieved for an empty question
