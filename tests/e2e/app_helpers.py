"""Helpers shared by the AppTest (headless Streamlit) tests."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def ask(at: AppTest, question: str, topic: str | None = None) -> None:
    """Type the question (and its topic), press Ask; the page must render without errors."""
    at.text_input(key="question").input(question)
    if topic is not None:
        at.text_input(key="topic").input(topic)
    at.button(key="ask").click()
    at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
