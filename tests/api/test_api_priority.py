"""The model work keeps its CPU priority while the request threads (retrieval, search,
browsing) run niced (TALENT_API_BROWSE_NICE): on a busy machine the queued asks keep their
pace. A recording pipeline notes the thread and nice value of each stage."""

from __future__ import annotations

import os
import sys
import threading

import pytest
from api_helpers import api_settings, auth

from talent_core.errors import RetrievalSettingsError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def _where() -> tuple[str, int]:
    return threading.current_thread().name, os.getpriority(os.PRIO_PROCESS,
                                                           threading.get_native_id())


class RecordingPipeline:
    models_loaded = True

    def __init__(self):
        self.seen: dict[str, tuple[str, int]] = {}

    def retrieval_config(self, **overrides):
        return overrides

    def retrieve(self, question, topics=None, **overrides):
        self.seen["retrieve"] = _where()
        raise RetrievalSettingsError([("stage", "recorded")])

    def retrieve_planned(self, question, topics=None, history=(), **overrides):
        from talent_core.models import Candidate

        self.seen["retrieve_planned"] = _where()
        return Candidate(question=question), None

    def load_models(self):
        self.seen["load_models"] = _where()

    def answer(self, candidate, mode, decode, t0=None, plan=None, on_stage=None):
        self.seen["answer"] = _where()
        raise RetrievalSettingsError([("stage", "recorded")])

    def close(self):
        pass


def test_model_work_keeps_its_priority_while_requests_run_niced(api_env, api_keys):
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    base = os.getpriority(os.PRIO_PROCESS, 0)
    if base > 10:  # niced by 9 more, relative to the server's own (at most 19)
        pytest.skip(f"the test process already runs at nice {base}")
    pipe = RecordingPipeline()
    app = create_app(api_settings(api_env, api_browse_nice=9), pipeline_factory=lambda: pipe)
    h = auth(api_keys["read"])
    with TestClient(app) as c:
        assert c.post("/v1/retrieve", json={"question": "who directed Gravity"},
                      headers=h).status_code == 422  # fmt: skip
        assert c.post("/v1/ask", json={"question": "who directed Gravity"},
                      headers=h).status_code == 422  # fmt: skip
    for stage in ("retrieve", "retrieve_planned"):
        name, nice = pipe.seen[stage]
        assert nice == base + 9 and not name.startswith("talent-model"), (stage, name, nice)
    name, nice = pipe.seen["answer"]
    assert name.startswith("talent-model") and nice == base, (name, nice)
