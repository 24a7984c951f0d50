"""Retriever and generator targets (paper eqs. 9-11, 15). Pure.

Retriever: P = V* ∩ V_S (gold answers present in S, matched by normalised name), W = V_S \\ V*.
The target line is P then W, ``|``-joined, lowercase, de-duplicated by normalised name, each
group in the order of the candidate's nodes (the order of the CSV rows in the prompt). Every
name in the line comes with its character span and its class, which `loss.align_weights`
turns into token weights (1 for P, lambda for W, 0 for the separators).

Generator: the gold answers, lowercase, de-duplicated, ``|``-joined; every answer is class P
(weight 1) and the separators are part of the answer too (eq. 15 trains on all answer tokens).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from talent_core.llm.parsing import answer_key, clean_name
from talent_core.models import Candidate

NameClass = Literal["P", "W"]


@dataclass(frozen=True)
class NameSpan:
    name: str
    start: int  # character offsets in TargetLine.text, end exclusive
    end: int
    cls: NameClass


@dataclass(frozen=True)
class TargetLine:
    text: str
    spans: list[NameSpan] = field(default_factory=list)

    @property
    def positives(self) -> list[str]:
        return [s.name for s in self.spans if s.cls == "P"]

    @property
    def weak(self) -> list[str]:
        return [s.name for s in self.spans if s.cls == "W"]


def join_names(names: Iterable[tuple[str, NameClass]], sep: str = "|") -> TargetLine:
    """Join (name, class) pairs into one line, recording each name's span. Names are cleaned
    (lowercase, one line, no ``|``) and de-duplicated by normalised form, first wins."""
    parts: list[str] = []
    spans: list[NameSpan] = []
    seen: set[str] = set()
    pos = 0
    for raw, cls in names:
        name = clean_name(raw)
        key = answer_key(name)
        if not key or key in seen:
            continue
        seen.add(key)
        if parts:
            pos += len(sep)
        parts.append(name)
        spans.append(NameSpan(name, pos, pos + len(name), cls))
        pos += len(name)
    text = sep.join(parts)
    assert all(text[s.start : s.end] == s.name for s in spans)
    return TargetLine(text, spans)


def split_positive_weak(
    node_names: Sequence[str], gold: Iterable[str]
) -> tuple[list[str], list[str]]:
    """P = names of S that match a gold name, W = the other names of S (eqs. 9-10)."""
    gold_keys = {answer_key(g) for g in gold}
    gold_keys.discard("")
    positive = [n for n in node_names if answer_key(n) in gold_keys]
    weak = [n for n in node_names if answer_key(n) not in gold_keys]
    return positive, weak


def retriever_target(candidate: Candidate, gold: Iterable[str]) -> TargetLine:
    """Eq. 11: ``p1|...|p_|P||w1|...|w_|W|`` for the nodes of ``candidate``."""
    positive, weak = split_positive_weak([n.name for n in candidate.nodes], gold)
    return join_names([(n, "P") for n in positive] + [(n, "W") for n in weak])


def generator_target(answers: Iterable[str]) -> TargetLine:
    """Eq. 15 target: gold answers, lowercase, de-duplicated, ``|``-joined."""
    return join_names((a, "P") for a in answers)
