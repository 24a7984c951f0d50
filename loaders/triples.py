"""Delimited triples (TSV / CSV / `;` / `|`) with a header row or a column mapping.

Columns:
  * by header: the first row names the columns; `head`, `relation`, `tail` are found under
    these names (case-insensitive) unless `columns` maps them:
        head: head, subject, subj, source, src, h, s
        relation: relation, predicate, pred, rel, property, r, p
        tail: tail, object, obj, target, dst, t, o
    e.g. `--columns head=subj,relation=pred,tail=obj`. Optional `head_name` / `tail_name`
    columns give display names when head/tail are ids.
  * without a header: map every role to a 0-based column position,
    `--columns head=0,relation=1,tail=2`; data then starts on line 1.
The delimiter is sniffed from the first line (tab, comma, semicolon, pipe; the file
extension breaks ties) unless `delimiter` is given. Fields may be CSV-quoted (they may then
contain the delimiter or newlines, over at most `max_record_lines` lines: an unclosed quote
costs its own line only); surrounding whitespace of a field is stripped. Every row must have
as many fields as the header (without a header: as the first data row); a line repeating
the header (files concatenated with `cat`) is skipped.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from talent_core.errors import LineError, LoadError
from talent_core.loaders.base import BadRow, Item, Row
from talent_core.loaders.io import DEFAULT_MAX_LINE_LENGTH, DEFAULT_MAX_RECORD_LINES, preview
from talent_core.loaders.lines import TextFileReader

ROLES = ("head", "relation", "tail", "head_name", "tail_name")
REQUIRED = ("head", "relation", "tail")
SYNONYMS = {
    "head": ("head", "subject", "subj", "source", "src", "h", "s"),
    "relation": ("relation", "predicate", "pred", "rel", "property", "r", "p"),
    "tail": ("tail", "object", "obj", "target", "dst", "t", "o"),
    "head_name": ("head_name",),
    "tail_name": ("tail_name",),
}
DELIMITER_NAMES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}
CANDIDATES = ("\t", ",", ";", "|")


def parse_columns(spec: str | None) -> dict[str, str | int] | None:
    """`head=subj,relation=pred,tail=obj` (names) or `head=0,relation=1,tail=2` (positions)."""
    if spec is None or not spec.strip():
        return None
    out: dict[str, str | int] = {}
    for part in spec.split(","):
        if "=" not in part:
            raise ValueError(f"column mapping {part!r} is not ROLE=COLUMN")
        role, col = (s.strip() for s in part.split("=", 1))
        if role not in ROLES:
            raise ValueError(f"unknown column role {role!r}; expected one of {', '.join(ROLES)}")
        if not col:
            raise ValueError(f"empty column for role {role!r}")
        out[role] = int(col) if col.isdigit() else col
    missing = [r for r in REQUIRED if r not in out]
    if missing:
        raise ValueError(f"column mapping lacks {', '.join(missing)}")
    kinds = {isinstance(v, int) for v in out.values()}
    if len(kinds) > 1:
        raise ValueError("column mapping mixes names and positions")
    return out


def parse_delimiter(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    value = DELIMITER_NAMES.get(value.lower(), value)
    if len(value) != 1:
        raise ValueError(f"delimiter must be one character (or tab/comma/...), got {value!r}")
    return value


class TriplesReader(TextFileReader):
    format = "triples"

    def __init__(
        self,
        path: Path,
        delimiter: str | None = None,
        columns: dict[str, str | int] | None = None,
        max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
        max_record_lines: int = DEFAULT_MAX_RECORD_LINES,
        max_decompressed_bytes: int | None = None,
    ):
        super().__init__(path, max_line_length, max_record_lines, max_decompressed_bytes)
        self.columns = columns
        self.header = columns is None or isinstance(next(iter(columns.values())), str)
        self.delimiter = delimiter or self._sniff()

    def _sniff(self) -> str:
        """Pick the delimiter that splits the first line into the most fields."""
        try:
            first = next(self.src)
        except StopIteration:
            raise LoadError(self.source, None, "empty input: no header row") from None
        except LineError as e:
            raise LoadError(self.source, 1, f"cannot read the first line: {e.reason}") from None
        finally:
            self.src.rewind()
        order = list(CANDIDATES)
        if self.path.suffix.lower() == ".csv":
            order.remove(",")
            order.insert(0, ",")
        best, best_n = None, 1
        for d in order:
            n = len(next(csv.reader([first], delimiter=d)))
            if n > best_n:
                best, best_n = d, n
        if best is None:
            raise LoadError(
                self.source,
                1,
                "cannot detect the delimiter: no tab, comma, semicolon or pipe in the first "
                f"line ({preview(first, 120)!r}); pass --delimiter",
            )
        return best

    def _resolve(self, header: list[str], line: int, raw: str) -> dict[str, int]:
        names = [h.strip() for h in header]
        lower = [h.lower() for h in names]
        idx: dict[str, int] = {}
        for role in ROLES:
            if self.columns is not None:
                if role not in self.columns:
                    continue
                want = str(self.columns[role])
                cands = [i for i, h in enumerate(names) if h == want]
                cands = cands or [i for i, h in enumerate(lower) if h == want.lower()]
            else:
                cands = [i for i, h in enumerate(lower) if h in SYNONYMS[role]]
                cands = cands[:1]
            if cands:
                idx[role] = cands[0]
        missing = [r for r in REQUIRED if r not in idx]
        if missing:
            wanted = (
                ", ".join(f"{r}={self.columns[r]!r}" for r in missing)
                if self.columns
                else ", ".join(missing)
            )
            hint = ""
            if len(names) == 1:
                for d, dn in (("\t", "tabs"), (",", "commas"), (";", "semicolons"), ("|", "pipes")):
                    if d in raw and d != self.delimiter:
                        hint = f"; wrong delimiter? the header has {dn}"
                        break
            raise LoadError(
                self.source,
                line,
                f"missing columns: header has no {wanted} column "
                f"(found {len(names)}: {', '.join(repr(n) for n in names[:10])}; "
                f"delimiter {self.delimiter!r}){hint}. Name them in the header or use "
                "--columns head=COL,relation=COL,tail=COL",
            )
        return idx

    def __iter__(self) -> Iterator[Item]:
        idx: dict[str, int] | None = None
        width: int | None = None  # fields every row must have: the header's, else the 1st row's
        header: list[str] | None = None
        if not self.header:
            assert self.columns is not None
            idx = {r: int(c) for r, c in self.columns.items()}
        records = self.csv_records(delimiter=self.delimiter, skipinitialspace=True)
        for item in records:
            if isinstance(item, BadRow):
                if idx is None:  # an unreadable header line makes the file unusable
                    raise LoadError(self.source, item.line, f"header: {item.reason}", item.raw)
                yield item
                continue
            line, fields, raw = item
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # blank line
            if idx is None:
                idx = self._resolve(fields, line, raw)
                header = [f.strip() for f in fields]
                width = len(fields)
                continue
            if header is not None and [f.strip() for f in fields] == header:
                continue  # the header again: the next file of a concatenation (cat a b)
            need = max(idx[r] for r in REQUIRED) + 1
            if len(fields) < need:
                reason = f"missing columns: expected at least {need} fields, found {len(fields)}"
                if len(fields) == 1:
                    for d in CANDIDATES:
                        if d != self.delimiter and d in raw:
                            reason += f" (wrong delimiter? the file uses {self.delimiter!r})"
                            break
                yield BadRow(line, reason, preview(raw))
                continue
            if width is None:
                width = len(fields)  # no header: the first data row sets the width
            if len(fields) != width:
                yield BadRow(line, self._width_reason(len(fields), width), preview(raw))
                continue
            yield Row(
                line,
                fields[idx["head"]].strip(),
                fields[idx["relation"]].strip(),
                fields[idx["tail"]].strip(),
                _opt(fields, idx.get("head_name")),
                _opt(fields, idx.get("tail_name")),
                raw=raw,
            )
        if idx is None:
            raise LoadError(self.source, None, "empty input: no header row")

    def _width_reason(self, found: int, width: int) -> str:
        """A row whose field count differs from the header's (or, without a header, from the
        first row's): extra fields are never dropped silently, a shifted column would put a
        name in the wrong role."""
        base = "the header's" if self.header else "the first row's"
        if found > width:
            return (
                f"too many fields: expected {width} ({base}), found {found} (an unquoted "
                f"{self.delimiter!r} inside a value? quote the value)"
            )
        return f"missing fields: expected {width} ({base}), found {found}"


def _opt(fields: list[str], i: int | None) -> str | None:
    """An optional display-name column: missing or blank means 'use the id'."""
    if i is None or i >= len(fields):
        return None
    return fields[i].strip() or None
