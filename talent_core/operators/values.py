"""Literal values as the operators compare them (pure): numbers as numbers, ISO dates
(`1984`, `1984-05`, `1984-05-12`, a time after them ignored) as dates, anything else not
comparable. Years are numbers and dates at once: both orders agree."""

from __future__ import annotations

import re
from collections.abc import Sequence

from talent_core.models import Comparator

_NUMBER = re.compile(r"^\s*-?\d+(?:\.\d+)?\s*$")
_DATE = re.compile(r"^\s*(-?\d{1,4})-(\d{2})(?:-(\d{2}))?(?:[T ].*)?$")


def value_key(text: str) -> float | None:
    """A sortable number for a literal, or None: not a number nor a date. A date's key is
    its year plus the fraction of the year gone (so 1984-05-12 sorts after 1984 and before
    1985, and a year compares with a date)."""
    if _NUMBER.match(text):
        return float(text)
    m = _DATE.match(text)
    if m:
        year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
        if 1 <= month <= 12 and 1 <= day <= 31:
            return year + ((month - 1) * 31 + day - 1) / 372
    return None


def holds(key: float, comparator: Comparator, bound: float) -> bool:
    """``key <comparator> bound``."""
    return {"gt": key > bound, "ge": key >= bound, "lt": key < bound,
            "le": key <= bound}[comparator]


def comparable_share(ids: Sequence[str], rows: Sequence[tuple[str, str, str]]) -> float:
    """The share of ``ids`` with a value that parses (`value_key`) among ``rows`` of
    (id, value id, value text); 0 for no ids."""
    have = {i for i, _, v in rows if value_key(v) is not None}
    return len(have & set(ids)) / len(set(ids)) if ids else 0.0
