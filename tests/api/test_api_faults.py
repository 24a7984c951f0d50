"""Issue 44, the API's side: the key and the size of a request are checked before its body is
read, what a load job keeps is bounded and cleaned, inputs that would hold a model slot are
checked first, a full disk is a 507, server-side paths are checked when read, the docs are
public by decision (README says so), and the server's own paths stay in its log."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from api_helpers import api_settings, auth, wait_load

REPO = Path(__file__).resolve().parents[2]


def error_of(r, status: int) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    return r.json()["error"]


def _app(api_env, **extra):
    from talent_core.api.app import create_app

    return create_app(api_settings(api_env, **extra))


def _asgi(app, method: str, path: str, headers: dict[str, str], body_chunks: list[bytes]):
    """Call the ASGI app directly: (status, body, how many body chunks it read)."""
    read = 0
    sent: list[dict] = []
    chunks = list(body_chunks)

    async def receive():
        nonlocal read
        if chunks:
            read += 1
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        return {"type": "http.disconnect"}

    async def send(msg):
        sent.append(msg)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "root_path": "", "query_string": b"", "server": ("127.0.0.1", 80),
             "client": ("127.0.0.1", 1),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body or b"null"), read


# --- 6: the key and the size before the body ------------------------------------------------


def test_no_body_is_read_before_the_key_is_checked(api_env, api_keys):
    app = _app(api_env)
    big = [b"x" * 65536] * 64  # 4 MB offered, with and without a declared length
    for path, ctype in (("/v1/ask", "application/json"),
                        ("/v1/loads", "multipart/form-data; boundary=XB"),
                        ("/v1/chat/completions", "application/json"),
                        ("/v1/nowhere", "application/json")):
        for declared in (True, False):
            headers = {"content-type": ctype}
            if declared:
                headers["content-length"] = str(64 * 65536)
            status, body, read = _asgi(app, "POST", path, headers, big)
            assert status == 401 and read == 0, (path, declared, status, read)
            assert body["error"]["code"] == "unauthorized"
    # a read key may not upload: refused before the upload is read, too
    status, body, read = _asgi(app, "POST", "/v1/loads",
                               {**auth(api_keys["read"]), "content-length": str(64 * 65536),
                                "content-type": "multipart/form-data; boundary=XB"}, big)
    assert status == 403 and read == 0


def test_json_bodies_are_capped_before_they_are_read(api_env, api_keys):
    app = _app(api_env, api_max_body_kb=64)
    h = {**auth(api_keys["read"]), "content-type": "application/json"}
    chunks = [b"x" * 65536] * 4
    status, body, read = _asgi(app, "POST", "/v1/ask", {**h, "content-length": "262144"},
                               chunks)
    assert status == 413 and read == 0
    assert "64 KB" in body["error"]["message"] and "TALENT_API_MAX_BODY_KB" in body["error"][
        "message"]
    # no declared length: counted as it arrives and cut past the limit
    status, body, read = _asgi(app, "POST", "/v1/ask", h, list(chunks))
    assert status == 413 and read == 2, (status, read)
    # under the limit it is an ordinary request
    small = json.dumps({"question": "who directed [Inception]", "mode": "retrieval"})
    status, body, _ = _asgi(app, "POST", "/v1/ask", h, [small.encode()])
    assert status == 200, body


def test_healthz_and_the_docs_need_no_key_and_can_be_turned_off(api_env, api_keys):
    """README: every route but /healthz and the API docs needs a key (the docs describe the
    routes, they hold no data); TALENT_API_DOCS=false serves no docs."""
    from fastapi.testclient import TestClient

    readme = (REPO / "README.md").read_text()
    assert "/healthz" in readme and "TALENT_API_DOCS" in readme
    with TestClient(_app(api_env)) as c:
        for path in ("/healthz", "/docs", "/redoc", "/openapi.json"):
            assert c.get(path).status_code == 200, path
        assert error_of(c.get("/v1/stats"), 401)
    with TestClient(_app(api_env, api_docs=False)) as c:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert error_of(c.get(path), 401)  # no key: 401 before saying it is absent
            assert error_of(c.get(path, headers=auth(api_keys["read"])), 404)
        assert c.get("/healthz").status_code == 200


# --- 7, 16: rejects bounded; job folders cleaned --------------------------------------------


@pytest.fixture()
def own_tmp(tmp_path, monkeypatch):
    """The server's temporary folder: a fresh one per test."""
    import tempfile

    d = tmp_path / "servertmp"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return d


def test_rejects_are_bounded_and_the_job_folder_goes_when_it_ends(api_env, api_keys, own_tmp):
    from fastapi.testclient import TestClient

    bad = b"Rej Film|directed_by|Rej Person\n" + b"x\n" * 20_000  # 20,000 bad rows
    with TestClient(_app(api_env, api_max_rejects=50)) as c:
        r = c.post("/v1/loads", headers=auth(api_keys["write"]),
                   files={"file": ("bad_rows.txt", bad)},
                   data={"format": "metaqa", "on_error": "skip"})
        job = wait_load(c, r.json(), auth(api_keys["read"]))
        assert job["status"] == "done", job["error"]
        assert job["result"]["rejected"] == 20_000 and job["result"]["rejects_kept"] == 50
        rej = c.get(f"/v1/loads/{job['id']}/rejects", headers=auth(api_keys["read"]))
        lines = rej.text.strip().splitlines()
        assert len(lines) == 50 and json.loads(lines[0])["line"] == 2
        assert not list(own_tmp.glob("talent-api-load-*")), "the job's folder stayed"
        # all rows bad: the job fails, and its message names no server path
        r = c.post("/v1/loads", headers=auth(api_keys["write"]),
                   files={"file": ("all_bad.txt", b"x\n" * 10)},
                   data={"format": "metaqa", "on_error": "skip"})
        job = wait_load(c, r.json(), auth(api_keys["read"]))
        msg = job["error"]["message"]
        assert job["status"] == "failed" and str(own_tmp) not in msg, msg
        assert f"GET /v1/loads/{job['id']}/rejects" in msg and msg.startswith("all_bad.txt")


def test_a_killed_servers_job_folders_go_when_the_next_starts(api_env, own_tmp):
    from fastapi.testclient import TestClient

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = own_tmp / f"talent-api-load-{dead}-abc123"
    stale.mkdir()
    (stale / "kb.txt").write_bytes(b"x" * 1000)
    live = own_tmp / f"talent-api-load-{os.getppid()}-def456"  # a server still running
    live.mkdir()
    foreign = own_tmp / f"talent-api-load-{dead}-link"
    foreign.symlink_to(live)
    with TestClient(_app(api_env)):
        pass
    assert not stale.exists() and live.is_dir() and foreign.is_symlink()


# --- 8, 17, 18: inputs checked before they hold anything --------------------------------


@pytest.mark.parametrize("topics,why", [
    (["Inception\x1b[31m"], "control character"),
    (["\ud800"], "not valid UTF-8"),
    (["x" * 5000], "characters long"),
    ([f"name {i}" for i in range(33)], "the maximum is 32"),
])
def test_topic_entities_are_checked_like_the_question(client, api_keys, topics, why):
    for route in ("/v1/ask", "/v1/retrieve"):
        body = {"question": "who directed it", "topic_entities": topics, "mode": "retrieval"}
        if route == "/v1/retrieve":
            body.pop("mode")
        r = client.post(route, headers={**auth(api_keys["read"]),
                                        "content-type": "application/json"},
                        content=json.dumps(body, ensure_ascii=True))
        err = error_of(r, 422)
        assert err["field"] == "topic_entities" and why in err["message"], err


def test_the_pipeline_checks_topic_entities_too(tmp_path):
    from talent_core.errors import TextInputError
    from talent_core.text import check_topics

    assert check_topics(["  Inception "], 4) == ["Inception"]
    with pytest.raises(TextInputError, match="topic entity 2: the name contains a NUL"):
        check_topics(["ok", "a\x00b"], 4)


def test_a_stance_graph_is_checked_before_a_model_slot(client, api_keys):
    rt = client.app.state.runtime
    before = rt.llm.admitted
    h = auth(api_keys["read"])
    big = "".join(f"(c{i}; is a; d{i})" for i in range(201))
    t0 = time.perf_counter()
    err = error_of(client.post("/v1/stance", headers=h, json={
        "arg1": "a", "arg2": "b", "graph": big}), 422)
    assert err["field"] == "graph" and "201 triples; the maximum is 200" in err["message"]
    assert time.perf_counter() - t0 < 5
    err = error_of(client.post("/v1/stance", headers=h, json={
        "arg1": "a", "arg2": "b", "graph": "(cats; is a\x1b[2J; pets)"}), 422)
    assert err["field"] == "graph" and "control character U+001B" in err["message"]
    err = error_of(client.post("/v1/stance", headers=h, json={
        "arg1": "a\x07", "arg2": "b"}), 422)
    assert err["field"] == "arg1"
    assert rt.llm.admitted == before


@pytest.mark.parametrize("content", [
    [{"type": "text", "text": {"not": "text"}}],
    [{"type": "text", "text": 42}],
    [{"type": "text"}],
])
def test_a_chat_text_part_must_be_text(client, api_keys, content):
    r = client.post("/v1/chat/completions", headers=auth(api_keys["read"]),
                    json={"messages": [{"role": "user", "content": content}]})
    assert "text part's text must be a string" in error_of(r, 422)["message"]


# --- 11: upload names -----------------------------------------------------------------------


def test_upload_names_that_are_no_file_names_are_refused(client, api_keys):
    for name in ("..", ".", "kb.txt/", "dir\\", "   "):
        r = client.post("/v1/loads", headers=auth(api_keys["write"]),
                        files={"file": (name, b"A|rel|B\n")}, data={"format": "metaqa"})
        err = error_of(r, 422)
        assert err["field"] == "file" and "not a file name" in err["message"], (name, err)


def test_a_renamed_upload_and_a_source_from_another_file_are_told(client, api_keys):
    h = auth(api_keys["write"])
    r = client.post("/v1/loads", headers=h, files={"file": ("names kb.txt", b"N1|rel|N2\n")},
                    data={"format": "metaqa"})
    job = wait_load(client, r.json(), h)
    assert job["status"] == "done" and job["source"] == "names_kb.txt"
    assert any("'names kb.txt'" in n and "'names_kb.txt'" in n for n in job["notes"]), job
    # another file under the same name adds to that source: the client is told
    r = client.post("/v1/loads", headers=h, files={"file": ("names_kb.txt", b"N3|rel|N4\n")},
                    data={"format": "metaqa"})
    job = wait_load(client, r.json(), h)
    assert job["status"] == "done"
    assert any("loaded from another file" in n for n in job["notes"]), job
    assert any("loaded from another file" in n for n in job["result"]["warnings"])


# --- 13: a full disk ------------------------------------------------------------------------


def _enospc(*_a, **_k):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_temporary_folder_is_a_507_and_keeps_nothing(api_env, api_keys, own_tmp,
                                                            monkeypatch):
    from fastapi.testclient import TestClient
    from starlette.datastructures import UploadFile

    h = auth(api_keys["write"])
    with TestClient(_app(api_env)) as c:
        # the form's spooled file cannot be written (FastAPI called it 400)
        monkeypatch.setattr(UploadFile, "write", lambda self, data: _enospc_async())
        r = c.post("/v1/loads", headers=h, files={"file": ("kb.txt", b"A|r|B\n" * 300_000)},
                   data={"format": "metaqa"})
        err = error_of(r, 507)
        assert err["code"] == "disk_full" and "disk is full" in err["message"]
        monkeypatch.undo()
        monkeypatch.setenv("TMPDIR", str(own_tmp))
        import tempfile

        monkeypatch.setattr(tempfile, "tempdir", None)
        # the copy into the job's folder cannot be written (it was a 500)
        import talent_core.api.loads as loads

        real_open = Path.open

        def full_open(self, mode="r", *a, **k):
            if "w" in mode and self.parent.name.startswith("talent-api-load-"):
                _enospc()
            return real_open(self, mode, *a, **k)

        monkeypatch.setattr(loads.Path, "open", full_open)
        r = c.post("/v1/loads", headers=h, files={"file": ("kb.txt", b"A|r|B\n" * 1000)},
                   data={"format": "metaqa"})
        assert error_of(r, 507)["code"] == "disk_full"
        assert not list(own_tmp.glob("talent-api-load-*"))


async def _enospc_async():
    _enospc()


# --- 14, 15: server-side paths --------------------------------------------------------------


def test_a_nul_in_a_path_load_is_a_422(api_env, api_keys, tmp_path):
    from fastapi.testclient import TestClient

    with TestClient(_app(api_env, api_load_dirs=str(tmp_path))) as c:
        r = c.post("/v1/loads", headers=auth(api_keys["write"]),
                   json={"path": str(tmp_path / "kb\u0000.txt"), "format": "metaqa"})
        err = error_of(r, 422)
        assert err["field"] == "path" and "NUL" in err["message"]


def test_a_path_load_is_checked_again_when_its_job_reads_it(api_env, api_keys, tmp_path,
                                                            monkeypatch):
    """A link under an allowed folder, swapped to a file outside it after the load was
    queued: the job refuses it and loads nothing."""
    from fastapi.testclient import TestClient

    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "kb.txt").write_text("Swap Film|directed_by|Swap Person\n")
    (outside / "secret.txt").write_text("Secret Film|directed_by|Secret Person\n")
    link = allowed / "link.txt"
    link.symlink_to(allowed / "kb.txt")
    app = _app(api_env, api_load_dirs=str(allowed))
    queued = []
    monkeypatch.setattr(app.state.runtime.loads, "submit", queued.append)
    with TestClient(app) as c:
        r = c.post("/v1/loads", headers=auth(api_keys["write"]),
                   json={"path": str(link), "format": "metaqa"})
        assert r.status_code == 202, r.text
        link.unlink()
        link.symlink_to(outside / "secret.txt")
        (job,) = queued
        app.state.runtime.loads._one(job)
        msg = job.error[1] if job.error else ""
        assert job.status == "failed" and ("no longer" in msg or "not under a folder" in msg)
        found = c.get("/v1/entities", params={"q": "Secret Person"},
                      headers=auth(api_keys["read"])).json()
        assert not any(e["name"] == "Secret Person" for e in found["entities"])


# --- 4: the server's paths stay in its log --------------------------------------------------


def test_a_misconfigured_server_says_so_without_its_paths(api_env, api_keys, caplog):
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app
    from talent_core.errors import EmbeddedServerError

    class Broken:
        def stats(self):
            raise EmbeddedServerError("data dir /srv/secret/talent is owned by user x")

        def close(self):
            pass

    app = create_app(api_settings(api_env), pipeline_factory=Broken)
    with TestClient(app) as c:
        r = c.get("/v1/stats", headers=auth(api_keys["read"]))
        err = error_of(r, 503)
        assert "/srv/secret" not in r.text and "misconfigured" in err["message"]
    assert "/srv/secret/talent" in caplog.text


def test_the_keys_file_path_is_not_told_to_a_client(api_env, api_keys, tmp_path, caplog):
    from fastapi.testclient import TestClient

    data = tmp_path / "d"
    shutil.copytree(api_env["TALENT_DATA_DIR"], data, ignore=shutil.ignore_patterns(
        "falkordb.*", "appendonlydir", "tiny", "cache"))
    (data / "api_keys.json").chmod(0o666)
    with TestClient(_app({**api_env, "TALENT_DATA_DIR": str(data)})) as c:
        r = c.get("/v1/stats", headers=auth("tk_0123abcd_" + "x" * 43))
        err = error_of(r, 503)
        assert err["code"] == "keys_unreadable" and str(data) not in r.text
    assert str(data / "api_keys.json") in caplog.text
