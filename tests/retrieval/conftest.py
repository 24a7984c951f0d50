"""Fixtures for the retrieval tests; the helpers live in retrieval_helpers.py."""

from __future__ import annotations

import pytest
from retrieval_helpers import FIXTURES, BowEmbedder, memory_store, read_triples

from talent_core.store.memory import MemoryStore


@pytest.fixture(scope="session")
def bow() -> BowEmbedder:
    return BowEmbedder()


@pytest.fixture(scope="session")
def metaqa_triples() -> list[tuple[str, str, str]]:
    return read_triples(FIXTURES / "metaqa" / "kb.txt")


@pytest.fixture(scope="session")
def mem_store(metaqa_triples, bow) -> MemoryStore:
    return memory_store(metaqa_triples, bow)
