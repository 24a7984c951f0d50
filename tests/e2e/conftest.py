"""End-to-end fixtures: the MetaQA-style toy KG loaded with the real MiniLM embedder into a
fresh embedded store, selected through the environment as a user would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from toy_store import toy_data_dir


@pytest.fixture(scope="session")
def toy_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """TALENT_* variables of a data dir holding the toy MetaQA KG (real embeddings)."""
    with toy_data_dir(tmp_path_factory.mktemp("e2e")) as env:
        yield env


@pytest.fixture
def use_toy(toy_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    from talent_core.config import get_settings

    for k, v in toy_env.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    yield toy_env
    get_settings.cache_clear()
