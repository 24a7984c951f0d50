"""What a format reader yields (rows, bad rows, side-output records) and the `Reader`
Protocol every format implements."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol


class Row(NamedTuple):
    """One triple read from the input. `head`/`tail` are entity ids (keys); the names are
    the display/embedding text when it differs from the id (N-Triples, ExplaGraphs)."""

    line: int
    head: str
    relation: str
    tail: str
    head_name: str | None = None
    tail_name: str | None = None
    raw: str = ""  # the source text, for error messages; may be shared by a record's rows


class BadRow(NamedTuple):
    line: int
    reason: str
    raw: str


class Record(NamedTuple):
    """A side-output record (a RoG question, an ExplaGraphs example) to keep as JSONL."""

    line: int
    data: dict[str, Any]


Item = Row | BadRow | Record


class Reader(Protocol):
    """A streaming reader of one input. Iterating yields items in file order; a reader
    raises `LoadError` itself only for problems that make the whole file unusable."""

    format: str
    source: str  # display name for messages (the path as given)
    progress_unit: str  # "B" (bytes of the file) or "rec"
    side_output: str | None  # name of the side-output kind ("questions", "examples") or None

    def __iter__(self) -> Iterator[Item]: ...

    def progress(self) -> tuple[int, int | None]:
        """(done, total) in `progress_unit`; total None when unknown."""
        ...

    def close(self) -> None: ...
