"""A real `talent serve` process on the toy KG with the tiny model: Server-Sent Events read
by a real HTTP client (httpx) in stage order, keys enforced over the wire, and a client that
disconnects mid-stream gives its model slot back."""

from __future__ import annotations

import time

import pytest
from api_helpers import STAGES, auth, serving, sse_events

httpx = pytest.importorskip("httpx")
Q = {"question": "who directed Gravity", "topic_entities": ["Gravity"]}


@pytest.fixture(scope="module")
def server(api_env, api_keys, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with serving({**api_env, "TALENT_MAX_UPLOAD_MB": "1"}, log) as (base, _proc):
        yield base


def test_keys_are_required_over_the_wire(server, api_keys):
    r = httpx.get(server + "/v1/stats")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = httpx.get(server + "/v1/stats", headers=auth(api_keys["read"]))
    assert r.status_code == 200 and r.json()["triples"] > 0


def test_refusals_over_the_wire(server, api_keys):
    r = httpx.post(server + "/v1/loads", headers=auth(api_keys["read"]),
                   files={"file": ("kb.txt", b"A|rel|B\n")})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    r = httpx.post(server + "/v1/loads", headers=auth(api_keys["write"]),
                   files={"file": ("kb.txt", b"A|rel|B\n" * 140_000)})  # 1.1 MB > 1 MB
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
    r = httpx.post(server + "/v1/ask", headers=auth(api_keys["read"]),
                   json={"question": "x" * 5000})
    assert r.status_code == 422 and r.json()["error"]["field"] == "question"
    assert "5,000 characters" in r.json()["error"]["message"]


def test_load_job_polled_to_the_end(server, api_keys):
    rows = [f"Wire Film {i}|directed_by|Wire Person {i % 7}" for i in range(300)]
    rows.insert(150, "not a triple")
    r = httpx.post(server + "/v1/loads", headers=auth(api_keys["write"]),
                   files={"file": ("wire_kb.txt", ("\n".join(rows) + "\n").encode())},
                   data={"format": "metaqa", "on_error": "skip"})
    assert r.status_code == 202, r.text
    job, seen = r.json(), []
    deadline = time.time() + 60
    while job["status"] in ("queued", "running"):
        assert time.time() < deadline, job
        time.sleep(0.05)
        job = httpx.get(f"{server}/v1/loads/{job['id']}", headers=auth(api_keys["read"])).json()
        seen.append(job["status"])
    assert job["status"] == "done", job
    assert job["result"]["rows_read"] == 301 and job["result"]["rejected"] == 1
    assert job["result"]["loaded"] == 300 and job["progress"]["triples"] == 300
    assert job["progress"]["total_rows"] == 301 and job["progress"]["rows"] == 301
    rej = httpx.get(f"{server}/v1/loads/{job['id']}/rejects", headers=auth(api_keys["read"]))
    assert rej.status_code == 200 and "not a triple" in rej.text


def _finished(server, api_keys, job):
    deadline = time.time() + 60
    while job["status"] in ("queued", "running"):
        assert time.time() < deadline, job
        time.sleep(0.05)
        job = httpx.get(f"{server}/v1/loads/{job['id']}", headers=auth(api_keys["read"])).json()
    return job


def test_a_load_replaced_over_the_wire(server, api_keys):
    """POST /v1/loads with ``replace``: the store then holds what the new file asserts in
    place of the old one (`talent load --replace`), with the change in the job's result."""
    write = auth(api_keys["write"])
    old = "".join(f"Swap Film {i}|directed_by|Swap Person {i}\n" for i in range(20))
    r = httpx.post(server + "/v1/loads", headers=write, data={"format": "metaqa"},
                   files={"file": ("swap_kb.txt", old.encode())})
    assert r.status_code == 202, r.text
    assert _finished(server, api_keys, r.json())["status"] == "done"
    new = "".join(f"Swap Film {i}|directed_by|Swap Person {i}\n" for i in range(5, 25))
    r = httpx.post(server + "/v1/loads", headers=write,
                   data={"format": "metaqa", "replace": "swap_kb.txt"},
                   files={"file": ("swap_kb.txt", new.encode())})
    assert r.status_code == 202, r.text
    job = _finished(server, api_keys, r.json())
    assert job["status"] == "done", job
    change = job["result"]["change"]
    assert (change["added"], change["removed"], change["unchanged"]) == (5, 5, 15)
    srcs = httpx.get(server + "/v1/sources", headers=auth(api_keys["read"])).json()["sources"]
    assert [s["triples"] for s in srcs if s["name"] == "swap_kb.txt"] == [20]
    r = httpx.post(server + "/v1/loads", headers=write,
                   data={"format": "metaqa", "replace": "no-such-source"},
                   files={"file": ("x_kb.txt", b"A|r|B\n")})
    assert r.status_code == 404 and "no-such-source" in r.json()["error"]["message"]


def test_streamed_ask_events_in_stage_order(server, api_keys):
    t0 = time.perf_counter()
    arrived: list[float] = []
    text = ""
    with httpx.stream("POST", server + "/v1/ask", json={**Q, "stream": True},
                      headers=auth(api_keys["read"]), timeout=120) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for chunk in r.iter_text():
            text += chunk
            arrived.append(time.perf_counter() - t0)
    events = sse_events(text)
    assert [e for e, _ in events] == STAGES
    data = dict(events)
    assert data["candidate"]["nodes"] and isinstance(data["answer"]["answer"], list)
    assert data["done"]["timings_ms"]
    # the selection came from the model process as its stage ended, not from the answer
    assert "selection" in data["done"]["server_ms"]


def test_disconnect_mid_stream_frees_the_slot(server, api_keys):
    h = auth(api_keys["read"])
    with httpx.stream("POST", server + "/v1/ask", json={**Q, "stream": True}, headers=h,
                      timeout=120) as r:
        first = next(r.iter_lines())
        assert first == "event: seeds"
    # the client went away after the first event: its slot comes back
    deadline = time.time() + 60
    while True:
        llm = httpx.get(server + "/readyz", headers=h).json()["llm"]
        if llm["admitted"] == 0 and llm["running"] == 0:
            break
        assert time.time() < deadline, llm
        time.sleep(0.2)
    r = httpx.post(server + "/v1/ask", json=Q, headers=h, timeout=120)
    assert r.status_code == 200 and "answer" in r.json()


def test_openai_sdk_streams_a_chat_completion(server, api_keys):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server + "/v1", api_key=api_keys["read"], max_retries=0)
    assert [m.id for m in client.models.list()] == ["talent"]  # what clients ask first
    chunks = list(client.chat.completions.create(
        model="talent", stream=True,
        messages=[{"role": "system", "content": "answer from the KG"},
                  {"role": "user", "content": "who directed [Gravity]"}]))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and chunks[-1].choices[0].finish_reason == "stop"
    talent = chunks[-1].model_extra["talent"]  # the evidence: the `talent ask --json` document
    assert talent["candidate"] and "evidence" in talent
    assert text == (" | ".join(talent["answer"]) or "(no answer)")
    done = client.chat.completions.create(
        model="talent", messages=[{"role": "user", "content": "who directed [Gravity]"}])
    assert done.choices[0].message.content == text
    assert done.model_extra["talent"]["question"] == "who directed Gravity"  # [topic] read
    # a follow-up: the client sends the history back, as chat clients do
    first = "which films did [Keanu Reeves] star in"
    reply = client.chat.completions.create(
        model="talent", messages=[{"role": "user", "content": first}])
    said = reply.choices[0].message.content
    follow = client.chat.completions.create(model="talent", stream=True, messages=[
        {"role": "user", "content": first}, {"role": "assistant", "content": said},
        {"role": "user", "content": "who starred in them?"}])
    chunks = list(follow)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reading = chunks[-1].model_extra["talent"]["reading"]
    assert reading is not None and f"({reading['text']})" in text
    # ranked answers are KG nodes: the reply's names read back as the previous answers
    expect = "topic" if said.startswith(("(no answer)", "Not in the KG")) else "answers"
    assert reading["source"] == expect, (said, reading)
    bad = openai.OpenAI(base_url=server + "/v1", api_key="tk_nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="talent",
                                    messages=[{"role": "user", "content": "hi"}])
