"""`talent eval` against a language-model server that fails on a question: that question is
a row with its error, counted as a miss, and the run goes on; three failures in a row stop
it (the server is down)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from talent_core.errors import LLMServerError
from talent_core.evaluation import runner as runner_mod
from talent_core.models import Answer, Candidate
from talent_core.questions import QARecord


def _records(n: int) -> list[QARecord]:
    return [QARecord(id=f"q{i}", question=f"who directed film {i}", answers=["Ann"])
            for i in range(n)]


def _run(monkeypatch, failing: set[str], n: int):
    def answer(self, item, point, mode, decode, method):
        if item.id in failing:
            raise LLMServerError("language-model server http://x/v1: HTTP 503: overloaded")
        return Answer(question=item.rec.question, answer=["Ann"],
                      candidate=Candidate(question=item.rec.question))

    monkeypatch.setattr(runner_mod.Runner, "answer", answer)
    pipe = SimpleNamespace(retrieval=SimpleNamespace(method="pcst"))
    return runner_mod.evaluate(pipe, _records(n), progress=False)


def test_a_failed_question_is_a_miss_with_its_error(monkeypatch):
    summary, rows = _run(monkeypatch, {"q1", "q3", "q4"}, 6)
    assert [r["id"] for r in rows] == ["q0", "q1", "q2", "q3", "q4", "q5"]
    assert [r.get("error", "")[:24] for r in rows if "error" in r] == [
        "language-model server ht"] * 3
    assert summary["errors"] == 3 and summary["hit@1"] == pytest.approx(0.5)


def test_failures_in_a_row_stop_the_run(monkeypatch):
    with pytest.raises(LLMServerError, match="503"):
        _run(monkeypatch, {"q1", "q2", "q3"}, 6)
