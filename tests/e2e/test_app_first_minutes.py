"""The first minutes of a new user (issue 28): the pages' defaults answer, and an empty
question or a bad one gets one line and no stale answer under it; the graph's legend lists
the roles drawn. AppTest on the toy store; the tiny model where an answer is generated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app_pages import _app, ask, explore
from typer.testing import CliRunner

EXAMPLES = Path(__file__).resolve().parents[2] / "talent_core" / "demo" / "metaqa" / \
    "examples.txt"


def _tiny(tmp_path, monkeypatch) -> None:
    from tiny_llm import tiny_llama

    from talent_core.config import get_settings

    monkeypatch.setenv("TALENT_BASE_MODEL", str(tiny_llama(tmp_path / "tiny")))
    get_settings.cache_clear()


def _legends(at: AppTest) -> list[str]:
    return [h.proto.body for h in at.get("html") if "talent-legend" in h.proto.body]


def test_ask_opens_in_full_mode_and_answers(use_toy, tmp_path, monkeypatch):
    """Pressing Ask with nothing changed answers (an Answer line), and the graph's legend
    lists only the node roles the drawn graph holds."""
    _tiny(tmp_path, monkeypatch)
    at = _app()
    assert at.radio(key="mode").value == "full"
    at.text_input(key="question").input("who directed [Gravity]")
    at.button(key="ask").click()
    at.run()
    assert not at.exception, at.exception
    assert any(m.value.startswith("**Answer:**") for m in at.markdown)
    legends = _legends(at)
    assert len(legends) == 1
    # the tiny model's retriever names things outside S at random: "missing" is there only
    # when the page says so; a click-expanded neighbour never is before a click
    assert "neighbour added by a click" not in legends[0]
    assert "answer" in legends[0] and "seed (where retrieval started)" in legends[0]
    warned = any("NOT in the KG (drawn unconnected" in w.value for w in at.warning)
    assert ("named outside S, NOT in the KG" in legends[0]) == warned
    assert "added by a click" not in legends[0]  # no expanded edge either


def test_retrieval_legend_has_no_llm_roles(use_toy):
    at = ask(_app(), "who directed [Gravity]", "retrieval")
    assert not at.exception, at.exception
    (legend,) = _legends(at)
    assert "seed (where retrieval started)" in legend and "candidate subgraph S" in legend
    for absent in ("selected by the LLM retriever", "named outside S", "answer<",
                   "neighbour added by a click", "evidence path", "joined to S"):
        assert absent not in legend, (absent, legend)


def test_explore_legend_lists_the_roles_drawn(use_toy):
    at = explore("Gravity")
    assert not at.exception, at.exception
    (legend,) = _legends(at)
    # Explore retrieves nothing: its own words, not Ask's "seed" and "candidate subgraph S"
    assert "the entity you opened" in legend and "its neighbours" in legend
    assert "seed" not in legend and "subgraph" not in legend
    assert "added by a double-click" not in legend  # nothing clicked yet


def test_empty_question_says_so_and_clears_the_answer(use_toy):
    at = ask(_app(), "who directed [Gravity]", "retrieval")
    assert at.dataframe  # an answer is shown
    at.text_input(key="question").input("   ")
    at.button(key="ask").click()
    at.run()
    assert not at.exception, at.exception
    assert [w.value for w in at.warning if "Type a question" in w.value]
    assert not at.dataframe and not at.subheader  # the previous answer is gone
    assert at.button(key="hist0")  # still in the history


def test_too_long_question_one_line_no_class_name_no_stale_answer(use_toy):
    at = ask(_app(), "who directed [Gravity]", "retrieval")
    assert at.subheader and at.dataframe
    at.text_input(key="question").input("who directed [Gravity] " + "x" * 5000)
    at.button(key="ask").click()
    at.run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert "5,023 characters long" in errors[0] and "maximum is 4,096" in errors[0]
    assert "Error" not in errors[0] and "\n" not in errors[0], errors
    assert not at.subheader and not at.dataframe  # the previous answer is not under it


def test_too_long_question_in_full_mode_loads_no_model(use_toy, monkeypatch):
    """The question is checked before the language models load (a missing base model
    would be the error otherwise)."""
    from talent_core.config import get_settings

    monkeypatch.setenv("TALENT_BASE_MODEL", "/nonexistent/base-model")
    get_settings.cache_clear()
    at = _app()
    at.text_input(key="question").input("x" * 5000)
    at.button(key="ask").click()
    at.run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [
        "the question is 5,000 characters long; the maximum is 4,096"]


@pytest.mark.slow  # over 30 s: the slow suite (CI runs both)
def test_evaluate_default_runs(use_toy):
    """The Evaluate page's own default (the bundled MetaQA examples, which start with a
    comment) runs to a report."""
    at = _app()
    at.switch_page("views/evaluate.py")
    at.run()
    assert not at.exception, at.exception
    assert at.radio(key="eval_src").value.startswith("MetaQA examples for the bundled")
    at.button(key="eval_run").click()
    at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("rows" in s.value for s in at.success), [s.value for s in at.success]
    assert at.dataframe  # the report's table


def test_cli_eval_on_the_bundled_examples(use_toy):
    from talent_core.commands import app

    r = CliRunner().invoke(app, ["eval", str(EXAMPLES), "--mode", "retrieval"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    n = sum(1 for ln in EXAMPLES.read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.startswith("#"))
    assert summary["n"] == n


def test_cli_ask_empty_is_one_line_before_the_store_opens(tmp_path, monkeypatch):
    """`talent ask ""`: one line, exit 2, and no store started for it (the data dir is a
    file here: opening a store there would fail with another message)."""
    from talent_core.commands import app
    from talent_core.config import get_settings

    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("TALENT_DATA_DIR", str(not_a_dir))
    monkeypatch.setenv("TALENT_STORE", "embedded")
    get_settings.cache_clear()
    try:
        for q in ("", "   "):
            r = CliRunner().invoke(app, ["ask", q])
            assert r.exit_code == 2, r.output
            assert r.output.strip() == "error: the question is empty", r.output
    finally:
        get_settings.cache_clear()


def test_roles_and_edge_groups_present_in_legend_order():
    from talent_core.ui.common import edge_groups_present, roles_present

    els = {"nodes": [{"data": {"role": "candidate"}}, {"data": {"role": "answer"}},
                     {"data": {"role": "candidate"}}],
           "edges": [{"data": {"group": "EVIDENCE"}}, {"data": {"group": "S"}}]}
    assert roles_present(els) == ["answer", "candidate"]
    assert edge_groups_present(els) == ["S", "EVIDENCE"]
    assert roles_present({"nodes": [], "edges": []}) == []


def test_evaluate_bad_question_file_is_one_line(use_toy, monkeypatch):
    """A question file with a bad line: the page says file:line in one line, no traceback
    and no class name."""
    # evaluation.report binds read_items when first imported: imported first under the
    # patch below, it would keep `bad` for every later test of the process
    import talent_core.evaluation.datasets as datasets
    import talent_core.evaluation.report  # noqa: F401
    from talent_core.errors import QuestionFileError

    def bad(*a, **k):
        raise QuestionFileError("qa.txt:3: expected 'question<TAB>answer1|answer2', got 1 "
                                "tab-separated fields")

    monkeypatch.setattr(datasets, "read_items", bad)
    at = _app()
    at.switch_page("views/evaluate.py")
    at.run()
    at.button(key="eval_run").click()
    at.run()
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "") for e in at.error]  # plain() escapes Markdown
    assert errors == ["qa.txt:3: expected 'question<TAB>answer1|answer2', got 1 "
                      "tab-separated fields"], errors
    assert "Error" not in errors[0] and "\n" not in errors[0], errors
