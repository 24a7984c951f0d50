"""RoG-webqsp / RoG-cwq records: `id, question, answer, q_entity, a_entity, graph`.

Sources: `.jsonl` (one record a line), `.json` (an array of records, streamed element by
element; a `.json` file holding one object a line is read as JSONL), `.parquet` (the Hugging
Face dataset files; streamed by record batch), or a Hugging Face dataset name such as
`rmanluo/RoG-webqsp` with a split (needs the optional `datasets` package and network).

Graph: every record's `graph` ([[head, relation, tail], ...]) goes into ONE KG; entity ids
are the Freebase names themselves (`Barack Obama`, CVT nodes `m.0xxxx`), so an entity that
several questions share is one node. Relations stay as written (`people.person.place_of_birth`).

Questions: each record is also kept for training and evaluation as one JSON line
`{"id", "question", "answer", "q_entity", "a_entity", "graph_size", "source"}` in the side
output (by default `<data_dir>/questions/<dataset>.jsonl`, replaced whole on each complete
load; see loaders.api). The per-question graph itself is not duplicated there: it is in
the store.

Line numbers in messages are file lines (jsonl/json) or 1-based record numbers (parquet,
Hugging Face).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from talent_core.errors import LineError, LoadError
from talent_core.loaders.base import BadRow, Item, Record, Row
from talent_core.loaders.io import (
    DEFAULT_MAX_RECORD_LENGTH,
    iter_json_array,
    json_depth_limit,
    preview,
)
from talent_core.loaders.lines import TextFileReader, blank
from talent_core.text import char_problem, printable

REQUIRED_FIELDS = ("question", "graph")
_PARQUET_BATCH = 64  # records per parquet read; bounded memory whatever the file size


def _as_list(value: Any) -> list[Any] | None:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    if hasattr(value, "tolist"):  # numpy arrays from some dataset backends
        return list(value.tolist())
    return None


def _dump(value: Any) -> str:
    """A preview of a JSON value for messages; never raises (a value nested almost to the
    parser's limit can exceed the recursion limit again when dumped from deeper down)."""
    try:
        return preview(json.dumps(value, ensure_ascii=False, default=str))
    except (RecursionError, ValueError):
        return f"<a JSON {type(value).__name__} nested too deeply to show>"


def record_items(rec: Any, line: int, source_name: str) -> Iterator[Item]:
    """Validate one RoG record: a Record (the question) and one Row per graph triple,
    or a single BadRow for a record that is unusable as a whole."""

    def raw() -> str:  # only computed for a rejected record (records can be large)
        return _dump(rec)

    if not isinstance(rec, dict):
        yield BadRow(line, f"record is a JSON {type(rec).__name__}, expected an object", raw())
        return
    missing = [f for f in REQUIRED_FIELDS if f not in rec]
    if missing:
        yield BadRow(line, f"record lacks field(s) {', '.join(missing)}", raw())
        return
    rid = rec.get("id")
    rid = str(rid) if rid is not None else f"{source_name}:{line}"
    problem = _surrogate_problem(rid)
    if problem:
        yield BadRow(line, f"record id {printable(rid)!r} {problem}", raw())
        return
    question = rec["question"]
    if not isinstance(question, str) or not question.strip():
        yield BadRow(line, f"record {rid!r}: question is not a non-empty string", raw())
        return
    problem = _surrogate_problem(question)
    if problem:
        yield BadRow(line, f"record {rid!r}: question {problem}", raw())
        return
    lists: dict[str, list[Any]] = {}
    for name in ("answer", "q_entity", "a_entity"):
        value = _as_list(rec.get(name))
        if value is None or not all(isinstance(v, str) for v in value):
            yield BadRow(line, f"record {rid!r}: {name} is not a list of strings", raw())
            return
        bad = next((p for v in value if (p := _surrogate_problem(v))), None)
        if bad:
            yield BadRow(line, f"record {rid!r}: {name} {bad}", raw())
            return
        lists[name] = [v.strip() for v in value]  # as the graph's keys (see base.normalise_row)
    graph = _as_list(rec["graph"])
    if graph is None:
        yield BadRow(line, f"record {rid!r}: graph is not a list of triples", raw())
        return
    yield Record(
        line,
        {
            "id": rid,
            "question": question,
            "answer": lists["answer"],
            "q_entity": lists["q_entity"],
            "a_entity": lists["a_entity"],
            "graph_size": len(graph),
            "source": source_name,
        },
    )
    for i, t in enumerate(graph):
        t = _as_list(t)
        if t is None or len(t) != 3 or not all(isinstance(x, str) for x in t):
            yield BadRow(
                line,
                f"record {rid!r}: graph[{i}] is not a [head, relation, tail] triple of strings",
                _dump(graph[i]),
            )
            continue
        yield Row(line, t[0], t[1], t[2])  # raw: see base.row_text (built only if rejected)


def _surrogate_problem(text: str) -> str | None:
    """A lone surrogate (JSON `"\\ud800"`) cannot be written as UTF-8: the record's question
    file could not hold it. Other characters of a question or answer are kept as given."""
    problem = char_problem(text)
    return problem if problem is not None and "surrogate" in problem else None


class RoGFileReader(TextFileReader):
    """.jsonl / .json"""

    format = "rog"
    side_output = "questions"

    def __init__(self, path: Path, max_line_length: int = DEFAULT_MAX_RECORD_LENGTH):
        super().__init__(path, max_line_length)
        self.array = self._is_array()

    def _is_array(self) -> bool:
        """A `.json` file starting with `[` is one array of records; a `.jsonl` file is
        always one record a line (a line holding an array is a bad row, and the records
        after it are still read)."""
        if self.path.suffix.lower() == ".jsonl":
            return False
        with open(self.path, "rb") as f:
            head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        return head.startswith(b"[")

    def __iter__(self) -> Iterator[Item]:
        name = self.path.name
        if self.array:
            for line, value in iter_json_array(self.src):
                if isinstance(value, LineError):
                    # a malformed JSON array cannot be read past the error (element
                    # boundaries are lost), so it is a file-level error in every mode
                    raise LoadError(self.source, value.line, value.reason, value.raw)
                yield from record_items(value, line, name)
            return
        yield from self.parsed_lines(self._jsonl_items, blank)

    def _jsonl_items(self, line: int, text: str) -> Iterator[Item]:
        """A JSONL line's record items, or the BadRow of a line that is not JSON."""
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as e:
            yield BadRow(line, f"invalid JSON: {e.msg} at column {e.colno}", preview(text))
            return
        except RecursionError:
            yield BadRow(
                line,
                f"invalid JSON: nested more than {json_depth_limit()} levels deep",
                preview(text),
            )
            return
        yield from record_items(rec, line, self.path.name)


class RoGParquetReader:
    format = "rog"
    side_output = "questions"
    progress_unit = "rec"

    def __init__(self, path: Path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = Path(path)
        self.source = str(path)
        if not self.path.is_file():
            raise LoadError(self.source, None, "no such file")
        try:
            self.pf = pq.ParquetFile(self.path)
        except (OSError, pa.ArrowException) as e:
            raise LoadError(self.source, None, f"not a readable Parquet file: {e}") from None
        names = set(self.pf.schema_arrow.names)
        missing = [f for f in REQUIRED_FIELDS if f not in names]
        if missing:
            raise LoadError(
                self.source,
                None,
                f"missing columns: {', '.join(missing)} (found {', '.join(sorted(names))})",
            )
        self.columns = [
            c for c in ("id", "question", "answer", "q_entity", "a_entity", "graph") if c in names
        ]
        self.total = self.pf.metadata.num_rows
        self.done = 0

    def __iter__(self) -> Iterator[Item]:
        if self.total == 0:
            raise LoadError(self.source, None, "empty input: the Parquet file has no rows")
        for batch in self.pf.iter_batches(batch_size=_PARQUET_BATCH, columns=self.columns):
            for rec in batch.to_pylist():
                self.done += 1
                yield from record_items(rec, self.done, self.path.name)

    def progress(self) -> tuple[int, int | None]:
        return self.done, self.total

    def close(self) -> None:
        close = getattr(self.pf, "close", None)
        if close is not None:
            close()


class RoGHubReader:
    """A Hugging Face dataset by name (`rmanluo/RoG-webqsp`, split `test`), streamed."""

    format = "rog"
    side_output = "questions"
    progress_unit = "rec"

    def __init__(self, name: str, split: str = "train"):
        self.source = f"{name}[{split}]"
        self.name = name
        self.split = split
        self.done = 0
        self.total: int | None = None
        self._records = self._open()

    def _open(self) -> Iterable[Any]:
        try:
            import datasets  # optional: pip install 'talent-graphqa[hf]'
        except ImportError:
            raise LoadError(
                self.source,
                None,
                "loading a Hugging Face dataset by name needs the optional package "
                "`datasets` (pip install 'talent-graphqa[hf]') and access to the Hub; "
                "otherwise download the dataset's .parquet/.jsonl files and pass their path",
            ) from None
        try:
            ds = datasets.load_dataset(self.name, split=self.split, streaming=True)
        except Exception as e:  # noqa: BLE001 - network, unknown name/split: many types
            raise LoadError(
                self.source,
                None,
                f"could not open Hugging Face dataset {self.name!r} split {self.split!r}: "
                f"{type(e).__name__}: {e}",
            ) from None
        info = getattr(ds, "info", None)
        splits = getattr(info, "splits", None) or {}
        if self.split in splits:
            self.total = getattr(splits[self.split], "num_examples", None)
        return ds

    def __iter__(self) -> Iterator[Item]:
        label = f"{self.name.rsplit('/', 1)[-1]}-{self.split}"
        for rec in self._records:
            self.done += 1
            yield from record_items(rec, self.done, label)

    def progress(self) -> tuple[int, int | None]:
        return self.done, self.total

    def close(self) -> None:
        pass


def open_rog(path: str, split: str | None, max_line_length: int | None):
    """The reader for a RoG source: a local file by extension, else a Hub dataset name."""
    p = Path(path)
    if p.exists():
        if p.suffix.lower() == ".parquet":
            return RoGParquetReader(p)
        return RoGFileReader(p, max_line_length or DEFAULT_MAX_RECORD_LENGTH)
    if _looks_like_hub_name(path):
        return RoGHubReader(path, split or "train")
    raise LoadError(path, None, "no such file (and not a Hugging Face dataset name owner/name)")


def _looks_like_hub_name(s: str) -> bool:
    parts = s.split("/")
    return len(parts) == 2 and all(parts) and not s.endswith((".json", ".jsonl", ".parquet"))
