"""TEST-ONLY pseudo-embedder, kept out of the product.

`HashEmbedder` is NOT a semantic embedding: it maps each text to a fixed pseudo-random unit
vector (BLAKE2b of the text seeds the generator), so tests (loader crash / idempotency tests
in subprocesses, latency benches on synthetic KGs) run without loading a model. Vector search
over it only finds identical strings.

`install()` makes `TALENT_EMBEDDING_MODEL=hash[:DIM]` select it for loads in this process (the
loaders' `make_embedder` is wrapped; only the loader CLI runs this way); subprocess tests run a
CLI through `python tests/hash_cli.py MODULE ARGS...`, which calls it first.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

import numpy as np

from talent_core.embedding import SentenceTokens

log = logging.getLogger(__name__)


class HashEmbedder(SentenceTokens):
    """Deterministic pseudo-embeddings (see the module docstring)."""

    def __init__(self, dimension: int = 32):
        if dimension < 2:
            raise ValueError("dimension must be >= 2")
        self.dimension = dimension
        self.model_name = f"hash:{dimension}"
        self.calls: list[int] = []  # sizes of encode() calls, for tests

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest())
            v = np.random.default_rng(seed).standard_normal(self.dimension)
            out[i] = v / np.linalg.norm(v)
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def parse_hash_model(name: str) -> int | None:
    """The dimension if `name` is `hash` / `hash:DIM`, else None."""
    if name == "hash":
        return 32
    if name.startswith("hash:"):
        return int(name.split(":", 1)[1])
    return None


def install() -> None:
    """Let `hash[:DIM]` model names select `HashEmbedder` in this process."""
    import talent_core.loaders.embedders as le

    real_make = le.make_embedder

    def make_embedder(settings, *args, **kwargs):
        dim = parse_hash_model(settings.embedding_model)
        return HashEmbedder(dim) if dim is not None else real_make(settings, *args, **kwargs)

    le.make_embedder = make_embedder
