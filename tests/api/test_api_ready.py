"""/readyz says ready only when an ask would not wait for a model load (issue 46): with
TALENT_API_PRELOAD (the default) the models load in the background from the start, /healthz
answers at once and /readyz is a 503 `not_ready` until they are loaded."""

from __future__ import annotations

import threading
import time

from api_helpers import api_settings, auth


class SlowModels:
    """A pipeline whose models load when the test says so."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.models_loaded = False
        self.embedder = self
        self.planner = None

    def load_models(self) -> None:
        self.release.wait(60)
        self.models_loaded = True

    def encode(self, texts):
        return [[0.0] for _ in texts]

    def stats(self):
        from talent_core.models import StoreStats

        return StoreStats(store="fake", entities=1, relations=1, triples=1)

    def close(self) -> None:
        pass


def test_ready_only_once_the_models_are_loaded(api_env, api_keys):
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    pipe = SlowModels()
    app = create_app(api_settings(api_env, api_preload=True), pipeline_factory=lambda: pipe)
    h = auth(api_keys["read"])
    with TestClient(app) as c:
        assert c.get("/healthz").status_code == 200  # the start did not wait for the models
        r = c.get("/readyz", headers=h)
        assert r.status_code == 503 and r.json()["error"]["code"] == "not_ready", r.text
        pipe.release.set()
        deadline = time.monotonic() + 30
        while c.get("/readyz", headers=h).status_code != 200:
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.05)
        ready = c.get("/readyz", headers=h).json()
        assert ready["ready"] and ready["models_loaded"]


def test_without_preload_the_store_is_enough(api_env, api_keys):
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    pipe = SlowModels()
    app = create_app(api_settings(api_env, api_preload=False), pipeline_factory=lambda: pipe)
    with TestClient(app) as c:
        ready = c.get("/readyz", headers=auth(api_keys["read"])).json()
        assert ready["ready"] and not ready["models_loaded"]
