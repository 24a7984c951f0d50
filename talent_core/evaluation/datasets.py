"""Question files as report items: MetaQA (hop from the path, type from a `*_qtype` file),
RoG (optional `hop` / `type` fields) and ExplaGraphs (each example's graph is S), and the
questions a run takes (`select_items`: a slice or a seeded sample balanced over hops)."""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talent_core.errors import DataError
from talent_core.evaluation.sweep import ReportError
from talent_core.llm.explagraphs import read_explagraphs, to_candidate
from talent_core.models import Candidate
from talent_core.questions import QARecord, read_questions

log = logging.getLogger(__name__)


@dataclass
class Item:
    """One question of the report: its record, hop / type (None: not derivable), the
    retrieval gold (None: none known) and, for ExplaGraphs, its graph (S)."""

    id: str
    rec: QARecord
    hop: int | None = None
    qtype: str | None = None
    retrieval_gold: list[str] | None = None
    graph: Candidate | None = None


_HOP = re.compile(r"(\d+)[-_]?hop", re.IGNORECASE)


def hop_from_path(path: Path) -> int | None:
    """``1-hop/qa_dev.txt`` or ``qa_1hop.txt`` -> 1 (None when the path says nothing)."""
    for part in reversed(path.parts):
        m = _HOP.search(part)
        if m:
            return int(m.group(1))
    return None


def qtype_file(path: Path) -> Path:
    """MetaQA's question types beside the questions: ``qa_dev.txt`` -> ``qa_dev_qtype.txt``."""
    return path.with_name(f"{path.stem}_qtype{path.suffix}")


def _metaqa_types(path: Path) -> dict[int, str]:
    """Line number -> question type (e.g. actor_to_movie_to_director), when the file exists."""
    qt = qtype_file(path)
    if not qt.is_file():
        return {}
    return {i: line.strip() for i, line in enumerate(qt.read_text(encoding="utf-8")
                                                     .splitlines(), 1) if line.strip()}


def _rog_fields(path: Path) -> dict[str, tuple[int | None, str | None]]:
    """id -> (hop, type) from optional ``hop`` / ``type`` fields of RoG records."""
    out: dict[str, tuple[int | None, str | None]] = {}
    if path.suffix.lower() != ".jsonl":
        return out
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and "id" in obj and ("hop" in obj or "type" in obj):
                hop = obj.get("hop")
                out[str(obj["id"])] = (int(hop) if isinstance(hop, int) else None,
                                       str(obj["type"]) if obj.get("type") else None)
    return out


def read_items(files: Sequence[Path], fmt: str, annotations: Path | None = None) -> list[Item]:
    """Every question of ``files`` as report items (ids prefixed with the file's folder
    when several files are read)."""
    items: list[Item] = []
    for path in files:
        prefix = f"{path.parent.name}/" if len(files) > 1 else ""
        if fmt == "explagraphs":
            items += _explagraphs_items(path, prefix, annotations)
            continue
        types = _metaqa_types(path) if fmt == "metaqa" else {}
        fields = _rog_fields(path) if fmt == "rog" else {}
        path_hop = hop_from_path(path)
        for rec in read_questions(path, fmt):  # type: ignore[arg-type]
            hop, qtype = fields.get(rec.id, (None, None))
            if fmt == "metaqa":  # movie_to_director_to_movie: 2 hops
                qtype = types.get(int(rec.id.rsplit(":", 1)[1]))
                hop = qtype.count("_to_") if qtype else None
            items.append(Item(id=prefix + rec.id, rec=rec, hop=path_hop or hop, qtype=qtype,
                              retrieval_gold=rec.answers))
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise ReportError("question ids repeat across the files (give files in different "
                          "folders)")
    return items


def _explagraphs_items(path: Path, prefix: str, annotations: Path | None) -> list[Item]:
    """ExplaGraphs examples by their example id (`llm.explagraphs.example_id`, the id the
    loader writes to the store); a repeated argument pair (the same example) is read once."""
    gold: dict[str, list[str]] = {}
    if annotations is not None:  # TrainingExample JSONL (annotate-explagraphs --examples-out)
        for line in annotations.read_text(encoding="utf-8").splitlines():
            if line.strip():
                obj = json.loads(line)
                if obj.get("gold_nodes"):  # an empty annotation is no retrieval gold
                    gold[str(obj.get("id"))] = list(obj["gold_nodes"])
    try:
        records = read_explagraphs(path)
    except DataError as e:
        raise ReportError(str(e)) from None
    out = []
    seen: set[str] = set()
    for r in records:
        if r.id in seen:
            log.warning("%s: example %s (the same argument pair) read once", r.source, r.id)
            continue
        seen.add(r.id)
        rec = QARecord(id=r.id, question=r.question, answers=[r.label])
        # examples files written before the example id was the loader's are keyed by r.key()
        out.append(Item(id=prefix + rec.id, rec=rec,
                        retrieval_gold=gold.get(r.id, gold.get(r.key())),
                        graph=to_candidate(r)))
    if annotations is not None:
        log.info("pseudo-gold nodes for %d of %d examples", sum(1 for i in out
                                                                if i.retrieval_gold), len(out))
    return out


def select_items(items: Sequence[Item], limit: int | None, seed: int | None,
                 offset: int = 0) -> list[Item]:
    """The questions a report runs on. Without ``seed``: items[offset : offset + limit] (as
    `talent eval`). With ``seed`` and ``limit``: a seeded sample of ``limit`` questions,
    balanced over hops (each hop's questions shuffled with the seed, then taken in turn,
    hop by hop), in file order."""
    pool = list(items)[offset:]
    if limit is None or limit >= len(pool):
        return pool
    if seed is None:
        return pool[:limit]
    rng = random.Random(seed)
    groups: dict[Any, list[int]] = {}
    for i, it in enumerate(pool):
        groups.setdefault(it.hop if it.hop is not None else -1, []).append(i)
    queues = []
    for hop in sorted(groups):
        idx = groups[hop][:]
        rng.shuffle(idx)
        queues.append(idx)
    chosen: list[int] = []
    while len(chosen) < limit:
        for q in queues:
            if q and len(chosen) < limit:
                chosen.append(q.pop(0))
    return [pool[i] for i in sorted(chosen)]
