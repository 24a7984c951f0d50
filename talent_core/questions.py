"""Question files with gold answers, for retrieval, training and evaluation.

Formats:
  metaqa  `question<TAB>answer1|answer2|...`, the topic entity in [brackets]
  rog     RoG / G-Retriever records (jsonl or json list): id, question, answer[],
          q_entity[], a_entity[] (graph ignored here; `talent load --format rog` loads it)
Lines that are blank or start with `#` (after leading spaces) are comments in both line
formats, skipped by `read_questions`; line numbers in ids and errors stay the file's own.
Bad lines raise `QuestionFileError` naming file:line.

A typed question (CLI, UI) is read like a MetaQA one by `parse_question`: names in
[brackets] are topic entities and the brackets never reach the embedder or a model.
ExplaGraphs (the label task) is one more input format: its graph grammar and labels live
here, read by the loader (loaders/explagraphs.py) and the training data (llm/explagraphs.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from talent_core.errors import GraphSyntaxError, QuestionFileError
from talent_core.models import QUESTION_FORMATS, QuestionFormat  # noqa: F401 - re-exported

TOPIC = re.compile(r"\[([^\[\]]+)\]")  # a topic entity marked in the question text

# Domain words of a dataset's questions that are never looked up as one-word entity names
# (MetaQA's KB has a tag "film": "which film ..." must not seed it; its question templates'
# words "director", "language", "starred" ... are tags too, and without brackets they would
# link where the question's real entity is not in the KG; chosen on the validation split,
# bench/results/linking_val_template_stopwords.json; the second block: every other word of
# the templates of >= 3 training questions, bench/template_words.py).
FORMAT_STOPWORDS: dict[QuestionFormat, tuple[str, ...]] = {
    "metaqa": (
        "film", "films", "movie", "movies",
        "director", "directors", "directed", "direct", "writer", "writers", "wrote",
        "written", "write", "writes", "screenwriter", "screenwriters", "actor", "actors",
        "acted", "starred", "star", "stars", "language", "languages", "genre", "genres",
        "release", "released", "year", "years", "dates", "person", "share", "primary",
        "describe", "described", "words", "script", "story", "creator", "fall", "together",
        "same", "main", "spoken", "listed", "appear", "name", "also", "under", "kind", "type",
        "co", "types", "can", "about", "few", "appears", "date", "you", "act", "sort", "who's",
        "screenplay", "scriptwriter", "appeared", "give", "topics", "popular", "describing",
        "author", "rating", "some", "applicable", "terms", "people", "would", "good",
    ),
    "rog": (),
}


def parse_question(
    text: str, topic_entities: Sequence[str] | None = None
) -> tuple[str, list[str]]:
    """(the question as shown to models, topic entities): names in [brackets] become topic
    entities (first, in order) and lose their brackets; given topic entities follow."""
    topics = [t.strip() for t in [*TOPIC.findall(text), *(topic_entities or [])]]
    return TOPIC.sub(lambda m: m.group(1), text).strip(), list(dict.fromkeys(filter(None, topics)))


# --- ExplaGraphs: `(concept; relation; concept)(...)` graphs, support / counter labels -------

LABELS = ("support", "counter")
_GRAPH_PART = re.compile(r"\s*\(([^()]*)\)\s*")


def parse_graph(text: str) -> list[tuple[str, str, str]]:
    """`(a; rel; b)(c; rel; d)` -> [(a, rel, b), (c, rel, d)] (parts stripped); anything
    else raises `GraphSyntaxError` saying where."""
    triples: list[tuple[str, str, str]] = []
    pos = 0
    text = text.strip()
    if not text:
        raise GraphSyntaxError("empty graph")
    while pos < len(text):
        m = _GRAPH_PART.match(text, pos)
        if not m:
            raise GraphSyntaxError(
                f"expected '(concept; relation; concept)' at character {pos + 1}: "
                f"{text[pos : pos + 40]!r}"
            )
        parts = [p.strip() for p in m.group(1).split(";")]
        if len(parts) != 3:
            raise GraphSyntaxError(
                f"triple {len(triples) + 1} {m.group(0).strip()!r} has {len(parts)} parts, "
                "expected 'concept; relation; concept'"
            )
        if not all(parts):
            raise GraphSyntaxError(
                f"triple {len(triples) + 1} {m.group(0).strip()!r} has an empty part"
            )
        triples.append((parts[0], parts[1], parts[2]))
        pos = m.end()
    return triples


class QARecord(BaseModel):
    id: str
    question: str  # as shown to models: MetaQA brackets removed
    answers: list[str] = Field(default_factory=list)
    topic_entities: list[str] = Field(default_factory=list)
    answer_entities: list[str] = Field(default_factory=list)  # RoG a_entity (in-graph answers)


def detect_question_format(path: Path) -> QuestionFormat:
    return "rog" if path.suffix.lower() in {".jsonl", ".json"} else "metaqa"


def read_questions(
    path: Path | str, fmt: QuestionFormat | None = None, limit: int | None = None
) -> Iterator[QARecord]:
    path = Path(path)
    if not path.is_file():
        raise QuestionFileError(f"{path}: no such file")
    fmt = fmt or detect_question_format(path)
    reader = _metaqa if fmt == "metaqa" else _rog
    for n, rec in enumerate(reader(path)):
        if limit is not None and n >= limit:
            return
        yield rec


def read_question_files(paths: Sequence[Path | str], fmt: str | None = None,
                        limit: int | None = None) -> list[QARecord]:
    """The records of several question files, in order, at most ``limit`` (each file's
    format ``fmt`` or guessed from its name); the training commands read their files with
    it. A format that is not one of QUESTION_FORMATS raises `QuestionFileError`."""
    if fmt is not None and fmt not in QUESTION_FORMATS:
        raise QuestionFileError(f"--format must be {' or '.join(QUESTION_FORMATS)}, not {fmt!r}")
    out: list[QARecord] = []
    for p in paths:
        out.extend(read_questions(p, fmt or detect_question_format(Path(p))))  # type: ignore[arg-type]
    return out[:limit]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise QuestionFileError(f"{path}:{lineno}: invalid UTF-8 ({e.reason})") from None
            if not is_comment(line):
                yield lineno, line


def is_comment(line: str) -> bool:
    """A blank line or one whose first non-space character is `#`: skipped by the readers
    of question files (a MetaQA question or a JSON record never starts with `#`)."""
    text = line.strip()
    return not text or text.startswith("#")


def _metaqa(path: Path) -> Iterator[QARecord]:
    for lineno, line in _lines(path):
        parts = line.split("\t")
        if len(parts) != 2:
            raise QuestionFileError(
                f"{path}:{lineno}: expected 'question<TAB>answer1|answer2', "
                f"got {len(parts)} tab-separated fields"
            )
        question, answers = parts
        text, topics = parse_question(question)
        yield QARecord(
            id=f"{path.stem}:{lineno}",
            question=text,
            answers=[a.strip() for a in answers.split("|") if a.strip()],
            topic_entities=topics,
        )


def _rog(path: Path) -> Iterator[QARecord]:
    def convert(obj: object, where: str) -> QARecord:
        if not isinstance(obj, dict) or "question" not in obj:
            raise QuestionFileError(f"{where}: expected a record with a 'question' field")
        try:
            return QARecord(
                id=str(obj.get("id", where)),
                question=str(obj["question"]),
                answers=[str(a) for a in obj.get("answer") or []],
                topic_entities=[str(a) for a in obj.get("q_entity") or []],
                answer_entities=[str(a) for a in obj.get("a_entity") or []],
            )
        except (TypeError, ValueError) as e:
            raise QuestionFileError(f"{where}: {e}") from None

    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise QuestionFileError(f"{path}: not a JSON list of records ({e})") from None
        if not isinstance(data, list):
            raise QuestionFileError(f"{path}: expected a JSON list of records")
        for i, obj in enumerate(data):
            yield convert(obj, f"{path}[{i}]")
        return
    for lineno, line in _lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise QuestionFileError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
        yield convert(obj, f"{path}:{lineno}")
