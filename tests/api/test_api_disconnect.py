"""A streaming client that goes away while the language models work: its model slot stays
held until that stage ends (the work cannot be interrupted) and is then given back; one
that goes away while queued leaves the queue at the next heartbeat, before any model work
runs for it. A real uvicorn server in a thread, a fake pipeline whose answer
stage waits for the test."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import pytest
from api_helpers import api_settings, auth

httpx = pytest.importorskip("httpx")


class BlockingPipeline:
    """Retrieval returns an empty S at once; the answer stage waits for ``release``."""

    models_loaded = True

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()
        self.answers = 0

    def retrieval_config(self, **overrides):
        return overrides

    def retrieve_planned(self, question, topics=None, history=(), **overrides):
        from talent_core.models import Candidate

        return Candidate(question=question), None

    def load_models(self):
        return None

    def answer(self, candidate, mode, decode, t0=None, plan=None, on_stage=None):
        self.answers += 1
        self.entered.set()
        assert self.release.wait(30)
        raise RuntimeError("the test's pipeline has no answer")

    def close(self):
        pass


@contextmanager
def served(app):
    """``app`` under a real uvicorn server in a thread; its base URL."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.time() + 20
        while not server.started:
            assert time.time() < deadline
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def wait_until(cond, seconds: float = 10) -> None:
    deadline = time.time() + seconds
    while not cond():
        assert time.time() < deadline
        time.sleep(0.05)


ASK = {"question": "who directed Gravity", "stream": True}


def test_disconnect_mid_stream_gives_the_slot_back(api_env, api_keys):
    from talent_core.api.app import create_app

    pipe = BlockingPipeline()
    app = create_app(api_settings(api_env), pipeline_factory=lambda: pipe)
    rt = app.state.runtime
    try:
        with served(app) as base, httpx.stream("POST", base + "/v1/ask", json=ASK, timeout=30,
                                               headers=auth(api_keys["read"])) as r:
            lines = r.iter_lines()
            assert next(lines) == "event: seeds"
            assert "event: candidate" in [next(lines) for _ in range(3)]
            assert pipe.entered.wait(10)  # the answer stage runs; then the client goes
            r.close()
            # gone while the answer stage runs: the slot is still held by that stage
            time.sleep(0.3)
            assert rt.llm.running == 1
            pipe.release.set()
            wait_until(lambda: not rt.llm.admitted and not rt.llm.running)
            assert pipe.answers == 1
    finally:
        pipe.release.set()


def test_a_queued_stream_that_goes_away_leaves_the_queue(api_env, api_keys, monkeypatch):
    from talent_core.api import app as api_app
    from talent_core.api import ask as api_ask

    monkeypatch.setattr(api_ask, "HEARTBEAT_S", 0.1)
    pipe = BlockingPipeline()
    app = api_app.create_app(api_settings(api_env), pipeline_factory=lambda: pipe)
    rt = app.state.runtime
    h = auth(api_keys["read"])
    try:
        with served(app) as base:
            first = threading.Thread(target=lambda: httpx.post(base + "/v1/ask", json=ASK,
                                                               headers=h, timeout=30))
            first.start()
            assert pipe.entered.wait(10)  # the first ask holds the only model slot
            with httpx.stream("POST", base + "/v1/ask", json=ASK, headers=h,
                              timeout=30) as r:
                for line in r.iter_lines():
                    if line.startswith(": queued"):
                        assert rt.llm.admitted == 2  # queued behind the first
                        break  # the client goes
            wait_until(lambda: rt.llm.admitted == 1)  # it left the queue
            assert rt.llm.running == 1
            pipe.release.set()
            first.join(30)
            wait_until(lambda: not rt.llm.admitted and not rt.llm.running)
            assert pipe.answers == 1  # no model work ran for the client that went away
    finally:
        pipe.release.set()


class StagedPipeline(BlockingPipeline):
    """The answer stage reports its selection, then waits for ``release`` to answer."""

    def __init__(self):
        from talent_core.store.memory import MemoryStore

        super().__init__()
        self.store, self.embedder = MemoryStore(), None

    def answer(self, candidate, mode, decode, t0=None, plan=None, on_stage=None):
        from talent_core.explore import selection_json
        from talent_core.models import Answer

        on_stage("selection", selection_json(None))
        self.entered.set()
        assert self.release.wait(30)
        self.answers += 1
        return Answer(question=candidate.question, candidate=candidate)


def test_each_stage_is_sent_when_it_ends(api_env, api_keys):
    """The selection event arrives while the generator still works (issue 46: the stages
    ran in the model process and came all at once at the end)."""
    from talent_core.api.app import create_app

    pipe = StagedPipeline()
    app = create_app(api_settings(api_env), pipeline_factory=lambda: pipe)
    try:
        with served(app) as base, httpx.stream("POST", base + "/v1/ask", json=ASK, timeout=30,
                                               headers=auth(api_keys["read"])) as r:
            lines = r.iter_lines()
            seen: list[str] = []
            for line in lines:
                if line.startswith("event:"):
                    seen.append(line[7:])
                    if seen[-1] == "selection":
                        break
            assert not pipe.release.is_set() and pipe.answers == 0  # still answering
            pipe.release.set()
            rest = [ln[7:] for ln in lines if ln.startswith("event:")]
        assert seen == ["seeds", "candidate", "selection"]
        assert rest == ["plan", "answer", "done"]
    finally:
        pipe.release.set()
