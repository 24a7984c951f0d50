"""The toy MetaQA KG (tests/fixtures/metaqa/kb.txt, real MiniLM embeddings) in a fresh
embedded store: what the e2e and the API fixtures start from."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@contextmanager
def toy_data_dir(data: Path) -> Iterator[dict[str, str]]:
    """Load the toy KG into an embedded store in ``data``; yields the TALENT_* variables that
    select it (store, data dir, a model cache inside it); stops its server afterwards."""
    from talent_core.config import Settings
    from talent_core.loaders.api import load_path
    from talent_core.store.falkordb import FalkorDBStore
    from talent_core.store.falkordb_server import EmbeddedServer

    env = {"TALENT_DATA_DIR": str(data), "TALENT_STORE": "embedded",
           "TALENT_MODEL_CACHE_DIR": str(data / "cache")}
    settings = Settings(data_dir=data, _env_file=None)
    store = FalkorDBStore.from_settings(settings)
    try:
        load_path(FIXTURES / "metaqa" / "kb.txt", "metaqa", store=store, settings=settings,
                  progress=False)
    finally:
        store.close()
    try:
        yield env
    finally:
        EmbeddedServer.for_dir(data).stop()


@contextmanager
def toy_env(data: Path, monkeypatch, unset: tuple[str, ...] = ()) -> Iterator[dict[str, str]]:
    """`toy_data_dir` in ``data`` selected through the environment for the test (``unset``:
    variables removed), the settings cache cleared before and after."""
    from talent_core.config import get_settings

    with toy_data_dir(data) as env:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        for k in unset:
            monkeypatch.delenv(k, raising=False)
        get_settings.cache_clear()
        try:
            yield env
        finally:
            get_settings.cache_clear()
