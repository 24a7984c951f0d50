"""Streaming input: physical lines with numbers, a length cap and strict UTF-8.

Every reader sits on `LineSource`, which never holds more than one line (at most
`max_line_length` bytes) in memory, whatever the file size. Problems with one line (bad
UTF-8, an overlong line) are raised as `LineError` for that line only; the source stays
usable, so `--on-error skip` can carry on with the next line. A `.gz` file is read through
gzip: corrupt or truncated gzip data, and more than `max_decompressed_bytes` of it (a gzip
bomb), are file-level `LoadError`s (the rest of the file cannot be read).
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
import re
import zlib
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Self

from talent_core.errors import LineError, LoadError, RecordTooLong

DEFAULT_MAX_LINE_LENGTH = 1 << 20  # bytes; line-per-triple formats
DEFAULT_MAX_RECORD_LENGTH = 256 << 20  # bytes; one RoG record (a whole question graph)
# physical lines one CSV record may span (quoted fields holding newlines); past it the
# record's first line is a bad row (an unclosed quote) and the lines after it are re-read
DEFAULT_MAX_RECORD_LINES = 32
_CHUNK = 1 << 16
_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)
# lines a reader skips anyway, consumed a buffer at a time (see `LineSource`): blank lines
# (spaces, tabs) between lines, empty lines between CSV records; "\r" only before "\n"
_SKIPPED = {"blank": b" \t\r\n", "empty": b"\r\n"}
_BLANK_START = frozenset(b" \t\r\n")
_NEWLINES = b"\n" * (1 << 20)
_LONE_CR = re.compile(rb"\r(?!\n)")


def _blank_run(buf: bytes, chars: bytes) -> tuple[int, int]:
    """(end, lines) of the run of whole lines made of `chars` at the start of `buf` ((0, 0):
    none). C-speed scans only: millions of newlines (a gzip bomb) cost no per-line work."""
    n = len(buf)
    if n <= len(_NEWLINES) and buf == _NEWLINES[:n]:
        return n, n  # nothing but newlines: one memcmp
    end = buf.rfind(b"\n", 0, n - len(buf.lstrip(chars))) + 1
    if end and b"\r" in chars:
        lone = _LONE_CR.search(buf, 0, end)
        if lone:  # a lone "\r" is text (N-Triples rejects it): the run ends before its line
            end = buf.rfind(b"\n", 0, lone.start()) + 1
    if not end:
        return 0, 0
    return end, buf.count(b"\n", 0, end)


def preview(data: bytes | str, limit: int = 200) -> str:
    """A printable excerpt of a raw line for messages and rejects files."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="backslashreplace")
    return data if len(data) <= limit else data[:limit] + f"... [{len(data)} chars]"


class _Overlong:
    """A physical line over the length cap (its head, its full size)."""

    __slots__ = ("head", "size")

    def __init__(self, head: bytes, size: int):
        self.head = head
        self.size = size


class LineSource:
    """Iterate the decoded lines of a file, one at a time, with 1-based line numbers.

    `next()` returns the line text without its line terminator, or raises `LineError` for a
    bad line (and can be called again for the next one), or `StopIteration` at the end.
    A UTF-8 byte-order mark at the start of ANY line is dropped (line 1, and the start of
    each file of a concatenation `cat a.csv b.csv`): it is never part of a key.

    Record mode (`keep_newline`, used under csv.reader): lines keep their terminator and the
    physical lines since the last `mark()` are kept, at most `max_record_lines` lines and
    `max_line_length` bytes: past either bound `RecordTooLong` is raised (an unclosed quote
    must not swallow the rest of the file). `raw_since_mark()` gives the record's text for
    messages; `unread_after_first()` puts the record's lines after its first back, so that
    a bad first line (a stray quote) costs that line only.

    `skip_blank` ("blank": lines of spaces and tabs; "empty": empty lines, for CSV records,
    where a tab may be a field): such lines between lines / records are not returned, only
    counted; a run of them is consumed a buffer at a time, so a file (a gzip bomb) of
    millions of newlines costs no per-line work. A `.gz` file stops with `LoadError` after
    `max_decompressed_bytes` (default: the setting) or on bad gzip data.
    """

    def __init__(
        self,
        path: Path,
        max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
        max_record_lines: int = DEFAULT_MAX_RECORD_LINES,
        max_decompressed_bytes: int | None = None,
    ):
        self.path = Path(path)
        self.max_line_length = max_line_length
        self.max_record_lines = max_record_lines
        # a .gz file is read through gzip; sizes and positions are the compressed file's
        self._raw: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed in close()
        self.gzip = self.path.suffix == ".gz"
        self._f: BinaryIO = (
            gzip.GzipFile(fileobj=self._raw, mode="rb")  # type: ignore[assignment]
            if self.gzip else self._raw
        )
        if self.gzip and max_decompressed_bytes is None:
            from talent_core.config import get_settings

            max_decompressed_bytes = get_settings().max_decompressed_bytes
        self.max_decompressed_bytes = max_decompressed_bytes
        self._inflated = 0  # bytes read from a .gz so far (decompressed)
        self.skip_blank: str | None = None  # None, "blank" or "empty" (see the docstring)
        self.total_bytes = os.fstat(self._raw.fileno()).st_size
        self.line = 0  # number of the last line returned / raised
        self._mark_line = 1
        # record mode: keep the line ends (csv.reader needs them for newlines inside quoted
        # fields) and the physical lines of the current record (messages, unread); off
        # otherwise, so that nothing accumulates
        self.keep_newline = False
        self._record: list[str] = []  # decoded text of the record's lines
        self._phys: list[bytes | _Overlong] = []  # the same lines as read, for unread
        self._record_bytes = 0
        self._pushback: deque[bytes | _Overlong] = deque()

    # iterator protocol (usable as the input of csv.reader)
    def __iter__(self) -> LineSource:
        return self

    def _physical(self) -> bytes | _Overlong | None:
        """The next physical line as read (with its terminator), or None at the end."""
        if self._pushback:
            return self._pushback.popleft()
        try:
            data = self._f.readline(self.max_line_length + 1)
            if self.gzip:
                self._count(len(data))
            if data and data[0] in _BLANK_START and self.skip_blank and not self._phys:
                data = self._skip_blank_lines(data)  # at a record boundary only
            if not data:
                return None
            if len(data) > self.max_line_length and not data.endswith(b"\n"):
                head = data[:200]
                skipped = len(data)
                while True:  # discard the rest of the overlong line in constant memory
                    more = self._read_line(_CHUNK)
                    skipped += len(more)
                    if not more or more.endswith(b"\n"):
                        break
                return _Overlong(head, skipped)
        except _GZIP_ERRORS as e:
            raise self._gzip_error(e) from None
        return data

    def _read_line(self, size: int) -> bytes:
        data = self._f.readline(size)
        if self.gzip:
            self._count(len(data))
        return data

    def _skip_blank_lines(self, data: bytes) -> bytes:
        """`data` and the lines after it while they are blank (between lines / records,
        never inside a CSV record): counted, not returned; the first other line."""
        chars = _SKIPPED[self.skip_blank or "empty"]
        while data and _blank_run(data, chars)[0] == len(data):
            self.line += 1
            self._skip_run()
            self._mark_line = self.line + 1
            data = self._read_line(self.max_line_length + 1)
        return data

    def _skip_run(self) -> None:
        """Consume (and count in `line`) the blank lines that follow, a buffer at a time."""
        chars = _SKIPPED[self.skip_blank or "empty"]
        while True:
            buf = self._f.peek(_CHUNK)  # type: ignore[attr-defined]
            end, lines = _blank_run(buf, chars)
            if not end:
                return
            self.line += lines
            self._f.read(end)
            if self.gzip:
                self._count(end)
            if end < len(buf):
                return

    def _count(self, n: int) -> None:
        """Add `n` decompressed bytes; past the limit the load stops (a gzip bomb)."""
        self._inflated += n
        limit = self.max_decompressed_bytes
        if limit is not None and self._inflated > limit:
            raise LoadError(
                str(self.path),
                None,
                f"decompresses to more than {limit:,} bytes (stopped after line {self.line}): "
                "a gzip bomb? The limit is the setting TALENT_MAX_DECOMPRESSED_BYTES; raise it "
                "if the file is genuine",
            )

    def _gzip_error(self, e: Exception) -> LoadError:
        """A file-level error for bad gzip data (the file cannot be read past it)."""
        if isinstance(e, EOFError):
            why = "truncated gzip file (the compressed data ends before its end marker)"
        elif str(e).startswith("Not a gzipped file"):
            why = f"not a gzip file, although named .gz ({e})"
        else:
            why = f"corrupt gzip data ({e})"
        return LoadError(str(self.path), None, f"{why}; read up to line {self.line}")

    def __next__(self) -> str:
        item = self._physical()
        if item is None:
            raise StopIteration
        self.line += 1
        if self.keep_newline:
            self._phys.append(item)
            self._record_bytes += item.size if isinstance(item, _Overlong) else len(item)
            if len(self._phys) > 1 and (
                len(self._phys) > self.max_record_lines
                or self._record_bytes > self.max_line_length
            ):
                first = self._phys[0]
                raise RecordTooLong(
                    self._mark_line,
                    "unterminated quoted field: the record starting on this line runs over "
                    f"{len(self._phys) - 1} more lines without closing its quote (limits: "
                    f"{self.max_record_lines} lines, {self.max_line_length} bytes; a stray "
                    '\'"\'?); the lines after it are read as rows of their own',
                    preview(first.head if isinstance(first, _Overlong) else first.rstrip(b"\r\n")),
                )
        if isinstance(item, _Overlong):
            raise LineError(
                self.line,
                f"line longer than the maximum of {self.max_line_length} bytes "
                f"({item.size} bytes; raise --max-line-length if it is legitimate)",
                preview(item.head) + "...",
            )
        data = item
        end = ""
        if data.endswith(b"\n"):
            data, end = data[:-1], "\n"
            if data.endswith(b"\r"):
                data, end = data[:-1], "\r\n"
        if data.startswith(codecs.BOM_UTF8):
            data = data[len(codecs.BOM_UTF8) :]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise LineError(
                self.line,
                f"invalid UTF-8 at byte {e.start} of the line ({data[e.start : e.start + 4]!r})",
                preview(data),
            ) from None
        if self.keep_newline:
            # the terminator as read: csv.reader ends records on either, and a quoted field
            # holding "\r\n" keeps it exactly
            self._record.append(text)
            return text + end
        return text

    def rewind(self) -> None:
        """Back to the start of the file (after peeking at the first line)."""
        self._f.seek(0)
        self._inflated = 0
        self._pushback.clear()
        self.line = 0
        self.mark()

    def mark(self) -> None:
        """Start a new record at the next line."""
        self._record = []
        self._phys = []
        self._record_bytes = 0
        self._mark_line = self.line + 1

    def raw_since_mark(self) -> tuple[int, str]:
        """(first line number, raw text) of the lines read since `mark()`."""
        return self._mark_line, "\n".join(self._record)

    def lines_since_mark(self) -> int:
        """Physical lines read since `mark()` (readable or not)."""
        return len(self._phys)

    def unread_after_first(self) -> None:
        """Put back every line of the current record but its first: the next `next()`
        returns the record's second line again, with its line number."""
        rest = self._phys[1:]
        if rest:
            self._pushback.extendleft(reversed(rest))
            self.line = self._mark_line
        self.mark()

    def position(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        self._f.close()
        self._raw.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def json_depth_limit() -> int:
    """About how deep a JSON value may nest before the parser's recursion limit (messages)."""
    import sys

    return sys.getrecursionlimit()


def iter_json_array(src: LineSource) -> Iterator[tuple[int, object | LineError]]:
    """Stream the elements of a top-level JSON array in memory bounded by the largest
    element (capped at `src.max_line_length`): yields (first line of the element, value),
    or once (line, LineError) when the document is not a well-formed array (iteration
    stops there: the rest cannot be located reliably)."""
    decoder = json.JSONDecoder()
    buf = ""
    buf_line = 1  # line number of buf[0]
    eof = False

    def fill(at_least: int = 1) -> None:
        nonlocal buf, eof
        parts: list[str] = []
        n = 0
        while n < at_least and not eof:
            try:
                line = next(src) + "\n"
            except StopIteration:
                eof = True
                break
            parts.append(line)
            n += len(line)
        buf += "".join(parts)

    def skip_ws() -> bool:
        """Drop leading whitespace; False at end of input."""
        nonlocal buf, buf_line
        while True:
            stripped = buf.lstrip(" \t\r\n")
            buf_line += buf.count("\n", 0, len(buf) - len(stripped))
            buf = stripped
            if buf:
                return True
            if eof:
                return False
            fill()

    def error(reason: str) -> tuple[int, LineError]:
        return buf_line, LineError(buf_line, reason, preview(buf))

    if not skip_ws():
        yield error("empty JSON document (expected an array of records)")
        return
    if buf[0] != "[":
        yield error("expected a JSON array of records")
        return
    buf = buf[1:]
    expect_value = True  # after "[" or ","
    first = True
    while True:
        if not skip_ws():
            yield error("unterminated JSON array (missing ']')")
            return
        if buf[0] == "]" and (first or not expect_value):
            buf = buf[1:]
            if skip_ws():  # nothing but whitespace may follow the array
                yield error(
                    "data after the end of the top-level JSON array (one array per .json "
                    "file; for one record a line use .jsonl)"
                )
            return
        if not expect_value:
            if buf[0] != ",":
                yield error("expected ',' or ']' between array elements")
                return
            buf = buf[1:]
            expect_value = True
            continue
        while True:
            try:
                value, end = decoder.raw_decode(buf)
                break
            except RecursionError:
                yield error(f"invalid JSON: element nested more than {json_depth_limit()} deep")
                return
            except json.JSONDecodeError as e:
                if eof or len(buf) > src.max_line_length:
                    why = (
                        f"invalid JSON: {e.msg}"
                        if eof
                        else f"JSON element longer than {src.max_line_length} bytes"
                    )
                    yield (
                        buf_line + buf.count("\n", 0, e.pos),
                        LineError(buf_line + buf.count("\n", 0, e.pos), why, preview(buf)),
                    )
                    return
                fill(max(_CHUNK, len(buf)))  # doubling keeps re-parsing linear overall
        yield buf_line, value
        buf_line += buf.count("\n", 0, end)
        buf = buf[end:]
        expect_value = False
        first = False
