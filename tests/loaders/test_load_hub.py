"""RoG from the Hugging Face Hub by name: `datasets` is optional and imported lazily."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from loader_helpers import FIXTURES, FakeStore

from talent_core.config import Settings
from talent_core.errors import LoadError
from talent_core.loaders.api import load_path


def _load(store, tmp_path, name="rmanluo/RoG-webqsp", split="test"):
    return load_path(name, "rog", store=store, embedder=HashEmbedder(8), split=split,
                     settings=Settings(data_dir=tmp_path), progress=False)  # fmt: skip


def test_missing_datasets_package_is_a_clear_error(monkeypatch, tmp_path: Path):
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    with pytest.raises(LoadError) as ei:
        _load(FakeStore(), tmp_path)
    msg = str(ei.value)
    assert msg.startswith("rmanluo/RoG-webqsp[test]: ")
    assert "optional package `datasets`" in msg and "pip install" in msg


def test_hub_errors_are_reported(monkeypatch, tmp_path: Path):
    fake = types.ModuleType("datasets")

    def load_dataset(name, split, streaming):
        raise ConnectionError("Couldn't reach 'rmanluo/RoG-webqsp' on the Hub")

    fake.load_dataset = load_dataset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", fake)
    with pytest.raises(LoadError, match="could not open Hugging Face dataset .*ConnectionError"):
        _load(FakeStore(), tmp_path)


def test_hub_records_load_like_a_file(monkeypatch, tmp_path: Path):
    recs = [
        json.loads(x)
        for x in (FIXTURES / "rog" / "webqsp_toy.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    calls = []
    fake = types.ModuleType("datasets")

    def load_dataset(name, split, streaming):
        calls.append((name, split, streaming))
        return iter(recs)

    fake.load_dataset = load_dataset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", fake)
    store = FakeStore()
    rep = _load(store, tmp_path)
    assert calls == [("rmanluo/RoG-webqsp", "test", True)]
    assert rep.records == 35 and rep.source == "rmanluo/RoG-webqsp[test]"
    assert len(store.triples) == len({tuple(t) for r in recs for t in r["graph"]})
    q = tmp_path / "questions" / "RoG-webqsp-test.jsonl"
    assert len(q.read_text().splitlines()) == 35
