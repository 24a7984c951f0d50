"""Cypher statements are files under `cypher/<dialect>/NAME.cypher`.

A dialect directory holds only the statements whose text differs from Neo4j's; every other
name falls back to `cypher/neo4j/`.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

DIALECTS = ("neo4j", "falkordb")


@cache
def statement(name: str, dialect: str = "neo4j") -> str:
    if dialect not in DIALECTS:
        raise ValueError(f"unknown Cypher dialect {dialect!r}; expected one of {DIALECTS}")
    root = resources.files("talent_core.cypher")
    for d in (dialect, "neo4j"):
        f = root / d / f"{name}.cypher"
        if f.is_file():
            return _strip_comments(f.read_text(encoding="utf-8"))
    raise KeyError(f"no Cypher statement {name!r} for dialect {dialect!r} under cypher/")


def _strip_comments(text: str) -> str:
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("//")]
    return "\n".join(lines).strip().rstrip(";")


def statements(name: str, dialect: str = "neo4j") -> list[str]:
    """A file holding several statements separated by `;` lines (schema DDL)."""
    return [s.strip() for s in statement(name, dialect).split(";") if s.strip()]
