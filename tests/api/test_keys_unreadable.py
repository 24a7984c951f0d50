"""Issue 44, item 4: a keys file the server cannot use (open to others, unreadable) answers
503 keys_unreadable with a generic message; the reason, with the server's file path, goes to
the server log only."""

from __future__ import annotations

import logging

import pytest

from talent_core.config import Settings


@pytest.fixture
def client(tmp_path):
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app
    from talent_core.api.keys import KeyStore

    data_dir = tmp_path / "secret-place"
    KeyStore(data_dir).create("k", "read")
    app = create_app(Settings(data_dir=data_dir, _env_file=None), pipeline_factory=object)
    with TestClient(app) as c:
        yield c, data_dir


@pytest.mark.parametrize("how", ["0666", "not json"])
def test_keys_unreadable_tells_the_log_not_the_client(client, caplog, how):
    c, data_dir = client
    path = data_dir / "api_keys.json"
    if how == "0666":
        path.chmod(0o666)
    else:
        path.write_text("{not json")
    forged = "tk_deadbeef_" + "A" * 43
    with caplog.at_level(logging.ERROR):
        r = c.get("/readyz", headers={"Authorization": f"Bearer {forged}"})
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] == "keys_unreadable"
    assert "server misconfigured" in err["message"] and "server log" in err["message"]
    assert str(data_dir) not in r.text and "api_keys" not in r.text
    logged = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert any(str(path) in rec.getMessage() for rec in logged), caplog.text
