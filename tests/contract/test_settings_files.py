"""Issue 44, item 5: a settings file (`.env`, `.talent/neo4j.env` of the current folder) is
read only when no other user could have written it (the data dir's rule,
`settings_file_problem`): else one line naming the file and the problem (CLI exit 2, the UI
an error), before any value of it is used. Ours (0600, 0644, root's) are read as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from talent_core.commands import app
from talent_core.config import get_settings
from talent_core.errors import SettingsError

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid")
URL = "TALENT_API_URL=http://127.0.0.1:9\n"


def _who(uid: int) -> str:
    import pwd

    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


OTHER = _who(65534)  # how the messages name the other user


@pytest.fixture(autouse=True)
def here(monkeypatch, tmp_path):
    work = tmp_path / "work"
    work.mkdir(mode=0o700)
    monkeypatch.chdir(work)
    monkeypatch.delenv("TALENT_API_URL", raising=False)
    monkeypatch.delenv("NEO4J_URI", raising=False)
    get_settings.cache_clear()
    yield work
    get_settings.cache_clear()


def _env(folder: Path, text: str = URL, mode: int = 0o600, name: str = ".env") -> Path:
    path = folder / name
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def _refused(match: str) -> str:
    with pytest.raises(SettingsError) as e:
        get_settings()
    line = str(e.value)
    assert "\n" not in line and "settings file .env:" in line and match in line, line
    return line


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o400])
def test_our_dot_env_is_read(here, mode):
    _env(here, mode=mode)
    from talent_core.store.data_dir import settings_file_problem

    assert get_settings().api_url == "http://127.0.0.1:9"
    assert settings_file_problem(Path(".env")) is None


def test_a_dot_env_others_may_write_is_refused(here):
    _env(here, mode=0o666)
    line = _refused("writable by other users (mode 0666")
    assert str(here / ".env") in line


@as_root
def test_a_dot_env_of_another_user_is_refused(here):
    os.chown(_env(here, mode=0o644), 65534, 65534)
    _refused(".env is owned by " + OTHER)


@as_root
def test_a_dot_env_in_a_folder_of_another_user_is_refused(here):
    _env(here)
    os.chown(here, 65534, 65534)
    _refused(f"{here} is owned by {OTHER}")


def test_a_dot_env_symlink_into_a_folder_open_to_others_is_refused(here, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone may swap the file
    target = _env(shared, name="their.env")
    (here / ".env").symlink_to(target)
    _refused(f"{shared} is writable by other users (mode 0777)")


def test_a_dot_env_symlink_of_ours_to_a_safe_file_is_read(here, tmp_path):
    safe = tmp_path / "safe"
    safe.mkdir(mode=0o700)
    (here / ".env").symlink_to(_env(safe, name="real.env"))
    assert get_settings().api_url == "http://127.0.0.1:9"


@as_root
def test_a_dot_env_symlink_owned_by_another_user_is_refused(here, tmp_path):
    safe = tmp_path / "safe"
    safe.mkdir(mode=0o700)
    link = here / ".env"
    link.symlink_to(_env(safe, name="real.env"))
    os.lchown(link, 65534, 65534)
    _refused(f".env is a symlink owned by {OTHER}")


def test_a_neo4j_env_in_a_folder_open_to_others_is_refused(here):
    path = _env(here, "NEO4J_URI=bolt://127.0.0.1:9\n", name=".talent/neo4j.env")
    path.parent.chmod(0o777)
    with pytest.raises(SettingsError, match=r"settings file \.talent/neo4j\.env: .*\.talent "
                                            r"is writable by other users"):
        get_settings()
    path.parent.chmod(0o700)  # as tests/neo4j/neo4j_ctl.py makes it
    get_settings.cache_clear()
    assert get_settings().neo4j_uri == "bolt://127.0.0.1:9"


def test_a_directory_named_dot_env_is_no_settings_file(here):
    (here / ".env").mkdir()  # e.g. a virtualenv: skipped, as pydantic-settings does
    assert get_settings().api_url is None


def test_a_fifo_dot_env_is_refused(here):
    os.mkfifo(here / ".env", 0o600)
    _refused("is not a regular file")


def test_the_cli_says_it_in_one_line_and_exits_2(here):
    _env(here, mode=0o666)
    r = CliRunner().invoke(app, ["keys", "list"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "settings file .env:" in lines[0], r.stderr
    assert "Traceback" not in r.output


def test_the_ui_says_it_and_opens_no_page(here):
    from streamlit.testing.v1 import AppTest

    _env(here, mode=0o666)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app" / "main.py"),
                           default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    errors = [e.value.replace("\\", "") for e in at.error]
    assert any("settings file .env" in e for e in errors), errors
    assert not at.text_input


def test_the_checkout_s_own_neo4j_env_passes():
    """The repository root, where tests/neo4j/neo4j_ctl.py writes `.talent/neo4j.env` (as
    root in CI): its folders pass the rule."""
    from talent_core.store.data_dir import settings_file_problem

    root = Path(__file__).resolve().parents[2]
    assert settings_file_problem(root / ".talent" / "neo4j.env") is None
    assert settings_file_problem(root / ".env") is None
