"""The retriever's selections for generator training, cached in JSONL (resumable)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from talent_core.llm.data import TrainingExample
from talent_core.models import Decode, Selection

log = logging.getLogger(__name__)

SELECTIONS_FILE = "retriever_selections.jsonl"


def _selection_key(ex: TrainingExample, tag: str = "") -> str:
    h = hashlib.sha1(tag.encode() + b"\x00" + ex.question.encode())
    for n in ex.candidate.nodes:
        h.update(b"\x00" + n.id.encode())
    return h.hexdigest()


def collect_selections(
    examples: Sequence[TrainingExample],
    retriever: Any,
    cache_path: Path | None = None,
    progress: bool = True,
    tag: str = "",
    decode: Decode = "free",
) -> list[Selection]:
    """Run ``retriever.select`` on every example, caching to JSONL (resumable: an
    interrupted run keeps what it wrote; a partial last line is ignored). ``tag`` names
    the retriever (part of the cache key, so another retriever never reuses the cache);
    ``decode``: free (the paper's greedy line) or ranked (`ranking`)."""
    tag = f"{tag}|{decode}"
    cached: dict[str, Selection] = {}
    if cache_path is not None and cache_path.is_file():
        with cache_path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                try:
                    rec = json.loads(line)
                    cached[rec["key"]] = Selection.model_validate(rec["selection"])
                except (ValueError, KeyError):
                    log.warning("%s:%d: unreadable cache line ignored", cache_path, lineno)
    out: list[Selection] = []
    sink = None
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        sink = cache_path.open("a", encoding="utf-8")
    try:
        for ex in tqdm(examples, desc="retriever selections", unit="q", disable=not progress):
            key = _selection_key(ex, tag)
            sel = cached.get(key)
            if sel is None:
                sel = retriever.select(ex.question, ex.candidate, decode=decode)
                cached[key] = sel
                if sink is not None:
                    sink.write(json.dumps({"key": key, "selection": sel.model_dump()}) + "\n")
                    sink.flush()
            out.append(sel)
    finally:
        if sink is not None:
            sink.close()
    return out
