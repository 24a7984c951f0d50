"""The Streamlit UI, driven headless with streamlit.testing.v1.AppTest."""

from __future__ import annotations

import math
from pathlib import Path

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
    ranked = _table(at, "model score")  # the ranked candidate answers
    candidates = set(_table(at, "seed")["name"])  # S's nodes
    assert "Alfonso Cuarón" in candidates
    # the planner plans over Gravity's own relation paths: the ends of its planned paths
    # join S's nodes as candidate answers, and the page shows the plan
    on_path = ranked[ranked["planned path"] != ""]
    assert len(on_path) and set(ranked["answer"]) <= candidates | set(on_path["answer"])
    assert (on_path["path prior"] > 0).all()
    assert (ranked.loc[ranked["planned path"] == "", "path prior"] == 0).all()
    # every candidate's score is the model's plus w log(prior + eps) with the matcher
    # planner's w and eps (the table rounds each to 4 places: the bounds allow for that)
    from talent_core.planning.matcher import BUNDLED, PathMatcher, bundled_base, load_meta
    from talent_core.planning.plan import MatcherPlanner

    planner = MatcherPlanner(PathMatcher({}, None))
    w, eps = planner.answer_weight, planner.eps
    assert (w, eps) == (20.0, 1e-3)
    for _, r in ranked.iterrows():
        low = r["model score"] + w * math.log(max(r["path prior"] - 5e-5, 0.0) + eps)
        high = r["model score"] + w * math.log(r["path prior"] + 5e-5 + eps)
        assert low - 2e-4 <= r["score"] <= high + 2e-4, r.to_dict()
    assert list(ranked["score"]) == sorted(ranked["score"], reverse=True)
    # the best answer is on a planned path: the answer set is that path's every end
    top = ranked.iloc[0]
    assert top["chosen"] and top["planned path"]
    assert set(on_path.loc[on_path["planned path"] == top["planned path"], "answer"]) <= set(
        ranked.loc[ranked["chosen"], "answer"])
    caption = "every end of the planned path " + _md(top["planned path"]) + ", best first"
    # (said under a list; one answer stands alone)
    assert any(c.value == caption for c in at.caption) == (ranked["chosen"].sum() > 1), [
        c.value for c in at.caption]
    # the toy store embeds with MiniLM: the shipped matcher plans, or zero-shot without one
    kind = (f"matcher ({load_meta(BUNDLED).get('name', '?')})" if bundled_base() == "minilm"
            else "zero-shot")
    if kind != "zero-shot":  # the trained matcher reads "who directed" as directed_by
        assert (top["answer"], top["planned path"]) == ("Alfonso Cuarón", "directed_by")
    assert any(f"{kind} planner" in c.value for c in at.caption), [c.value for c in at.caption]
    shown = [m.value for m in at.markdown if m.value.startswith("Planned relation paths\\: ")]
    assert len(shown) == 1  # shown as text, every answer's path among the planned ones
    assert all(_md(p) + " \\(p " in shown[0] for p in set(on_path["planned path"])), shown

    at.checkbox(key="planner").uncheck()  # the language model alone: answers are nodes of S
    _ask_gravity(at)
    ranked = _table(at, "score")
    assert "planned path" not in ranked.columns and "model score" not in ranked.columns
    assert set(ranked["answer"]) <= set(_table(at, "seed")["name"])
    assert any("ranked decoding" in c.value and c.value.endswith("no planner")
               for c in at.caption), [c.value for c in at.caption]


def _table(at: AppTest, column: str):
    """The first table of the page with ``column``."""
    found = [df.value for df in at.dataframe if column in df.value.columns]
    assert found, [list(df.value.columns) for df in at.dataframe]
    return found[0]


def _md(text: str) -> str:
    """``text`` as the page writes it (markdown escaped by app's `plain`)."""
    from talent_core.ui.safe import plain

    return plain(text)


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
