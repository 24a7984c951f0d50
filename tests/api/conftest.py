"""HTTP API fixtures: the toy MetaQA KG (real MiniLM embeddings) in a fresh embedded store,
the tiny random Llama as the base model (no adapters: the frozen model answers), a read and a
write API key, and an in-process client of the app on that store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from toy_store import toy_data_dir


@pytest.fixture(scope="session")
def api_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """TALENT_* variables of a data dir with the toy KG, the tiny model, the planner off;
    load jobs and request threads at normal priority (niced work waits behind a busy
    machine's other work, and the tests poll against deadlines; test_api_priority sets its
    own)."""
    from tiny_llm import tiny_llama

    data = tmp_path_factory.mktemp("api")
    model = tiny_llama(data / "tiny")
    with toy_data_dir(data) as env:
        yield {**env, "TALENT_BASE_MODEL": str(model), "TALENT_PLANNER": "none",
               "TALENT_ADAPTERS": "bundled", "TALENT_API_LOAD_NICE": "0",
               "TALENT_API_BROWSE_NICE": "0"}


@pytest.fixture(scope="session")
def api_keys(api_env: dict[str, str]) -> dict[str, str]:
    """{"read": key, "write": key} stored in the toy data dir."""
    from talent_core.api.keys import KeyStore

    ks = KeyStore(Path(api_env["TALENT_DATA_DIR"]))
    return {scope: ks.create(f"test-{scope}", scope)[1] for scope in ("read", "write")}


@pytest.fixture(scope="session")
def client(api_env: dict[str, str], api_keys: dict[str, str]):
    from api_helpers import api_settings
    from fastapi.testclient import TestClient

    from talent_core.api.app import create_app

    with TestClient(create_app(api_settings(api_env))) as c:
        yield c
