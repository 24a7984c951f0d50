"""Fixtures for the LLM tests: a tiny random Llama with an offline tokenizer, a small S."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_llm import sample_candidate

from talent_core.config import Settings
from talent_core.models import Candidate


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_llm import tiny_llama

    return tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny-llama")


@pytest.fixture(scope="session")
def tiny_tok(tiny_dir: Path):
    from talent_core.llm.models import load_tokenizer

    return load_tokenizer(str(tiny_dir))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(model_cache_dir=tmp_path / "cache", _env_file=None)


@pytest.fixture
def candidate() -> Candidate:
    return sample_candidate()
