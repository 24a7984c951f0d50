"""Question encoding and question-to-relation scores for the default (relation-path) rule.

Relation relevance is a *max-sim over question tokens*: the question (with the anchor
entities' mentions removed, so "Sandro Petraglia" cannot pull in relations) is embedded
once; each contextual token vector is compared with the sentence embedding of the
verbalised relation text ("written_by" -> "written by", "people.person.place_of_birth" ->
"people person place of birth"), and the relation's score is the best token match.
It ranks the gold relation first more often than the whole-sentence cosine (or the raw
relation names with the entity left in): a relation is usually named by one or two words of
the question, and the sentence vector averages them away.

Relation vectors are embedded in-process and cached per embedding model (a KG has few
relation types; each is embedded once per process).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from talent_core.embedding import Embedder, normalise_rows

log = logging.getLogger(__name__)

_SEP = re.compile(r"[._/:\-\s]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WS = re.compile(r"\s+")


def verbalise_relation(rel: str) -> str:
    """Relation id/name -> words: separators become spaces, camelCase is split."""
    text = _CAMEL.sub(" ", rel)
    text = _SEP.sub(" ", text).strip().lower()
    return text or rel


def strip_mentions(question: str, names: Iterable[str]) -> str:
    """Remove case-insensitive occurrences of `names` from the question (longest first)."""
    out = question
    for name in sorted({n for n in names if n and n.strip()}, key=len, reverse=True):
        out = re.sub(re.escape(name.strip()), " ", out, flags=re.IGNORECASE)
    out = _WS.sub(" ", out).strip(" ,;:")
    return out or question


@dataclass(frozen=True)
class QuestionEncoding:
    vector: np.ndarray  # (d,) normalised sentence embedding of the full question
    tokens: np.ndarray  # (T, d) normalised token vectors of the relation text (T >= 1)


def encode_question(
    embedder: Embedder, question: str, relation_text: str | None = None
) -> QuestionEncoding:
    """One forward pass for [question, relation_text]: the question's sentence vector and
    the relation text's contextual token vectors (special tokens dropped; embedders without
    token outputs give the sentence vector as the one token, `embedding.SentenceTokens`)."""
    rel_text = relation_text if relation_text else question
    (vec, _), (_, tokens) = embedder.encode_tokens([question, rel_text])
    return QuestionEncoding(vector=vec, tokens=tokens)


class RelationScorer:
    """Relation vectors (verbalised text, cached per model) and token max-sim scores."""

    _caches: ClassVar[dict[str, dict[str, np.ndarray]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        with self._lock:
            self._cache = self._caches.setdefault(embedder.model_name, {})

    def vectors(self, rels: Sequence[str]) -> np.ndarray:
        missing = [r for r in dict.fromkeys(rels) if r not in self._cache]
        if missing:
            vecs = np.asarray(
                self.embedder.encode([verbalise_relation(r) for r in missing]), dtype=np.float32
            )
            vecs = normalise_rows(vecs)
            with self._lock:
                for r, v in zip(missing, vecs, strict=True):
                    self._cache[r] = v
        if not rels:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[r] for r in rels])

    def scores(self, q: QuestionEncoding, rels: Sequence[str]) -> dict[str, float]:
        rels = list(dict.fromkeys(rels))
        if not rels:
            return {}
        sims = q.tokens @ self.vectors(rels).T  # (T, R)
        return {r: float(s) for r, s in zip(rels, sims.max(axis=0), strict=True)}
