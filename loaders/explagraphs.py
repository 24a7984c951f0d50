"""ExplaGraphs (GraphQA version): TSV rows `arg1, arg2, label, graph`, where graph is
`(concept; relation; concept)(...)` and label is `support` or `counter`. Some rows are
CSV-quoted (a `"` inside an argument is doubled), so rows are read with the csv module.

Concepts are namespaced per example by default (`concepts="example"`): entity id =
`<example id>/<concept>`, name = the concept. Each ExplaGraphs graph is the explanation of
ONE argument pair: `(women; capable of; help the country)` is a claim made inside that
argument, not a fact about the world. Merging concepts globally would join hubs such as
`people` (278 uses in the sample) across unrelated arguments, so a neighbourhood around one
example would pull in other examples' claims, and the benchmark's "graph of this example"
could no longer be recovered from the store. `concepts="global"` merges by concept text for
users who want one concept graph. Names are still embedded once per batch when repeated.

Example id: `eg-` + the first 12 hex digits of SHA-1 over `arg1 TAB arg2` (stable across
reloads and file edits elsewhere; an identical argument pair is the same example).

Each example is kept for training/evaluation in the side output (default
`<data_dir>/questions/<dataset>.jsonl`): `{"id", "arg1", "arg2", "label", "question",
"answer": [label], "graph": [[h, r, t], ...], "node_ids": [...]}` with the G-Retriever
prompt as `question`. An example whose graph does not parse is rejected whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from talent_core.errors import GraphSyntaxError, LoadError
from talent_core.llm.explagraphs import example_id  # the one example id (reports, training)
from talent_core.loaders.base import BadRow, Item, Record, Row
from talent_core.loaders.io import DEFAULT_MAX_LINE_LENGTH, DEFAULT_MAX_RECORD_LINES, preview
from talent_core.loaders.lines import TextFileReader
from talent_core.questions import LABELS, parse_graph

COLUMNS = ("arg1", "arg2", "label", "graph")
QUESTION = (
    "Argument 1: {arg1}\nArgument 2: {arg2}\nQuestion: Do argument 1 and argument 2 support "
    "or counter each other? Answer in one word in the form of 'support' or 'counter'."
)


class ExplaGraphsReader(TextFileReader):
    format = "explagraphs"
    side_output = "examples"

    def __init__(
        self,
        path: Path,
        concepts: Literal["example", "global"] = "example",
        delimiter: str = "\t",
        max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
        max_record_lines: int = DEFAULT_MAX_RECORD_LINES,
        max_decompressed_bytes: int | None = None,
    ):
        super().__init__(path, max_line_length, max_record_lines, max_decompressed_bytes)
        if concepts not in ("example", "global"):
            raise ValueError("concepts must be 'example' or 'global'")
        self.concepts = concepts
        self.delimiter = delimiter

    def __iter__(self) -> Iterator[Item]:
        idx: dict[str, int] | None = None
        width = len(COLUMNS)  # fields every row must have (the header's when there is one)
        for item in self.csv_records(delimiter=self.delimiter):
            if isinstance(item, BadRow):
                if idx is None:
                    raise LoadError(self.source, item.line, f"header: {item.reason}", item.raw)
                yield item
                continue
            line, fields, raw = item
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if idx is None:
                idx = self._header(fields, line, raw)
                if idx is not None:
                    width = len(fields)
                    continue
                idx = {c: i for i, c in enumerate(COLUMNS)}  # headerless: the GraphQA order
            if len(fields) > width:
                yield BadRow(
                    line,
                    f"too many fields: expected {width}, found {len(fields)} (an unquoted "
                    f"{self.delimiter!r} inside a value?)",
                    preview(raw),
                )
                continue
            yield from self._example(line, fields, raw, idx)
        if idx is None:
            raise LoadError(self.source, None, "empty input: no rows")

    def _header(self, fields: list[str], line: int, raw: str) -> dict[str, int] | None:
        lower = [f.strip().lower() for f in fields]
        if all(c in lower for c in COLUMNS):
            return {c: lower.index(c) for c in COLUMNS}
        if len(fields) == 4 and fields[3].strip().startswith("("):
            return None  # no header: data in arg1, arg2, label, graph order
        found = ", ".join(repr(f) for f in fields[:6])
        hint = ""
        if len(fields) == 1 and "," in raw:
            hint = " (wrong delimiter? the line has commas; the file must be tab-separated)"
        raise LoadError(
            self.source,
            line,
            f"missing columns: expected a header arg1, arg2, label, graph or 4 tab-separated "
            f"fields, found {len(fields)}: {found}{hint}",
        )

    def _example(
        self, line: int, fields: list[str], raw: str, idx: dict[str, int]
    ) -> Iterator[Item]:
        if len(fields) <= max(idx.values()):
            hint = " (wrong delimiter?)" if len(fields) == 1 else ""
            yield BadRow(
                line, f"missing columns: expected 4 fields, found {len(fields)}{hint}", preview(raw)
            )
            return
        arg1, arg2 = fields[idx["arg1"]].strip(), fields[idx["arg2"]].strip()
        label = fields[idx["label"]].strip().lower()
        if not arg1 or not arg2:
            yield BadRow(line, "empty argument", preview(raw))
            return
        if label not in LABELS:
            yield BadRow(line, f"label {label!r} is not 'support' or 'counter'", preview(raw))
            return
        try:
            graph = parse_graph(fields[idx["graph"]])
        except GraphSyntaxError as e:
            yield BadRow(line, f"graph: {e.reason}", preview(raw))
            return
        eid = example_id(arg1, arg2)

        def node(concept: str) -> str:
            return f"{eid}/{concept}" if self.concepts == "example" else concept

        node_ids = list(dict.fromkeys(node(c) for h, _, t in graph for c in (h, t)))
        yield Record(
            line,
            {
                "id": eid,
                "arg1": arg1,
                "arg2": arg2,
                "label": label,
                "question": QUESTION.format(arg1=arg1, arg2=arg2),
                "answer": [label],
                "graph": [list(t) for t in graph],
                "node_ids": node_ids,
            },
        )
        for h, r, t in graph:
            yield Row(line, node(h), r, node(t), h, t, raw=raw)
