"""The HTTP API in-process (fastapi TestClient) on the toy KG: auth, error bodies, the
shapes of every endpoint, the model queue's 429, the upload limit's 413, a load job."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from api_helpers import STAGES, api_settings, auth, sse_events, wait_load

ASK_JSON_KEYS = {"question", "answer", "raw", "method", "candidate", "selected",
                 "out_of_candidate", "edges", "decode", "ranked", "retriever_ranked", "frozen",
                 "generator", "plan", "planner", "plan_confidence", "plan_runner_up",
                 "plan_notice", "plan_joint", "answer_path", "links", "reading", "turn",
                 "not_in_kg", "operation", "backend", "evidence", "timings_ms"}
Q = {"question": "who directed Gravity", "topic_entities": ["Gravity"]}


def error_of(r, status: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"])
    return body["error"]


def test_healthz_needs_no_key_and_everything_else_does(client):
    assert client.get("/healthz").json()["status"] == "ok"
    for method, url in [("get", "/readyz"), ("get", "/v1/stats"), ("post", "/v1/ask"),
                        ("post", "/v1/retrieve"), ("get", "/v1/entities?q=x"),
                        ("post", "/v1/loads")]:
        r = getattr(client, method)(url)
        assert error_of(r, 401)["code"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
    assert "invalid" in error_of(client.get("/v1/stats", headers=auth("tk_0000000a_" + "x" * 43)),
                                 401)["message"]
    assert error_of(client.get("/v1/stats", headers={"Authorization": "Basic abc"}), 401)


def test_openapi_docs_describe_every_endpoint(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/ask", "/v1/retrieve", "/v1/entities", "/v1/entities/{eid}/neighbours",
            "/v1/stats", "/v1/loads", "/v1/loads/{job_id}", "/v1/chat/completions",
            "/healthz", "/readyz"} <= set(paths)
    assert client.get("/docs").status_code == 200


def test_read_key_browses_but_cannot_load(client, api_keys):
    r = client.get("/v1/stats", headers=auth(api_keys["read"]))
    assert r.status_code == 200 and r.json()["triples"] > 0
    r = client.post("/v1/loads", headers=auth(api_keys["read"]),
                    files={"file": ("kb.txt", b"A|rel|B\n")})
    err = error_of(r, 403)
    assert err["code"] == "forbidden" and "write" in err["message"]
    ready = client.get("/readyz", headers=auth(api_keys["read"])).json()
    assert ready["ready"] and ready["llm"]["slots"] >= 1


def test_retrieve_is_the_cli_shape(client, api_keys):
    r = client.post("/v1/retrieve", headers=auth(api_keys["read"]), json=Q)
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(out) == {"method", "seeds", "nodes", "edges", "truncated", "timings_ms"}
    names = {n["name"] for n in out["nodes"]}
    assert "Gravity" in names and len(names) > 1


@pytest.mark.parametrize(("body", "field"), [
    ({**Q, "colour": "red"}, "colour"),
    ({"question": ""}, "question"),
    ({"question": "a\x07b"}, "question"),
    ({"topic_entities": ["x"]}, "question"),
    ({**Q, "retrieval": {"k_nodes": -3}}, "retrieval.k_nodes"),
    ({**Q, "retrieval": {"bogus": 1}}, "retrieval.bogus"),
    ({**Q, "decode": "beam"}, "decode"),
])
def test_422_names_the_bad_field(client, api_keys, body, field):
    for url in ("/v1/retrieve", "/v1/ask"):
        if url == "/v1/retrieve" and "decode" in body:
            continue
        err = error_of(client.post(url, headers=auth(api_keys["read"]), json=body), 422)
        assert err["field"] == field, err
        assert err["code"] == "invalid_request"


def test_ask_json_is_the_talent_ask_json_shape(client, api_keys):
    r = client.post("/v1/ask", headers=auth(api_keys["read"]), json=Q)
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(out) == ASK_JSON_KEYS
    assert out["candidate"] and out["frozen"] == ["retriever", "generator"]
    assert {"retriever", "generator"} <= set(out["timings_ms"])
    assert out["backend"]["backend"] == "local" and out["backend"]["ranking"] == "logprobs"


def test_ask_answers_502_when_the_language_model_server_is_down(api_env, api_keys):
    """TALENT_LLM_BACKEND=openai with nobody at the URL: 502 and the reason, in one line
    (the same against a real server: tests/e2e/test_server_backend_slow.py)."""
    from api_helpers import free_port
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    down = f"http://127.0.0.1:{free_port()}/v1"
    with TestClient(create_app(api_settings(api_env, llm_backend="openai", llm_base_url=down,
                                            llm_retries=0))) as c:
        err = error_of(c.post("/v1/ask", headers=auth(api_keys["read"]), json=Q), 502)
        assert err["code"] == "bad_gateway" and down in err["message"]
        assert "cannot connect" in err["message"] and "\n" not in err["message"]
        r = c.post("/v1/ask", headers=auth(api_keys["read"]), json={**Q, "stream": True})
        events = sse_events(r.text)
        assert events[-1][0] == "error" and events[-1][1]["error"]["code"] == "bad_gateway"


def test_ask_answers_an_operator_from_the_store(api_env, api_keys):
    """A count and a yes/no over HTTP (the bundled planner plans the set): typed answers,
    the store query and its parameters in `operation`; without a planner, a notice and the
    plain list."""
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    kb = (Path(__file__).resolve().parents[1] / "fixtures" / "metaqa" / "kb.txt").read_text()
    films = {h for h, r, t in (x.split("|") for x in kb.splitlines())
             if r == "directed_by" and t == "Kathryn Bigelow"}
    count = {"question": "how many movies did [Kathryn Bigelow] direct", "decode": "ranked"}
    with TestClient(create_app(api_settings(api_env, planner="bundled"))) as c:
        out = c.post("/v1/ask", headers=auth(api_keys["read"]), json=count).json()
        assert out["answer"] == [str(len(films))]
        assert out["operation"]["answer_type"] == "number"
        assert out["operation"]["queries"][0]["params"]["rel"] == "directed_by"
        out = c.post("/v1/ask", headers=auth(api_keys["read"]), json={
            "question": "did [Kathryn Bigelow] direct [Memento]", "decode": "ranked"}).json()
        assert out["answer"] == ["no"] and out["operation"]["op"] == "exists"
    with TestClient(create_app(api_settings(api_env))) as c:  # --planner none
        out = c.post("/v1/ask", headers=auth(api_keys["read"]), json=count).json()
        assert "planner" in out["operation"]["notice"] and out["operation"]["answer"] == []


def test_streamed_ask_sends_the_stages_in_order(client, api_keys):
    with client.stream("POST", "/v1/ask", headers=auth(api_keys["read"]),
                       json={**Q, "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.read().decode())
    assert [e for e, _ in events] == STAGES
    data = dict(events)
    assert any(s["name"] == "Gravity" for s in data["seeds"]["seeds"])
    assert data["candidate"]["nodes"] and "answer" in data["answer"]
    assert "plan_notice" in data["answer"]  # the notice once the answer's path is known
    assert "generator" in data["done"]["timings_ms"]
    assert data["done"]["server_ms"]["retrieved"] <= data["done"]["server_ms"]["answered"]
    rt = client.app.state.runtime
    assert rt.llm.admitted == 0 and rt.llm.running == 0  # the slot was given back
    # with a view: the same stages and the view the non-streamed document carries
    with client.stream("POST", "/v1/ask", headers=auth(api_keys["read"]),
                       json={**Q, "stream": True, "view": "ui"}) as r:
        viewed = sse_events(r.read().decode())
    assert [e for e, _ in viewed] == STAGES[:-1] + ["view", "done"]
    whole = client.post("/v1/ask", headers=auth(api_keys["read"]), json={**Q, "view": "ui"})
    view, want = dict(viewed)["view"], whole.json()["talent_view"]
    assert set(view) == set(want) and view["answer"]["answer"] == want["answer"]["answer"]
    assert view["evidence"] == want["evidence"] and view["topics"] == want["topics"]


def test_full_model_queue_is_a_429(client, api_keys):
    rt = client.app.state.runtime
    held = [rt.llm.admit() for _ in range(rt.llm.slots + rt.llm.queue)]
    try:
        for body in (Q, {**Q, "stream": True}):
            r = client.post("/v1/ask", headers=auth(api_keys["read"]), json=body)
            assert error_of(r, 429)["code"] == "busy" and r.headers["retry-after"]
        # retrieval does not queue behind the models
        assert client.post("/v1/retrieve", headers=auth(api_keys["read"]),
                           json=Q).status_code == 200
    finally:
        for s in held:
            s.release()
    assert rt.llm.admitted == 0


def test_entities_and_neighbours_by_opaque_id(client, api_keys):
    h = auth(api_keys["read"])
    out = client.get("/v1/entities", params={"q": "gravity"}, headers=h).json()
    hit = next(e for e in out["entities"] if e["name"] == "Gravity")
    assert "/" not in hit["id"] and "=" not in hit["id"]
    nb = client.get(f"/v1/entities/{hit['id']}/neighbours", headers=h)
    assert nb.status_code == 200, nb.text
    nb = nb.json()
    assert nb["entity"]["name"] == "Gravity" and len(nb["nodes"]) > 1
    ids = {n["id"] for n in nb["nodes"]}
    assert all(e["src"] in ids and e["dst"] in ids for e in nb["edges"])
    assert error_of(client.get("/v1/entities/%21%21/neighbours", headers=h), 404)
    from talent_core.api.schemas import entity_token

    assert error_of(client.get(f"/v1/entities/{entity_token('no such id')}/neighbours",
                               headers=h), 404)
    assert error_of(client.get("/v1/entities", params={"q": ""}, headers=h), 422)["field"] == "q"


def test_upload_over_the_limit_is_413_and_leaves_nothing(api_env, api_keys, tmp_path,
                                                         monkeypatch):
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    app = create_app(api_settings(api_env, max_upload_mb=1))
    with TestClient(app) as c:
        big = b"A|rel|B\n" * (1024 * 1024 // 8 + 20_000)
        r = c.post("/v1/loads", headers=auth(api_keys["write"]),
                   files={"file": ("big.txt", big)}, data={"format": "metaqa"})
        err = error_of(r, 413)
        assert "1 MB" in err["message"]
        # the same without a Content-Length (chunked): refused as it arrives
        def chunked():
            yield (b'--XB\r\nContent-Disposition: form-data; name="file"; '
                   b'filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n')
            for _ in range(20):
                yield b"A|rel|B\n" * 10_000
            yield b"\r\n--XB--\r\n"

        r = c.post("/v1/loads", headers={**auth(api_keys["write"]),
                                         "Content-Type": "multipart/form-data; boundary=XB"},
                   content=chunked())
        assert "content-length" not in {k.lower() for k in r.request.headers}
        assert error_of(r, 413)["code"] == "too_large"
        assert not list(tmp_path.glob("talent-api-load-*"))
        assert not app.state.runtime.loads.jobs
        # a small upload in the same chunked form is accepted
        def small():
            yield (b'--XB\r\nContent-Disposition: form-data; name="file"; '
                   b'filename="small.txt"\r\nContent-Type: text/plain\r\n\r\n')
            yield b"Chunk Film|directed_by|Chunk Person\n"
            yield (b'\r\n--XB\r\nContent-Disposition: form-data; name="format"\r\n\r\n'
                   b"metaqa\r\n--XB--\r\n")

        r = c.post("/v1/loads", headers={**auth(api_keys["write"]),
                                         "Content-Type": "multipart/form-data; boundary=XB"},
                   content=small())
        assert r.status_code == 202, r.text
        job = wait_load(c, r.json(), auth(api_keys["read"]))
        assert job["status"] == "done" and job["result"]["loaded"] == 1, job


def test_load_job_progress_to_the_end_and_rejects(client, api_keys):
    rows = ["Api Film One|directed_by|Api Person", "Api Film One|release_year|2031",
            "a line without pipes", "Api Film Two|starred_actors|Api Person"]
    r = client.post("/v1/loads", headers=auth(api_keys["write"]),
                    files={"file": ("extra_kb.txt", ("\n".join(rows) + "\n").encode())},
                    data={"format": "metaqa", "on_error": "skip"})
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["status"] in ("queued", "running", "done")
    h = auth(api_keys["read"])
    job = wait_load(client, job, h)
    assert job["status"] == "done", job
    assert job["result"]["rows_read"] == 4 and job["result"]["rejected"] == 1
    assert job["result"]["loaded"] == 3 and job["progress"]["triples"] == 3
    assert job["rejects"]
    rej = client.get(f"/v1/loads/{job['id']}/rejects", headers=h)
    assert rej.status_code == 200 and len(rej.text.strip().splitlines()) == 1
    assert error_of(client.get("/v1/loads/nope", headers=h), 404)
    for data, field in (({"format": "csv"}, "format"), ({}, "format"),
                        ({"format": "metaqa", "on_error": "maybe"}, "on_error")):
        r = client.post("/v1/loads", headers=auth(api_keys["write"]), data=data,
                        files={"file": ("upload.txt", b"A|rel|B\n")})
        assert error_of(r, 422)["field"] == field, r.text
    found = client.get("/v1/entities", params={"q": "Api Person"}, headers=h).json()
    assert any(e["name"] == "Api Person" for e in found["entities"])


def test_chat_completion_shape_and_errors(client, api_keys):
    h = auth(api_keys["read"])
    r = client.post("/v1/chat/completions", headers=h, json={
        "model": "talent", "temperature": 0.2,
        "messages": [{"role": "user", "content": [{"type": "text",
                                                   "text": "who directed [Gravity]"}]}]})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["object"] == "chat.completion" and out["choices"][0]["message"]["role"] == \
        "assistant"
    assert set(out["talent"]) == ASK_JSON_KEYS
    err = error_of(client.post("/v1/chat/completions", headers=h, json={
        "messages": [{"role": "system", "content": "x"}]}), 422)
    assert err["field"] == "messages"
    assert error_of(client.post("/v1/chat/completions", headers=h,
                                json={"messages": []}), 422)["field"] == "messages"


def test_an_unexpected_failure_is_a_json_500(api_env, api_keys):
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    def broken():
        raise RuntimeError("store exploded")

    app = create_app(api_settings(api_env), pipeline_factory=broken)
    with TestClient(app, raise_server_exceptions=False) as c:
        err = error_of(c.get("/v1/stats", headers=auth(api_keys["read"])), 500)
        assert err["code"] == "internal" and "RuntimeError" in err["message"]
        assert "store exploded" not in err["message"]  # details stay in the server log
        assert error_of(c.get("/readyz", headers=auth(api_keys["read"])), 503)


def test_the_models_answer_in_a_child_process_that_restarts(client, api_keys):
    """The default server keeps its language models in a child process per slot. One found
    dead (an out-of-memory kill between asks) is started again for the next ask; one that
    dies while answering fails that ask with 503, and the next ask is answered."""
    import os
    import signal
    import threading

    h = auth(api_keys["read"])
    assert client.post("/v1/ask", json=Q, headers=h).status_code == 200
    rt = client.app.state.runtime
    assert rt.models.process and client.get("/readyz", headers=h).json()["models_loaded"]
    (first,) = rt.models.children.values()
    assert first.is_alive() and first.pid != os.getpid()
    os.kill(first.pid, signal.SIGKILL)
    first.join(10)
    got: dict = {}
    asking = threading.Thread(target=lambda: got.update(r=client.post("/v1/ask", json=Q,
                                                                       headers=h)))
    asking.start()
    deadline = time.time() + 60  # a new child starts and loads the models: kill it then
    while not (rt.llm.running and rt.models.children["talent-model-0"].pid != first.pid):
        assert time.time() < deadline
        time.sleep(0.01)
    second = rt.models.children["talent-model-0"]
    os.kill(second.pid, signal.SIGKILL)
    asking.join(60)
    assert error_of(got["r"], 503)["code"] == "unavailable"
    assert "restarts" in got["r"].json()["error"]["message"]
    r = client.post("/v1/ask", json=Q, headers=h)
    assert r.status_code == 200 and r.json()["answer"]
    third = rt.models.children["talent-model-0"]
    assert third.pid not in (first.pid, second.pid) and third.is_alive()
    assert not rt.llm.admitted and not rt.llm.running  # every slot given back


STANCE = {"arg1": "Cannabis should be legal.",
          "arg2": "It's not a bad thing to make marijuana more available.",
          "graph": "(cannabis; synonym of; marijuana)(legal; causes; more available)"}


def test_stance_endpoint_answers_the_task_and_checks_its_input(client, api_keys):
    """POST /v1/stance: `talent ask --stance --json`'s shape through the model queue; bad
    graph text and an empty argument are 422s naming the problem; a key is needed."""
    from talent_core.stance import StanceAnswer

    h = auth(api_keys["read"])
    r = client.post("/v1/stance", headers=h, json=STANCE)
    assert r.status_code == 200, r.text
    out = StanceAnswer.model_validate(r.json())  # the shape, the full answer left out
    assert out.label in ("support", "counter") and out.label == out.scores[0].label
    assert out.graph_source == "given" and out.graph_nodes == 4
    assert "answer" not in r.json() and {"model_queue", "model_slot"} <= set(out.timings_ms)
    no_graph = client.post("/v1/stance", headers=h, json={**STANCE, "graph": None,
                                                           "use_kg": False}).json()
    assert no_graph["graph_source"] == "none"
    assert any("without a graph" in n for n in no_graph["notes"])
    bad = error_of(client.post("/v1/stance", headers=h, json={**STANCE, "graph": "(a; b)"}), 422)
    assert bad["message"].startswith("graph:")
    assert error_of(client.post("/v1/stance", headers=h, json={**STANCE, "arg2": ""}),
                    422)["field"] == "arg2"
    assert error_of(client.post("/v1/stance", headers=h, json={**STANCE, "mode": "x"}),
                    422)["field"] == "mode"
    assert error_of(client.post("/v1/stance", json=STANCE), 401)


def test_a_load_is_cancelled_queued_or_running(api_env, api_keys):
    """DELETE /v1/loads/{id}: a queued load leaves the queue with nothing written; a
    running one stops at a batch boundary with the batches before it complete; an ended
    one is a 409 (`talent load`'s and the Load page's Cancel, over HTTP)."""
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    w, h = auth(api_keys["write"]), auth(api_keys["read"])
    pool = [f"Cancel Film {i}" for i in range(60)]
    rows = "".join(f"{a}|rel{k}|{b}\n" for k in range(2) for a in pool for b in pool)  # 7,200
    with TestClient(create_app(api_settings(api_env, batch_size=100))) as c:
        first = c.post("/v1/loads", headers=w, data={"format": "metaqa"},
                       files={"file": ("cancel_big_kb.txt", rows.encode())}).json()
        second = c.post("/v1/loads", headers=w, data={"format": "metaqa"},
                        files={"file": ("cancel_queued_kb.txt", b"Queued A|r|Queued B\n")})
        second = second.json()
        r = c.delete(f"/v1/loads/{second['id']}", headers=h)
        assert error_of(r, 403)  # cancelling is a write
        r = c.delete(f"/v1/loads/{second['id']}", headers=w)
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
        deadline = time.time() + 60
        # once its first batch is committed
        while (job := c.get(f"/v1/loads/{first['id']}", headers=h).json())[
                "progress"]["triples"] == 0:
            assert time.time() < deadline and job["status"] in ("queued", "running"), job
            time.sleep(0.01)
        assert job["status"] == "running", job
        committed = job["progress"]["triples"]
        assert c.delete(f"/v1/loads/{first['id']}", headers=w).status_code == 200
        while job["status"] in ("queued", "running"):
            assert time.time() < deadline, job
            time.sleep(0.05)
            job = c.get(f"/v1/loads/{first['id']}", headers=h).json()
        assert job["status"] == "cancelled" and job["result"]["cancelled"], job
        loaded = job["result"]["loaded"]
        assert committed <= loaded < 7200 and loaded % 100 == 0, job
        assert error_of(c.delete(f"/v1/loads/{first['id']}", headers=w), 409)
        sources = {s["name"]: s for s in c.get("/v1/sources", headers=h).json()["sources"]}
        assert "cancel_queued_kb.txt" not in sources
        assert sources["cancel_big_kb.txt"]["triples"] == loaded
        # the store as it was for the other tests
        assert c.delete("/v1/sources/cancel_big_kb.txt", headers=w).status_code == 200


def test_load_options_over_http(client, api_keys):
    """`talent load`'s options on POST /v1/loads: a dry run of the first rows of a file with
    its own delimiter writes nothing; a replace cannot be a dry run."""
    w, h = auth(api_keys["write"]), auth(api_keys["read"])
    before = client.get("/v1/stats", headers=h).json()
    rows = "subj;pred;obj\n" + "".join(f"Opt Film {i};directed_by;Opt Person {i}\n"
                                        for i in range(10))
    r = client.post("/v1/loads", headers=w, files={"file": ("opts.csv", rows.encode())},
                    data={"format": "triples", "delimiter": ";",
                          "columns": "head=subj,relation=pred,tail=obj",
                          "limit": "4", "dry_run": "true"})
    assert r.status_code == 202, r.text
    job = wait_load(client, r.json(), h)
    assert job["status"] == "done", job
    assert job["result"]["dry_run"] and job["result"]["rows_read"] == 4
    assert job["result"]["loaded"] == 4 and job["result"]["rejected"] == 0
    assert client.get("/v1/stats", headers=h).json() == before
    r = client.post("/v1/loads", headers=w, files={"file": ("opts.csv", rows.encode())},
                    data={"format": "triples", "delimiter": ";", "dry_run": "true",
                          "replace": "kb.txt"})
    assert error_of(r, 422)["field"] == "dry_run"
    r = client.post("/v1/loads", headers=w, files={"file": ("opts.csv", rows.encode())},
                    data={"format": "triples", "limit": "0"})
    assert error_of(r, 422)["field"] == "limit"


def test_a_follow_up_over_the_api_sends_back_the_turn(client, api_keys):
    """/v1/ask's ``turn`` sent back in ``history`` anchors a follow-up; what a history names
    is read again from the KG (an unknown id dropped, the KG's name shown)."""
    h = auth(api_keys["read"])
    first = client.post("/v1/ask", headers=h, json={
        "question": "which films did [Keanu Reeves] star in", "mode": "retrieval"}).json()
    r = client.post("/v1/ask", headers=h, json={
        "question": "where was he born", "mode": "retrieval", "history": [first["turn"]]})
    assert r.status_code == 200, r.text
    reading = r.json()["reading"]
    assert reading["source"] == "topic" and reading["entities"][0]["id"] == "Keanu Reeves"
    made_up = {"question": "q", "answers": [{"id": "The Matrix", "name": "<i>x</i>"},
                                            {"id": "John Wick", "name": "y"},
                                            {"id": "nothing such", "name": "z"}]}
    out = client.post("/v1/ask", headers=h, json={
        "question": "who directed them", "mode": "retrieval", "history": [made_up]}).json()
    assert out["reading"]["entities"] == [{"id": "The Matrix", "name": "The Matrix"},
                                          {"id": "John Wick", "name": "John Wick"}]
    assert {n["id"] for n in out["candidate"] if n["seed"]} >= {"The Matrix", "John Wick"}
    plain = client.post("/v1/ask", headers=h, json={
        "question": "who directed them", "mode": "retrieval"}).json()
    assert plain["reading"] is None
    err = error_of(client.post("/v1/ask", headers=h, json={
        "question": "who directed them", "history": [{"question": "q"}] * 21}), 422)
    assert err["field"].startswith("history")


def test_chat_reads_a_follow_up_from_the_messages(client, api_keys):
    r = client.post("/v1/chat/completions", headers=auth(api_keys["read"]), json={
        "model": "talent", "messages": [
            {"role": "user", "content": "which films did [Keanu Reeves] star in"},
            {"role": "assistant", "content": "The Matrix | John Wick\n(note: x)"},
            {"role": "user", "content": "who directed them?"}]})
    assert r.status_code == 200, r.text
    out = r.json()
    assert {e["id"] for e in out["talent"]["reading"]["entities"]} == {"The Matrix",
                                                                      "John Wick"}
    assert "(reading 'them' as the 2 answers above)" in out["choices"][0]["message"]["content"]


def test_a_vectors_later_load_that_fails_fills_the_batches_it_committed(
        api_env, api_keys, monkeypatch):
    """A `vectors=later` load stopped by a bad row keeps the batches committed before it
    (as any load): their names get the fill behind too (none started before), and a load
    that fails before committing anything starts none."""
    from fastapi.testclient import TestClient

    import talent_core.loaders.vectors as vectors
    from talent_core.api.app import create_app

    started: list[object] = []
    monkeypatch.setattr(vectors, "fill_in_background",
                        lambda settings: (started.append(settings) or 4343,
                                          Path("vectors.log")))
    w, h = auth(api_keys["write"]), auth(api_keys["read"])
    good = "head\trelation\ttail\n" + "".join(
        f"Failing Film {i}\tdirected_by\tFailing Person {i}\n" for i in range(4))
    with TestClient(create_app(api_settings(api_env, batch_size=2))) as c:
        for rows, fills in ((good + "Failing Film 9\tdirected_by\n", 1),  # row 6 is bad
                            ("head\trelation\ttail\nFailing Film 8\tdirected_by\n", 0)):
            r = c.post("/v1/loads", headers=w, files={"file": ("failing_kb.txt", rows.encode())},
                       data={"format": "triples", "vectors": "later"})
            assert r.status_code == 202, r.text
            job = wait_load(c, r.json(), h)
            assert job["status"] == "failed" and "failing_kb.txt:" in job["error"]["message"]
            assert len(started) == fills, {k: v for k, v in job.items() if k != "notes"}
            assert any("pid 4343" in n for n in job["notes"]) == bool(fills), job["notes"]
            started.clear()
        stats = c.get("/v1/stats", headers=h).json()
        assert stats["entities"] > stats["entities_with_embedding"]  # the 8 names wait
        assert c.delete("/v1/sources/failing_kb.txt", headers=w).status_code == 200


def test_a_load_with_its_vectors_later_answers_at_once_and_starts_the_fill(
        client, api_keys, monkeypatch):
    """`vectors=later` (the Load page's "answer at once"): the graph is written without its
    names' vectors, the job starts the fill behind and says so in its notes; a bad value is
    a 422 naming the field."""
    import talent_core.loaders.vectors as vectors

    started: list[object] = []
    monkeypatch.setattr(vectors, "fill_in_background",
                        lambda settings: (started.append(settings) or 4242,
                                          Path("vectors.log")))
    w, h = auth(api_keys["write"]), auth(api_keys["read"])
    before = client.get("/v1/stats", headers=h).json()
    rows = "head\trelation\ttail\n" + "".join(
        f"Later Film {i}\tdirected_by\tLater Person {i}\n" for i in range(5))
    r = client.post("/v1/loads", headers=w, files={"file": ("later_kb.txt", rows.encode())},
                    data={"format": "triples", "vectors": "later"})
    assert r.status_code == 202, r.text
    job = wait_load(client, r.json(), h)
    assert job["status"] == "done" and job["result"]["loaded"] == 5, job.get("error")
    after = client.get("/v1/stats", headers=h).json()
    assert after["entities"] == before["entities"] + 10
    assert after["entities_with_embedding"] == before["entities_with_embedding"]
    assert len(started) == 1
    assert any(n.startswith("entity vectors: embedding 10 of") and "pid 4242" in n
               for n in job["notes"]), job["notes"]
    r = client.post("/v1/loads", headers=w, files={"file": ("x.txt", rows.encode())},
                    data={"format": "triples", "vectors": "soon"})
    assert error_of(r, 422)["field"] == "vectors"
    assert client.delete("/v1/sources/later_kb.txt", headers=w).status_code == 200
    assert client.get("/v1/stats", headers=h).json() == before
