"""Fixtures for the loader tests (helpers live in loader_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from loader_helpers import SHARED, FakeStore


@pytest.fixture
def shared_data() -> Path:
    if SHARED is None:
        pytest.skip("../shared/data is absent")
    return SHARED


@pytest.fixture
def fake_store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder(16)
