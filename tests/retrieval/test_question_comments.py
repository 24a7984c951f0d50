"""Question files may hold `#` comment lines and blank lines, in every line format and for
every reader (`read_questions`, `read_question_files`, the report's `read_items`); the
line numbers in ids and errors stay the file's own (issue 28: the bundled
talent_core/demo/metaqa/examples.txt starts with a comment)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from talent_core.errors import QuestionFileError
from talent_core.questions import is_comment, read_question_files, read_questions

EXAMPLES = Path(__file__).resolve().parents[2] / "talent_core" / "demo" / "metaqa" / \
    "examples.txt"


def test_is_comment() -> None:
    assert is_comment("# a note") and is_comment("   # indented") and is_comment("  ")
    assert is_comment("")
    assert not is_comment("who directed [Gravity]\tAlfonso Cuarón")
    assert not is_comment('{"question": "# not a comment inside"}')


def test_metaqa_comments_and_blank_lines_skipped_line_numbers_kept(tmp_path) -> None:
    f = tmp_path / "qa.txt"
    f.write_text("# questions<TAB>answers\n\n  # indented note\n"
                 "who directed [Gravity]\tAlfonso Cuarón\n"
                 "# between\n"
                 "what films did [Tom Hanks] act in\tBig|Splash\n", encoding="utf-8")
    recs = list(read_questions(f))
    assert [r.id for r in recs] == ["qa:4", "qa:6"]
    assert recs[0].question == "who directed Gravity" and recs[0].topic_entities == ["Gravity"]
    assert recs[1].answers == ["Big", "Splash"]


def test_metaqa_error_after_comments_names_the_file_line(tmp_path) -> None:
    f = tmp_path / "qa.txt"
    f.write_text("# header\n# more\nwho directed [Gravity]\tAlfonso Cuarón\nno answers here\n",
                 encoding="utf-8")
    with pytest.raises(QuestionFileError, match=r"qa\.txt:4: expected"):
        list(read_questions(f))


def test_rog_jsonl_comments(tmp_path) -> None:
    f = tmp_path / "q.jsonl"
    rec = {"id": "a", "question": "who directed Gravity", "answer": ["Alfonso Cuarón"],
           "q_entity": ["Gravity"]}
    f.write_text("# RoG records\n\n" + json.dumps(rec) + "\n# end\n{broken\n", encoding="utf-8")
    with pytest.raises(QuestionFileError, match=r"q\.jsonl:5: invalid JSON"):
        list(read_questions(f))
    f.write_text("# RoG records\n\n" + json.dumps(rec) + "\n# end\n", encoding="utf-8")
    assert [r.id for r in read_questions(f)] == ["a"]


def test_bundled_examples_read_by_every_reader() -> None:
    """The bundled examples (they start with a comment) through each reader."""
    from talent_core.evaluation.datasets import read_items

    assert EXAMPLES.read_text(encoding="utf-8").startswith("#")
    recs = list(read_questions(EXAMPLES))
    lines = [ln for ln in EXAMPLES.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(recs) == len(lines) >= 12
    assert all(r.topic_entities and r.answers for r in recs)
    assert len(read_question_files([EXAMPLES, EXAMPLES], limit=15)) == 15
    items = read_items([EXAMPLES], "metaqa")
    assert [i.id for i in items] == [r.id for r in recs]
