"""Base class for readers over a text file (progress in bytes, line errors as BadRow)."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from talent_core.errors import LineError, LoadError, RecordTooLong
from talent_core.loaders.base import BadRow, Item
from talent_core.loaders.io import DEFAULT_MAX_RECORD_LINES, LineSource, preview


def blank(text: str) -> bool:
    """A line of white space only: not data."""
    return not text.strip()


class TextFileReader:
    progress_unit = "B"
    side_output: str | None = None
    format = "text"

    def __init__(
        self,
        path: Path,
        max_line_length: int,
        max_record_lines: int = DEFAULT_MAX_RECORD_LINES,
        max_decompressed_bytes: int | None = None,
    ):
        self.path = Path(path)
        self.source = str(path)
        if not self.path.exists():
            raise LoadError(self.source, None, "no such file")
        if not self.path.is_file():
            raise LoadError(self.source, None, "not a regular file")
        self.src = LineSource(
            self.path,
            max_line_length=max_line_length,
            max_record_lines=max_record_lines,
            max_decompressed_bytes=max_decompressed_bytes,
        )
        if self.src.total_bytes == 0:
            self.src.close()
            raise LoadError(self.source, None, "empty file (0 bytes)")

    def lines(self) -> Iterator[tuple[int, str] | BadRow]:
        """(line number, text) for every physical line but blank ones (spaces and tabs
        only: no reader keeps them), or BadRow for an unreadable one."""
        self.src.skip_blank = "blank"
        while True:
            try:
                text = next(self.src)
            except StopIteration:
                return
            except LineError as e:
                yield BadRow(e.line, e.reason, e.raw)
                continue
            yield self.src.line, text

    def parsed_lines(
        self, parse: Callable[[int, str], Iterable[Item]], skip: Callable[[str], bool]
    ) -> Iterator[Item]:
        """The items ``parse(line number, text)`` makes of every line but those ``skip``
        passes over (not data), unreadable lines as BadRow."""
        for item in self.lines():
            if isinstance(item, BadRow):
                yield item
            elif not skip(item[1]):
                yield from parse(*item)

    def csv_records(self, **fmt: object) -> Iterator[tuple[int, list[str], str] | BadRow]:
        """CSV records (fields may be quoted and span lines): (first line, fields, raw).

        A record spanning lines is bounded (`max_record_lines` lines, `max_line_length`
        bytes); when it passes a bound or does not parse, its FIRST line is the bad row (a
        stray quote there opened the field) and the lines after it are read again as
        records of their own: one bad quote costs one row, never the rest of the file."""
        old = csv.field_size_limit()
        csv.field_size_limit(max(old, self.src.max_line_length))
        self.src.keep_newline = True
        self.src.skip_blank = "empty"  # an empty line between records is no record
        reader = csv.reader(self.src, strict=True, **fmt)  # type: ignore[call-overload]
        while True:
            self.src.mark()
            try:
                fields = next(reader)
            except StopIteration:
                return
            except RecordTooLong as e:
                yield BadRow(e.line, e.reason, e.raw)
                self.src.unread_after_first()
                continue
            except (LineError, csv.Error) as e:
                first, raw = self.src.raw_since_mark()
                spanned = self.src.lines_since_mark()
                if spanned > 1:  # a multi-line record failed: blame its first line only
                    what = e.reason if isinstance(e, LineError) else f"malformed CSV: {e}"
                    at = f" at line {e.line}" if isinstance(e, LineError) else ""
                    yield BadRow(
                        first,
                        "unterminated quoted field: the record starting on this line "
                        f"does not parse over {spanned} lines ({what}{at}; a stray '\"'?); "
                        "the lines after it are read as rows of their own",
                        preview(raw.split("\n", 1)[0]),
                    )
                    self.src.unread_after_first()
                elif isinstance(e, LineError):
                    yield BadRow(e.line, e.reason, e.raw)
                else:
                    yield BadRow(first, f"malformed CSV: {e}", raw[:2000])
                continue
            line, raw = self.src.raw_since_mark()
            if len(raw) > self.src.max_line_length:
                yield BadRow(
                    line,
                    f"record longer than the maximum of {self.src.max_line_length} bytes",
                    raw[:200] + "...",
                )
                continue
            yield line, fields, raw

    def progress(self) -> tuple[int, int | None]:
        return self.src.position(), self.src.total_bytes

    def close(self) -> None:
        self.src.close()
