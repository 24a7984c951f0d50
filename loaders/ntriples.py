"""N-Triples (W3C RDF 1.1 N-Triples), one triple a line.

Terms -> graph:
  * IRI `<http://ex.org/Barack_Obama>`: entity id = the IRI (escapes decoded); name = its
    readable local name: the fragment, else the last path segment, percent-decoded, with
    `_` as a space ("Barack Obama"); the whole IRI when there is no local part.
  * blank node `_:b0`: id = `_:<file stem>:b0` (blank node labels are scoped to one file:
    the same label in two files is two nodes); name = the label.
  * literal `"text"`, `"texte"@fr`, `"1961"^^<xsd:gYear>`: a node like any other entity,
    so literal values (dates, numbers, labels) can be answers. id = the canonical term
    (JSON-quoted text + `@lang` / `^^<datatype>`; `xsd:string` is dropped), name = the text.
  * predicate IRI -> relation text: its local name as written (`birthPlace`), or the full
    IRI with `relation_names="iri"` (when two vocabularies share local names).
Escapes: ECHAR (\\t \\b \\n \\r \\f \\" \\' \\\\) in literals, \\uXXXX and \\UXXXXXXXX in
literals and IRIs; a surrogate pair written as two \\u escapes is combined, a lone
surrogate is an error. Comments (`#`) and blank lines are skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal
from urllib.parse import unquote

from talent_core.errors import NTriplesSyntaxError
from talent_core.loaders.base import BadRow, Item, Row
from talent_core.loaders.io import DEFAULT_MAX_LINE_LENGTH, preview
from talent_core.loaders.lines import TextFileReader

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"

_UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
_IRI = re.compile(r"<((?:[^\x00-\x20<>\"{}|^`\\]|" + _UCHAR + r")*)>")
_BNODE = re.compile(r"_:([\w](?:[\w.\-]*[\w\-])?)")
_STRING = re.compile(r"\"((?:[^\"\\\n\r]|\\[tbnrf\"'\\]|" + _UCHAR + r")*)\"")
_LANG = re.compile(r"@([a-zA-Z]+(?:-[a-zA-Z0-9]+)*)")
_WS = re.compile(r"[ \t]*")
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|([tbnrf\"'\\]))")
_ECHAR = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def unescape(s: str) -> str:
    """Decode N-Triples escapes; surrogate pairs are combined, lone surrogates rejected."""
    if "\\" not in s:
        return s

    def sub(m: re.Match[str]) -> str:
        hex_ = m.group(1) or m.group(2)
        if hex_ is not None:
            cp = int(hex_, 16)
            if cp > 0x10FFFF:
                raise NTriplesSyntaxError(f"escape {m.group(0)} is beyond U+10FFFF")
            return chr(cp)
        return _ECHAR[m.group(3)]

    out = _ESCAPE.sub(sub, s)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in out):
        try:  # a pair of \u escapes for one astral character (common, if not conformant)
            out = out.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            raise NTriplesSyntaxError("lone surrogate in a \\u escape") from None
    return out


def local_name(iri: str, spaces: bool = True) -> str:
    """Readable local name of an IRI: the fragment, else the last path segment, else the
    part after the last ':'; percent-decoded, `_` shown as a space when `spaces`. The whole
    IRI when none of these is non-empty."""

    def readable(part: str) -> str:
        part = unquote(part)
        return (part.replace("_", " ") if spaces else part).strip()

    base = iri
    if "#" in iri:
        base, _, frag = iri.rpartition("#")
        if readable(frag):
            return readable(frag)
    base = base.rstrip("/")
    for sep in ("/", ":"):
        _, found, tail = base.rpartition(sep)
        if found and readable(tail):
            return readable(tail)
    return iri


def _not_data(text: str) -> bool:
    """Blank and comment lines."""
    stripped = text.strip(" \t")
    return not stripped or stripped.startswith("#")


class _Term:
    __slots__ = ("id", "kind", "name")

    def __init__(self, kind: str, id_: str, name: str):
        self.kind = kind  # "iri" | "bnode" | "literal"
        self.id = id_
        self.name = name


class NTriplesReader(TextFileReader):
    format = "ntriples"

    def __init__(
        self,
        path: Path,
        relation_names: Literal["local", "iri"] = "local",
        max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
        max_decompressed_bytes: int | None = None,
    ):
        super().__init__(path, max_line_length, max_decompressed_bytes=max_decompressed_bytes)
        if relation_names not in ("local", "iri"):
            raise ValueError("relation_names must be 'local' or 'iri'")
        self.relation_names = relation_names
        self.bnode_scope = self.path.stem

    def __iter__(self) -> Iterator[Item]:
        return self.parsed_lines(self._row, _not_data)

    def _row(self, line: int, text: str) -> Iterator[Item]:
        try:
            s, p, o = self.parse_line(text)
        except NTriplesSyntaxError as e:
            yield BadRow(line, f"N-Triples syntax: {e}", preview(text))
            return
        rel = p.id if self.relation_names == "iri" else p.name
        yield Row(line, s.id, rel, o.id, s.name, o.name, raw=text)

    # --- parsing --------------------------------------------------------------------
    def parse_line(self, text: str) -> tuple[_Term, _Term, _Term]:
        pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
        s, pos = self._term(text, pos, "subject", allow_literal=False, allow_bnode=True)
        p, pos = self._term(text, pos, "predicate", allow_literal=False, allow_bnode=False)
        o, pos = self._term(text, pos, "object", allow_literal=True, allow_bnode=True)
        if pos >= len(text) or text[pos] != ".":
            raise NTriplesSyntaxError(
                f"expected '.' after the object at column {pos + 1}, found {text[pos : pos + 20]!r}"
                if pos < len(text)
                else "missing final '.'"
            )
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        if pos < len(text) and text[pos] != "#":
            raise NTriplesSyntaxError(f"unexpected text after '.': {text[pos : pos + 20]!r}")
        return s, p, o

    def _term(
        self, text: str, pos: int, role: str, allow_literal: bool, allow_bnode: bool
    ) -> tuple[_Term, int]:
        if pos >= len(text):
            raise NTriplesSyntaxError(f"missing {role}")
        c = text[pos]
        if c == "<":
            m = _IRI.match(text, pos)
            if not m:
                raise NTriplesSyntaxError(f"malformed IRI as {role} at column {pos + 1}")
            iri = unescape(m.group(1))
            if not iri:
                raise NTriplesSyntaxError(f"empty IRI as {role}")
            term = _Term("iri", iri, local_name(iri, spaces=role != "predicate"))
            end = m.end()
        elif c == "_" and allow_bnode:
            m = _BNODE.match(text, pos)
            if not m:
                raise NTriplesSyntaxError(f"malformed blank node as {role} at column {pos + 1}")
            label = m.group(1)
            term = _Term("bnode", f"_:{self.bnode_scope}:{label}", label)
            end = m.end()
        elif c == '"' and allow_literal:
            m = _STRING.match(text, pos)
            if not m:
                raise NTriplesSyntaxError(
                    f"malformed literal at column {pos + 1} (unterminated string or bad escape)"
                )
            value = unescape(m.group(1))
            end = m.end()
            suffix = ""
            if text.startswith("^^", end):
                dm = _IRI.match(text, end + 2)
                if not dm:
                    raise NTriplesSyntaxError(f"malformed datatype IRI at column {end + 3}")
                dt = unescape(dm.group(1))
                if dt != XSD_STRING:
                    suffix = f"^^<{dt}>"
                end = dm.end()
            elif text.startswith("@", end):
                lm = _LANG.match(text, end)
                if not lm:
                    raise NTriplesSyntaxError(f"malformed language tag at column {end + 1}")
                suffix = "@" + lm.group(1).lower()
                end = lm.end()
            term = _Term("literal", json.dumps(value, ensure_ascii=False) + suffix, value)
        else:
            what = "a literal" if c == '"' else repr(c)
            raise NTriplesSyntaxError(
                f"{role} cannot start with {what} at column {pos + 1}"
                + (" (literals are only allowed as objects)" if c == '"' else "")
                + (" (blank nodes are not allowed as predicates)" if c == "_" else "")
            )
        # whitespace between terms is optional in N-Triples (`<s><p><o>.` is valid)
        return term, _WS.match(text, end).end()  # type: ignore[union-attr]
