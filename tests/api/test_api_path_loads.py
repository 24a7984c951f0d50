"""POST /v1/loads with JSON {"path": ...}: a file on the server, under a folder the operator
allows (TALENT_API_LOAD_DIRS); none allowed by default (403); `..` and symlinks that lead
out of the folders are refused before anything is read; the file itself is left in place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from api_helpers import api_settings, auth, wait_load
from test_api_http import error_of


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    d = tmp_path / "allowed"
    d.mkdir()
    (d / "path_kb.txt").write_text("Path Film|directed_by|Path Person\n"
                                   "Path Film|release_year|2032\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("Secret Film|directed_by|Secret Person\n",
                                         encoding="utf-8")
    return d


def app_client(api_env, allowed: Path | None):
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    extra = {} if allowed is None else {"api_load_dirs": str(allowed)}
    return TestClient(create_app(api_settings(api_env, **extra)))


def test_path_loads_are_off_unless_the_operator_allows_a_folder(api_env, api_keys, allowed):
    with app_client(api_env, None) as c:
        r = c.post("/v1/loads", headers=auth(api_keys["write"]),
                   json={"path": str(allowed / "path_kb.txt"), "format": "metaqa"})
        err = error_of(r, 403)
        assert "TALENT_API_LOAD_DIRS" in err["message"]
        assert not c.app.state.runtime.loads.jobs


def test_a_file_under_an_allowed_folder_loads_and_stays(api_env, api_keys, allowed):
    kb = allowed / "path_kb.txt"
    with app_client(api_env, allowed) as c:
        r = c.post("/v1/loads", headers=auth(api_keys["read"]), json={"path": str(kb)})
        assert error_of(r, 403)["code"] == "forbidden"  # a read key does not load
        r = c.post("/v1/loads", headers=auth(api_keys["write"]),
                   json={"path": str(kb), "format": "metaqa"})
        assert r.status_code == 202, r.text
        job = r.json()
        assert job["source"] == str(kb.resolve())
        job = wait_load(c, job, auth(api_keys["read"]))
        assert job["status"] == "done", job
        assert job["result"]["loaded"] == 2 and job["progress"]["total_rows"] == 2
        found = c.get("/v1/entities", params={"q": "Path Person"},
                      headers=auth(api_keys["read"])).json()
        assert any(e["name"] == "Path Person" for e in found["entities"])
    assert kb.is_file()  # the operator's file is not removed after its load


def test_escapes_and_bad_requests_are_refused(api_env, api_keys, allowed):
    outside = allowed.parent / "secret.txt"
    (allowed / "link.txt").symlink_to(outside)
    (allowed / "sub").mkdir()
    h = auth(api_keys["write"])
    with app_client(api_env, allowed) as c:
        for path in (str(outside), str(allowed / ".." / "secret.txt"),
                     str(allowed / "sub" / ".." / ".." / "secret.txt"),
                     str(allowed / "link.txt"), "/etc/passwd",
                     str(allowed.parent / "allowed-not" / "x.txt")):
            err = error_of(c.post("/v1/loads", headers=h,
                                  json={"path": path, "format": "metaqa"}), 403)
            assert "not under a folder the operator allows" in err["message"], path
        # existence is not revealed outside; inside, a missing file or folder is a 422
        for path in (str(allowed / "nope.txt"), str(allowed / "sub")):
            assert error_of(c.post("/v1/loads", headers=h,
                                   json={"path": path, "format": "metaqa"}),
                            422)["field"] == "path"
        assert error_of(c.post("/v1/loads", headers=h, json={"path": "path_kb.txt"}),
                        422)["field"] == "path"  # relative
        assert error_of(c.post("/v1/loads", headers=h,
                               json={"path": str(allowed / "path_kb.txt"), "format": "csv"}),
                        422)["field"] == "format"
        assert error_of(c.post("/v1/loads", headers=h,
                               json={"path": str(allowed / "path_kb.txt"), "x": 1}),
                        422)["field"] == "x"
        assert error_of(c.post("/v1/loads", headers=h, json={}), 422)["field"] == "path"
        assert not c.app.state.runtime.loads.jobs
    assert outside.read_text(encoding="utf-8").startswith("Secret Film")


def test_the_setting_takes_several_folders(api_env, tmp_path):
    from talent_core.api.loads import allowed_dirs

    a, b = tmp_path / "a", tmp_path / "b"
    assert allowed_dirs(f"{a}{os.pathsep}{b}{os.pathsep}") == [a.resolve(), b.resolve()]
    assert allowed_dirs("") == [] and allowed_dirs(" ") == []
