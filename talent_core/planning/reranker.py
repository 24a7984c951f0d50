"""The path re-ranker: a cross-encoder that reads the question and one relation path in
words as one text and scores the pair, re-ranking the bi-encoder beam's best few paths.

A bi-encoder embeds a path's words once, without the question, and mean-pools them: it
barely sees their order (`directed_by > has_genre` against `has_genre > directed_by`) or
which word of the question a relation answers. A cross-encoder attends across both (as
UniKGQA's matcher reads question and relation together) at one encoder pass per path, so
it re-ranks the few paths the beam kept, not the store. It is a matcher directory
(`planning.matcher`: LoRA factors on the same sentence encoder) whose meta's ``role`` is
`ROLE` and whose factors file adds the head: the logit of a pair is ``head.w`` . v +
``head.b`` for v the unit mean-pooled vector of `pair_text` (`training.reranker` fits it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from talent_core.errors import PlannerError
from talent_core.planning.matcher import (
    META_FILE,
    encoder_of,
    load_once,
    path_words,
    read_factors,
)

ROLE = "reranker"
RERANKER_DIR = "reranker"  # inside a matcher directory: the re-ranker that goes with it


def pair_text(question: str, words: str) -> str:
    """The one text the cross-encoder reads: the question, the separator, the path."""
    return f"{question} [SEP] {words}"


class PathReranker:
    """Logits of (question, path) pairs (`pair_text`)."""

    def __init__(self, meta: dict[str, Any], embedder: Any, w: np.ndarray, b: float):
        self.meta, self.embedder, self.w, self.b = meta, embedder, w, b

    @property
    def name(self) -> str:
        return str(self.meta.get("name", "?"))

    def score(self, question: str, paths: Sequence[Sequence[str]]) -> np.ndarray:
        if not paths:
            return np.zeros(0, dtype=np.float32)
        v = np.asarray(self.embedder.encode([pair_text(question, path_words(p))
                                             for p in paths]), dtype=np.float32)
        return v @ self.w + self.b


def load_reranker(directory: Path, embedding_model: str) -> PathReranker | None:
    """The re-ranker in ``directory`` (None when it holds none), loaded once per process
    and again when replaced (`matcher.load_once`). `PlannerError` when it is unusable."""
    if not (directory / META_FILE).is_file():
        return None

    def build(meta: dict[str, Any]) -> PathReranker:
        if meta.get("role") != ROLE:
            raise PlannerError(f"{directory / META_FILE}: not a re-ranker (role "
                               f"{meta.get('role')!r})")
        factors = read_factors(directory, meta)
        if "head.w" not in factors or "head.b" not in factors:
            raise PlannerError(f"{directory}: the re-ranker's factors lack its head")
        return PathReranker(meta, encoder_of(directory, meta, embedding_model),
                            factors["head.w"].astype(np.float32),
                            float(factors["head.b"].reshape(-1)[0]))

    return load_once(directory, embedding_model, "re-ranker", build)
