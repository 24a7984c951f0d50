"""Retrieval and answer metrics (pure functions, reused by evaluation).

Answer matching is by *normalised name*: Unicode NFKC, lowercase (`str.casefold`), leading
and trailing whitespace stripped, every run of whitespace collapsed to one space. Nothing
else is changed (punctuation, articles and accents are kept), so "The Matrix" matches
" the  matrix" but not "Matrix". Empty names are dropped.

For a predicted node-name set V̂ and a gold answer set V* (both normalised to sets):
  hit       = 1 if V̂ ∩ V* is non-empty else 0
  recall    = |V̂ ∩ V*| / |V*|          (0 when V* is empty)
  precision = |V̂ ∩ V*| / |V̂|          (0 when V̂ is empty)
  f1        = 2 P R / (P + R)           (0 when P + R = 0)
  size      = |V̂|  (distinct normalised names)
Macro averages are plain means over questions.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

_WS = re.compile(r"\s+")


def answer_key(name: str) -> str:
    """The key names are COMPARED by (answers vs gold, LLM output vs S): NFKC, casefold,
    strip, collapse whitespace.

    Deliberately looser than the store's lookup key `talent_core.text.normalise_name`
    (NFC + lower), which must equal what Cypher's `toLower` stores in `name_lc`: a
    comparison may fold full-width letters and "ß" -> "ss", a database key may not."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip()


def name_set(names: Iterable[str]) -> set[str]:
    return {n for n in (answer_key(x) for x in names) if n}


@dataclass(frozen=True)
class RetrievalScores:
    hit: float
    recall: float
    precision: float
    f1: float
    size: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def retrieval_scores(predicted: Iterable[str], gold: Iterable[str]) -> RetrievalScores:
    """Hit / recall / precision / F1 / size for one question (names are normalised here)."""
    pred, want = name_set(predicted), name_set(gold)
    inter = len(pred & want)
    recall = inter / len(want) if want else 0.0
    precision = inter / len(pred) if pred else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return RetrievalScores(
        hit=1.0 if inter else 0.0,
        recall=recall,
        precision=precision,
        f1=f1,
        size=float(len(pred)),
    )


def hit(predicted: Iterable[str], gold: Iterable[str]) -> float:
    return retrieval_scores(predicted, gold).hit


def recall(predicted: Iterable[str], gold: Iterable[str]) -> float:
    return retrieval_scores(predicted, gold).recall


def precision(predicted: Iterable[str], gold: Iterable[str]) -> float:
    return retrieval_scores(predicted, gold).precision


def f1(predicted: Iterable[str], gold: Iterable[str]) -> float:
    return retrieval_scores(predicted, gold).f1


def macro_average(scores: Sequence[RetrievalScores | Mapping[str, float]]) -> dict[str, float]:
    """Mean of each field over questions; `n` is the number of questions (0 -> all zeros)."""
    fields = ("hit", "recall", "precision", "f1", "size")
    rows = [s.as_dict() if isinstance(s, RetrievalScores) else dict(s) for s in scores]
    out = {f: (sum(float(r[f]) for r in rows) / len(rows) if rows else 0.0) for f in fields}
    out["n"] = float(len(rows))
    return out


def hit_at_1(answers: Sequence[str], gold: Iterable[str]) -> float:
    """1 if the FIRST generated answer (after normalisation; empty ones skipped) is gold."""
    want = name_set(gold)
    for a in answers:
        n = answer_key(a)
        if n:
            return 1.0 if n in want else 0.0
    return 0.0
