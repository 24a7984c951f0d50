"""Embedders the loader uses: the test-only hash embedder, and the real model (slow)."""

from __future__ import annotations

import numpy as np
import pytest
from hash_embedder import HashEmbedder, parse_hash_model
from loader_helpers import FIXTURES

from talent_core.config import Settings
from talent_core.loaders.embedders import make_embedder


def test_hash_embedder_is_deterministic_and_normalised():
    e = HashEmbedder(32)
    a = e.encode(["Alien", "Aliens", "Alien"])
    assert a.shape == (3, 32) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(a[0], a[2]) and not np.allclose(a[0], a[1])
    assert np.array_equal(HashEmbedder(32).encode(["Alien"])[0], a[0])


def test_hash_model_names():
    assert parse_hash_model("hash") == 32 and parse_hash_model("hash:384") == 384
    assert parse_hash_model("minilm") is None


@pytest.mark.slow
def test_bf16_names_match_fp32_embeddings():
    names = sorted(
        {p for line in (FIXTURES / "metaqa" / "kb.txt").read_text().splitlines()
         for p in line.split("|")[::2]}
    )  # fmt: skip
    fp32 = make_embedder(Settings(), "fp32")
    bf16 = make_embedder(Settings(), "bf16")
    a, b = fp32.encode(names), bf16.encode(names)
    cos = (a * b).sum(axis=1)
    if getattr(bf16, "precision", "fp32") == "bf16":
        assert cos.min() > 0.999
    else:  # no native bf16 on this CPU: the fallback is fp32 itself
        assert cos.min() > 0.99999


def test_hash_embedder_is_usable_by_the_pipeline_and_not_selectable_in_production() -> None:
    import talent_core.embedding as te
    import talent_core.loaders.embedders as le
    from talent_core.retrieval import question_encoding

    assert not hasattr(te, "HashEmbedder") and not hasattr(le, "HashEmbedder")
    emb = HashEmbedder(8)
    enc = question_encoding(emb, "who directed [Alien]", ["Alien"])  # no token outputs: fallback
    assert enc.vector.shape == (8,) and enc.tokens.shape == (1, 8)
