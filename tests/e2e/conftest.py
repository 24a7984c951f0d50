"""End-to-end fixtures: the MetaQA-style toy KG loaded with the real MiniLM embedder into a
fresh embedded store, selected through the environment as a user would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="session")
def toy_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """TALENT_* variables of a data dir holding the toy MetaQA KG (real embeddings)."""
    from talent_core.config import Settings
    from talent_core.loaders.api import load_path
    from talent_core.store.falkordb import FalkorDBStore
    from talent_core.store.falkordb_server import EmbeddedServer

    data = tmp_path_factory.mktemp("e2e")
    env = {"TALENT_DATA_DIR": str(data), "TALENT_STORE": "embedded",
           "TALENT_MODEL_CACHE_DIR": str(data / "cache")}
    settings = Settings(data_dir=data, _env_file=None)
    store = FalkorDBStore.from_settings(settings)
    try:
        load_path(FIXTURES / "metaqa" / "kb.txt", "metaqa", store=store, settings=settings,
                  progress=False)
    finally:
        store.close()
    yield env
    EmbeddedServer.for_dir(data).stop()


@pytest.fixture
def use_toy(toy_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    from talent_core.config import get_settings

    for k, v in toy_env.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    yield toy_env
    get_settings.cache_clear()
