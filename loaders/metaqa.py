"""MetaQA `kb.txt`: one `head|relation|tail` triple a line (WikiMovies KB).

Entity ids are the names themselves, unchanged (MetaQA keys entities by name). The real
kb.txt has 11 self-loops such as `Malcolm X|written_by|Malcolm X` (a film named after its
writer: two entities that share a name), so self-loops are kept by default.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from talent_core.loaders.base import BadRow, Item, Row
from talent_core.loaders.io import DEFAULT_MAX_LINE_LENGTH, preview
from talent_core.loaders.lines import TextFileReader, blank


class MetaQAReader(TextFileReader):
    format = "metaqa"

    def __init__(
        self,
        path: Path,
        max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
        max_decompressed_bytes: int | None = None,
    ):
        super().__init__(path, max_line_length, max_decompressed_bytes=max_decompressed_bytes)

    def __iter__(self) -> Iterator[Item]:
        return self.parsed_lines(_row, blank)


def _row(line: int, text: str) -> Iterator[Item]:
    parts = text.split("|")
    if len(parts) != 3:
        yield BadRow(line, _field_count_reason(text, len(parts)), preview(text))
    else:
        yield Row(line, parts[0], parts[1], parts[2], raw=text)


def _field_count_reason(text: str, n: int) -> str:
    reason = f"expected 3 fields 'head|relation|tail', found {n}"
    if n == 1:
        for delim, name in (("\t", "tabs"), (",", "commas"), (";", "semicolons")):
            if delim in text:
                return reason + f" (wrong delimiter? the line has {name}; use --format triples)"
    return reason
