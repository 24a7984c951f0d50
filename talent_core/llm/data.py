"""Training records (JSONL in/out).

One `TrainingExample` a line: the question, its candidate subgraph S, the gold answers
(the generator's target; the retriever's V* unless ``gold_nodes`` is given) and, for
label tasks such as ExplaGraphs, ``gold_nodes`` = the pseudo-gold nodes of Appendix A.2.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from talent_core.errors import DataError
from talent_core.models import Candidate


class TrainingExample(BaseModel):
    question: str
    candidate: Candidate
    answers: list[str] = Field(default_factory=list)
    gold_nodes: list[str] | None = None  # retriever V* when it is not the answer list
    id: str | None = None

    @property
    def retriever_gold(self) -> list[str]:
        return self.gold_nodes if self.gold_nodes is not None else self.answers


def read_examples(path: Path | str) -> list[TrainingExample]:
    path = Path(path)
    out: list[TrainingExample] = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                out.append(TrainingExample.model_validate_json(line))
            except ValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ())) or "record"
                raise DataError(f"{path}:{lineno}: {where}: {first.get('msg')}") from e
    return out


def write_jsonl(path: Path | str, records: Iterable[BaseModel | dict]) -> int:
    """Write all records to a temporary file, then rename (nothing half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(r.model_dump_json() if isinstance(r, BaseModel) else json.dumps(r))
            f.write("\n")
            n += 1
    os.replace(tmp, path)
    return n


def write_examples(path: Path | str, examples: Iterable[TrainingExample]) -> int:
    return write_jsonl(path, examples)
