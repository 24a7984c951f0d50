"""A setting with a value it cannot take (a TALENT_ variable of the environment or `.env`)
is one line naming the variable, its value and the problem: in the CLI (exit 2, no
traceback) and in the UI (an error, no page opens), never pydantic's report."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from talent_core.commands import app
from talent_core.config import get_settings, settings_problem
from talent_core.errors import SettingsError

APP = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.parametrize(("variable", "value", "problem"), [
    ("TALENT_STORE", "foo", "Input should be 'embedded' or 'neo4j'"),
    ("TALENT_API_PORT", "0", "greater than or equal to 1"),
    ("WORLD_SIZE", "two", "valid integer"),
])
def test_a_bad_value_names_its_variable(monkeypatch, variable, value, problem):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as e:
        get_settings()
    assert f"{variable}={value!r}: " in str(e.value) and problem in str(e.value)
    assert "\n" not in str(e.value)


def test_a_bad_value_in_dot_env_is_named_too(tmp_path):
    (tmp_path / ".env").write_text("TALENT_EMBED_BATCH_SIZE=many\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"TALENT_EMBED_BATCH_SIZE='many': .*integer"):
        get_settings()


def test_every_problem_is_said_at_once(monkeypatch):
    monkeypatch.setenv("TALENT_STORE", "foo")
    monkeypatch.setenv("TALENT_API_PORT", "99999")
    from pydantic import ValidationError

    from talent_core.config import Settings

    with pytest.raises(ValidationError) as e:
        Settings(_env_file=None)
    line = settings_problem(e.value)
    assert "TALENT_STORE='foo'" in line and "TALENT_API_PORT='99999'" in line


def test_a_secret_value_is_never_repeated(monkeypatch):
    from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

    from talent_core.config import Settings

    def problem(field: str, value: str) -> str:
        error = ValidationError.from_exception_data(Settings.__name__, [InitErrorDetails(
            type=PydanticCustomError("bad", "not usable"), loc=(field,), input=value)])
        return settings_problem(error)

    assert problem("neo4j_password", "hunter2") == (
        "bad setting (environment, .env or .talent/neo4j.env): NEO4J_PASSWORD=(hidden): "
        "not usable")
    assert "hunter2" not in problem("NEO4J_PASSWORD", "hunter2")  # located by its alias
    assert "s3cret" not in problem("api_key", "s3cret")
    assert "TALENT_API_KEY=(hidden)" in problem("api_key", "s3cret")
    assert "TALENT_STORE='x'" in problem("store", "x")


def test_the_cli_says_it_in_one_line_and_exits_2(monkeypatch):
    monkeypatch.setenv("TALENT_STORE", "foo")
    result = CliRunner().invoke(app, ["ask", "who directed Gravity"])
    assert result.exit_code == 2, result.output
    assert "TALENT_STORE='foo'" in result.output
    assert "Traceback" not in result.output and "pydantic" not in result.output


def test_the_ui_says_it_and_opens_no_page(monkeypatch):
    monkeypatch.setenv("TALENT_STORE", "foo")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "") for e in at.error]
    assert any("TALENT_STORE='foo'" in e for e in errors), errors
    assert not at.text_input  # the Ask page did not open
