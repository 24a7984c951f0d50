"""Retrieval and answer metrics (pure functions, reused by evaluation and benches).

Answer matching is by *normalised name* (`talent_core.text.answer_key`): Unicode NFKC,
lowercase (`str.casefold`), leading and trailing whitespace stripped, every run of
whitespace collapsed to one space. Nothing else is changed (punctuation, articles and
accents are kept), so "The Matrix" matches " the  matrix" but not "Matrix". Empty names are dropped.

For a predicted node-name set V̂ and a gold answer set V* (both normalised to sets):
  hit       = 1 if V̂ ∩ V* is non-empty else 0
  recall    = |V̂ ∩ V*| / |V*|          (0 when V* is empty)
  precision = |V̂ ∩ V*| / |V̂|          (0 when V̂ is empty)
  f1        = 2 P R / (P + R)           (0 when P + R = 0)
  size      = |V̂|  (distinct normalised names)
Macro averages are plain means over questions.

Answers (a generated answer list A against the gold answers V*):
  hit@1          1 if the first non-empty answer of A is in V* (normalised names)
  hit@any        1 if any answer of A is in V*
  substring hit  G-Retriever's / RoG's `eval_hit`: 1 if some gold answer, normalised their
                 way (lowercase, punctuation and the articles a/an/the removed, whitespace
                 collapsed), occurs as a substring of the generated text, normalised alike
  answer F1      `retrieval_scores(A, V*).f1` (set F1 over normalised names)
Out-of-candidate hallucination (TaLenT Appendix F, eqs. 16-17), per question:
  H = {} if hit@1 = 1 else {v in V̂ minus V_S : v not in V*};
  rate = sum |H| / sum |V̂| over questions (`hallucinated` gives |H|).
Stance labels (ExplaGraphs): `stance_metrics`.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from talent_core.questions import LABELS
from talent_core.text import answer_key


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


def hit_at_any(answers: Sequence[str], gold: Iterable[str]) -> float:
    """1 if ANY generated answer (normalised) is a gold answer."""
    return 1.0 if name_set(answers) & name_set(gold) else 0.0


_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def substring_normalise(text: str) -> str:
    """G-Retriever's answer normalisation: lowercase, punctuation removed, the articles
    a / an / the removed, whitespace collapsed."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def substring_hit(text: str, gold: Iterable[str]) -> float:
    """G-Retriever's hit: 1 if some normalised gold answer occurs in the normalised
    generated ``text`` (a substring test: "paris" hits "paris, france")."""
    out = substring_normalise(text)
    return 1.0 if any((g := substring_normalise(a)) and g in out for a in gold) else 0.0


def hallucinated(v_hat: Iterable[str], s_names: Iterable[str], gold: Iterable[str],
                 hit1: float) -> int:
    """|H| of TaLenT eq. 16: 0 when the final answer is right (hit@1 = 1), else the number
    of retrieved names outside S that are not gold (normalised names)."""
    if hit1:
        return 0
    return len(name_set(v_hat) - name_set(s_names) - name_set(gold))


def stance_metrics(gold: Sequence[str], pred: Sequence[str]) -> dict[str, Any]:
    """n, accuracy, per-class accuracy (share of each gold label predicted right), balanced
    accuracy (their mean over the labels present) and the majority baseline (always the most
    frequent gold label); predicted: how often each label was given."""
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold labels but {len(pred)} predictions")
    n = len(gold)
    if n == 0:
        return {"n": 0}
    counts = Counter(gold)
    per_class = {}
    present = []  # unrounded per-class accuracies of the labels present
    for label in LABELS:
        m = counts.get(label, 0)
        right = sum(1 for g, p in zip(gold, pred, strict=True) if g == label and p == label)
        if m:
            present.append(right / m)
        per_class[label] = {"n": m, "accuracy": round(right / m, 4) if m else None}
    majority, m_count = counts.most_common(1)[0]
    return {
        "n": n,
        "accuracy": round(sum(g == p for g, p in zip(gold, pred, strict=True)) / n, 4),
        "balanced_accuracy": round(sum(present) / len(present), 4),
        "per_class": per_class,
        "majority_baseline": {"label": majority, "accuracy": round(m_count / n, 4)},
        "predicted": {label: Counter(pred).get(label, 0) for label in LABELS},
    }
