"""Issue 15: KG text shown on a terminal is escaped (`printable`), and user questions are
checked up front (`check_question`): a clear one-line error for a 100k-character question,
invalid UTF-8 from argv, control characters; never a traceback."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from talent_core.errors import TextInputError
from talent_core.text import (
    MAX_QUESTION_CHARS,
    char_problem,
    check_question,
    key_problem,
    printable,
    printable_json,
)


def test_printable_escapes_terminal_controls():
    evil = "Tom\x1b[2J\x1b]0;title\x07 Hanks\r\u202eevil\u200b\ud800\x9b"
    out = printable(evil)
    assert out == "Tom\\x1b[2J\\x1b]0;title\\x07 Hanks\\r\\u202eevil\\u200b\\ud800\\x9b"
    out.encode("utf-8")  # always encodable
    assert printable("a\nb\tc") == "a\\nb\\tc"
    assert printable("a\nb\tc\x1b", keep_newlines=True) == "a\nb\tc\\x1b"
    assert printable("Amélie — 東京 🎬 a\\b") == "Amélie — 東京 🎬 a\\b"  # unchanged
    assert printable(ValueError("x\x1by")) == "x\\x1by"


@given(st.text())
def test_printable_output_has_no_control_characters(s):
    out = printable(s)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in out)
    out.encode("utf-8")
    if all(c.isprintable() and c not in "\u200b\u200c\u200d\u200e\u200f\ufeff\u061c" for c in s):
        assert out == s


def test_char_and_key_rules():
    for ok in ("a b\tc", "line1\nline2", "x\ry", "Amélie", "a\u2028b", "\ufeffa"):
        assert char_problem(ok) is None
    assert key_problem("a\x01b") == "contains a control character U+0001 at position 1"
    assert key_problem("a\ud800") == "contains a lone surrogate U+D800 at position 1"
    assert key_problem("a\x00") == "contains a NUL character at position 1"
    assert key_problem("a\x85") is not None and key_problem("a\x1b") is not None


def test_check_question_accepts_ordinary_questions():
    assert check_question("  what movies did [Tom Hanks] star in\n") == (
        "what movies did [Tom Hanks] star in"
    )
    assert check_question("line one\nline two\ttab") == "line one\nline two\ttab"


def test_check_question_rejects_a_100k_character_question_quickly():
    q = "what " * 20_000
    t = time.perf_counter()
    with pytest.raises(TextInputError, match=r"100,000 characters long; the maximum is 4,096"):
        check_question(q)
    assert time.perf_counter() - t < 0.05
    assert check_question("x" * MAX_QUESTION_CHARS)
    with pytest.raises(TextInputError):
        check_question("x" * 11, max_chars=10)


def test_check_question_rejects_invalid_utf8_from_argv():
    arg = os.fsdecode(b"who directed [Am\xe9lie]")  # how Python hands bad argv bytes over
    with pytest.raises(TextInputError, match=r"not valid UTF-8 text \(byte 0xe9 at character 16\)"):
        check_question(arg)
    with pytest.raises(TextInputError, match=r"lone surrogate U\+D800"):
        check_question("who \ud800")


@pytest.mark.parametrize("bad, why", [("", "empty"), ("  \n ", "empty"),
                                      ("a\x1b[31mb", r"U\+001B"), ("a\x00b", "NUL")])  # fmt: skip
def test_check_question_rejects_empty_and_control_characters(bad, why):
    with pytest.raises(TextInputError, match=why) as ei:
        check_question(bad)
    assert "\n" not in str(ei.value) and "\x1b" not in str(ei.value)


def test_printable_json_is_the_same_json_and_terminal_safe():
    import json

    obj = {"name": "Am\u00e9lie \x9b31m\x1b[2J\u202e\ud800\u2028 \u6771\u4eac", "n": [1, "\x7f"]}
    out = printable_json(obj)
    assert json.loads(out) == obj
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in out)
    assert "Am\u00e9lie" in out and "\u6771\u4eac" in out  # letters stay readable
    out.encode("utf-8")
