"""`talent keys create|list|revoke`: the key printed once on the last line, stored hashed
(0600, atomically), listed without secrets, revoked by name or id; clear errors."""

from __future__ import annotations

import json
import os
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


# --- issue 44: revoke by id or exact name; names that look like ids ------------------------
def _write_keys(data_dir, records):
    """A keys file holding ``records`` (id, name, plain key), as an older version could
    have written it (a name that is another key's id)."""
    import hashlib

    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    keys = [{"id": i, "name": n, "scope": "read", "created": "2024-01-01T00:00:00+00:00",
             "sha256": hashlib.sha256(k.encode()).hexdigest()} for i, n, k in records]
    path = data_dir / "api_keys.json"
    path.write_text(json.dumps({"keys": keys}))
    path.chmod(0o600)


def _listed(data_dir):
    return sorted((k["name"], k["id"]) for k in json.loads(
        runner.invoke(app, ["keys", "list", "--json"]).stdout))


def test_revoke_of_a_name_that_is_another_keys_id_is_refused(data_dir):
    a, b = "tk_0badc0de_" + "a" * 43, "tk_12345678_" + "b" * 43
    _write_keys(data_dir, [("0badc0de", "alpha", a), ("12345678", "0badc0de", b)])
    r = runner.invoke(app, ["keys", "revoke", "0badc0de"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "is the id of key 'alpha' and the name of another key" in lines[0]
    assert "--id" in lines[0] and "--name" in lines[0]
    assert _listed(data_dir) == [("0badc0de", "12345678"), ("alpha", "0badc0de")]  # both kept

    r = runner.invoke(app, ["keys", "revoke", "--id", "0badc0de"])
    assert r.exit_code == 0 and "revoked key 'alpha' (id 0badc0de)" in r.stdout, r.output
    assert _listed(data_dir) == [("0badc0de", "12345678")]
    _write_keys(data_dir, [("0badc0de", "alpha", a), ("12345678", "0badc0de", b)])
    r = runner.invoke(app, ["keys", "revoke", "--name", "0badc0de"])
    assert r.exit_code == 0 and "(id 12345678)" in r.stdout, r.output
    assert _listed(data_dir) == [("alpha", "0badc0de")]


def test_revoke_matches_exactly_one_key(data_dir):
    assert runner.invoke(app, ["keys", "create", "--name", "one"]).exit_code == 0
    assert runner.invoke(app, ["keys", "create", "--name", "two"]).exit_code == 0
    ids = dict(_listed(data_dir))
    r = runner.invoke(app, ["keys", "revoke", ids["two"]])  # by id, no flag
    assert r.exit_code == 0 and "revoked key 'two'" in r.stdout, r.output
    for args, message in ((["--id", "one"], "no key with id 'one'"),
                          (["--name", ids["one"]], f"no key named '{ids['one']}'"),
                          ([], "say which key to revoke"),
                          (["one", "--name", "one"], "say which key to revoke")):
        r = runner.invoke(app, ["keys", "revoke", *args])
        assert r.exit_code == 2 and message in r.stderr, (args, r.output)
    assert [n for n, _ in _listed(data_dir)] == ["one"]


def test_a_name_that_looks_like_an_id_is_refused(data_dir):
    r = runner.invoke(app, ["keys", "create", "--name", "deadbeef"])
    assert r.exit_code == 2 and "looks like a key id" in r.stderr, r.output
    assert not (data_dir / "api_keys.json").exists()
    for ok in ("DEADBEEF", "deadbeef0", "deadbeeg"):  # not 8 lowercase hex digits
        assert runner.invoke(app, ["keys", "create", "--name", ok]).exit_code == 0, ok


# --- issue 44: the data dir checked as every command checks it -----------------------------
@pytest.mark.parametrize("args", [["create", "--name", "x"], ["list"], ["revoke", "x"]])
def test_keys_refuse_a_data_dir_open_to_others(data_dir, args):
    data_dir.mkdir()
    data_dir.chmod(0o777)
    r = runner.invoke(app, ["keys", *args])
    assert r.exit_code == 2, r.output
    assert "writable by other users" in r.stderr and str(data_dir) in r.stderr
    assert list(data_dir.iterdir()) == []  # nothing written (no keys file, no lock)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid")
def test_keys_refuse_a_data_dir_of_another_user(data_dir):
    from talent_core.api.keys import KeyStore
    from talent_core.errors import DataDirError

    data_dir.mkdir(mode=0o700)
    os.chown(data_dir, 65534, 65534)
    r = runner.invoke(app, ["keys", "create", "--name", "x"])
    assert r.exit_code == 2 and "uid 65534" in r.stderr, r.output
    with pytest.raises(DataDirError, match="uid 65534"):  # the library too, not only the CLI
        KeyStore(data_dir).create("x", "read")
    assert list(data_dir.iterdir()) == []


def test_a_missing_data_dir_is_created_private(data_dir):
    r = runner.invoke(app, ["keys", "create", "--name", "x"])
    assert r.exit_code == 0, r.output
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((data_dir / "api_keys.lock").stat().st_mode) == 0o600


# --- issue 44: the reader's cache ----------------------------------------------------------
def test_a_revoke_with_the_same_inode_size_and_mtime_is_seen(data_dir):
    """The running server's store notices a changed file even when its inode, size and
    mtime are those it cached (a freed inode number reused within the clock's step)."""
    from talent_core.api.keys import KeyStore

    server = KeyStore(data_dir)
    _, key = server.create("a", "read")
    assert server.verify(key) is not None  # cached now
    path = data_dir / "api_keys.json"
    st = path.stat()
    rec = json.loads(path.read_text())["keys"][0]
    text = path.read_text().replace(rec["sha256"], "0" * 64)  # revoked, same size
    with path.open("r+") as f:  # same inode
        f.write(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    st2 = path.stat()
    assert (st2.st_ino, st2.st_size, st2.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    assert server.verify(key) is None


def test_a_symlinked_keys_file_is_refused(data_dir, tmp_path):
    from talent_core.api.keys import KeyStore

    other = KeyStore(tmp_path / "elsewhere")
    _, key = other.create("a", "read")
    data_dir.mkdir(mode=0o700)
    (data_dir / "api_keys.json").symlink_to(other.path)
    with pytest.raises(Exception, match="symlink"):
        KeyStore(data_dir).verify(key)
