"""`talent demo`: the graph is loaded without its names' vectors and answers at once; a
detached `talent vectors` embeds them behind (real MiniLM in a child process), and the
store then holds the vectors a load that embedded as it went writes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from toy_store import FIXTURES, toy_data_dir

pytestmark = pytest.mark.slow  # a child process loads MiniLM

KB = FIXTURES / "metaqa" / "kb.txt"


def test_demo_loads_the_graph_first_and_fills_its_vectors_behind(tmp_path, monkeypatch, capsys):
    from talent_core.commands import ui
    from talent_core.config import Settings, get_settings
    from talent_core.loaders.vectors import LOG_NAME
    from talent_core.store.falkordb import FalkorDBStore
    from talent_core.store.falkordb_server import EmbeddedServer

    data = tmp_path / "demo"
    monkeypatch.setenv("TALENT_DATA_DIR", str(data))
    monkeypatch.setenv("TALENT_STORE", "embedded")
    monkeypatch.setattr(ui, "DEMO_KG", KB)
    monkeypatch.setattr(ui, "prepare_models", lambda: None)  # the base model: not this test's
    get_settings.cache_clear()
    try:
        ui.demo(no_app=True)
        out = capsys.readouterr().out
        assert "without its names' vectors" in out and "embedding 197 of 197 names" in out
        store = FalkorDBStore.from_settings(Settings(data_dir=data, _env_file=None))
        try:
            deadline = time.monotonic() + 180
            while (st := store.stats()).entities_with_embedding < st.entities:
                assert time.monotonic() < deadline, (data / LOG_NAME).read_text()
                time.sleep(0.5)
            assert (st.entities, st.triples) == (197, 377)
            with toy_data_dir(tmp_path / "reference"):  # the same KB, embedded while loading
                ref = FalkorDBStore.from_settings(
                    Settings(data_dir=tmp_path / "reference", _env_file=None))
                ids = ref.entity_ids("", 1000)
                want, got = ref.entity_vectors(ids), store.entity_vectors(ids)
                ref.close()
            assert got.keys() == want.keys() == set(ids)
            cos = min(float(np.dot(got[i], want[i])) for i in ids)
            assert cos > 0.9999, cos
            log = (data / LOG_NAME).read_text()
            assert "197 entities embedded" in log
            ui.demo(no_app=True)  # again: nothing to load, nothing left to embed
            out = capsys.readouterr().out
            assert "loading the bundled" not in out and "names behind the UI" not in out
        finally:
            store.close()
    finally:
        EmbeddedServer.for_dir(Path(data)).stop()
        get_settings.cache_clear()
