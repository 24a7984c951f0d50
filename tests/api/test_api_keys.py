"""`talent keys create|list|revoke`: the key printed once on the last line, stored hashed
(0600, atomically), listed without secrets, revoked by name or id; clear errors."""

from __future__ import annotations

import json
import stat

import pytest
from typer.testing import CliRunner

from talent_core.commands import app

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    from talent_core.config import get_settings

    monkeypatch.setenv("TALENT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


def test_create_list_revoke(data_dir):
    from talent_core.api.keys import KEYS_FILE, KeyStore

    r = runner.invoke(app, ["keys", "create", "--name", "nb", "--scope", "write"])
    assert r.exit_code == 0, r.output
    key = r.stdout.strip().splitlines()[-1]
    assert key.startswith("tk_")
    path = data_dir / KEYS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    secret = key.split("_", 2)[2]  # tk_<hex id>_<secret>; the secret may hold "_" itself
    assert key not in text and secret not in text  # only its hash is stored
    assert KeyStore(data_dir).verify(key).scope == "write"
    assert KeyStore(data_dir).verify(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    listed = json.loads(runner.invoke(app, ["keys", "list", "--json"]).stdout)
    assert [(k["name"], k["scope"]) for k in listed] == [("nb", "write")]
    assert "sha256" not in listed[0]
    r = runner.invoke(app, ["keys", "revoke", listed[0]["id"]])
    assert r.exit_code == 0, r.output
    assert KeyStore(data_dir).verify(key) is None
    assert not list(data_dir.glob(".api_keys.*"))  # no temporary file left


@pytest.mark.parametrize(("args", "message"), [
    (["create", "--name", "x", "--scope", "admin"], "scope 'admin': must be read or write"),
    (["create", "--name", "a b"], "key name 'a b'"),
    (["revoke", "nobody"], "no key named 'nobody'"),
])
def test_errors_name_the_problem(data_dir, args, message):
    r = runner.invoke(app, ["keys", *args])
    assert r.exit_code == 2 and message in r.stderr, r.output


def test_duplicate_name_refused(data_dir):
    assert runner.invoke(app, ["keys", "create", "--name", "dup"]).exit_code == 0
    r = runner.invoke(app, ["keys", "create", "--name", "dup"])
    assert r.exit_code == 2 and "exists already" in r.stderr


def test_corrupt_keys_file_is_an_error_naming_it(data_dir):
    from talent_core.api.keys import KEYS_FILE

    data_dir.mkdir(parents=True)
    (data_dir / KEYS_FILE).write_text("{not json")
    r = runner.invoke(app, ["keys", "list"])
    assert r.exit_code == 2 and KEYS_FILE in r.stderr and "not a readable keys file" in r.stderr


def test_keys_file_writable_by_others_is_refused(data_dir):
    from talent_core.api.keys import KeyStore

    ks = KeyStore(data_dir)
    _, key = ks.create("k", "read")
    ks.path.chmod(0o666)
    r = runner.invoke(app, ["keys", "list"])
    assert r.exit_code == 2 and "writable by others" in r.stderr
    with pytest.raises(Exception, match="chmod 600"):
        KeyStore(data_dir).verify(key)
