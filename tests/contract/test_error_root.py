"""One error root: every error TaLenT raises on purpose is a `TalentError` (keeping the
builtin base its callers catch), and the `talent` group says any of them the same way."""

from __future__ import annotations

import inspect

import pytest
import typer
from typer.testing import CliRunner

from talent_core import errors
from talent_core.commands import _LazyGroup

CLASSES = [c for _, c in inspect.getmembers(errors, inspect.isclass)
           if c.__module__ == errors.__name__]


def test_every_error_is_under_the_root() -> None:
    assert len(CLASSES) >= 20
    for cls in CLASSES:
        assert issubclass(cls, errors.TalentError), cls


@pytest.mark.parametrize("cls, base", [
    (errors.QuestionFileError, ValueError), (errors.TextInputError, ValueError),
    (errors.RetrievalSettingsError, ValueError), (errors.PlannerError, ValueError),
    (errors.ScorerError, ValueError), (errors.ResumeMismatch, ValueError),
    (errors.TrainingDataError, ValueError),
    (errors.EmbeddedServerError, RuntimeError), (errors.DataDirError, RuntimeError),
    (errors.NTriplesSyntaxError, ValueError), (errors.RecordTooLong, errors.LineError),
    (errors.OutputError, errors.LoadError),
])
def test_builtin_bases_kept(cls: type, base: type) -> None:
    assert issubclass(cls, base)


def test_old_import_paths_give_the_same_class() -> None:
    from talent_core.questions import QuestionFileError
    from talent_core.training.subgraphrag import ResumeMismatch as scorer_resume
    from talent_core.training.trainer import ResumeMismatch as llm_resume

    assert llm_resume is scorer_resume is errors.ResumeMismatch
    assert QuestionFileError is errors.QuestionFileError


def _app(exc: Exception) -> typer.Typer:
    app = typer.Typer(cls=_LazyGroup, add_completion=False)

    @app.command()
    def boom() -> None:
        raise exc

    @app.command()
    def other() -> None:  # a group of one command would run it without its name
        pass

    return app


@pytest.mark.parametrize("exc, code, said", [
    (errors.PlannerError("planner dir\x1b[31m unusable"), 2,
     "error: planner dir\\x1b[31m unusable\n"),
    (errors.LoadError("kb.txt", 3, "bad row", raw="a\x07|b"), 1,
     "error: kb.txt:3: bad row\n  row: a\\x07|b\n"),
    (errors.OutputError("out.jsonl", None, "no space left on device"), 2,
     "error: out.jsonl: no space left on device\n"),
])
def test_the_group_says_any_talent_error_escaped_with_its_exit_code(exc, code, said) -> None:
    r = CliRunner().invoke(_app(exc), ["boom"])
    assert r.exit_code == code
    assert r.stderr == said


def test_other_exceptions_are_not_swallowed() -> None:
    r = CliRunner().invoke(_app(KeyError("x")), ["boom"])
    assert isinstance(r.exception, KeyError)
