"""Row checks applied to every format: key rules, name lengths, self-loops, whitespace."""

from __future__ import annotations

import json

from talent_core.loaders.items import Row
from talent_core.loaders.options import LoadOptions
from talent_core.text import key_problem


def _bad_name(value: str, what: str, max_len: int) -> str | None:
    if not value or not value.strip():
        return f"empty {what}"
    if len(value) > max_len:
        return f"{what} longer than {max_len} characters"
    problem = key_problem(value)  # the stores' rule for keys (NUL, surrounding spaces)
    if problem is not None:
        return f"{what} {problem}"
    return None


def normalise_row(row: Row) -> tuple[Row, bool]:
    """Strip surrounding whitespace from ids, relation and names (the stores cannot keep
    it: FalkorDB's exact-match index trims it, so `"ab "` and `"ab"` would be one key).
    Returns the row and whether anything changed."""
    h, r, t = row.head.strip(), row.relation.strip(), row.tail.strip()
    hn = row.head_name.strip() if row.head_name is not None else None
    tn = row.tail_name.strip() if row.tail_name is not None else None
    if (h, r, t, hn, tn) == row[1:6]:
        return row, False
    return row._replace(head=h, relation=r, tail=t, head_name=hn, tail_name=tn), True


def row_text(row: Row) -> str:
    """A readable rendering of a row without its source text (RoG graph triples)."""
    return json.dumps([row.head, row.relation, row.tail], ensure_ascii=False)


def validate_row(row: Row, opts: LoadOptions) -> str | None:
    """The reason a syntactically parsed (and normalised) row is unusable, or None."""
    for value, what in (
        (row.head, "head"),
        (row.relation, "relation"),
        (row.tail, "tail"),
    ):
        reason = _bad_name(value, what, opts.max_name_length)
        if reason:
            return reason
    for value, what in ((row.head_name, "head name"), (row.tail_name, "tail name")):
        if value is not None:
            reason = _bad_name(value, what, opts.max_name_length)
            if reason:
                return reason
    if opts.self_loops == "reject" and row.head == row.tail:
        return f"self-loop: head and tail are the same entity {row.head!r}"
    return None
