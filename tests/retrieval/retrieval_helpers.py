"""Retrieval test helpers (imported by conftest.py and the tests): a bag-of-words embedder
(no model) and the fixture KG in the in-memory store.

`BowEmbedder`: each lowercase word (letters/digits; `_` and `.` split words) gets a fixed
pseudo-random unit vector; a text is the normalised sum of its words' vectors. Cosine
similarity therefore tracks word overlap: "who directed Gravity" is close to the relation
"directed_by" and to the entity "Gravity". Deterministic, fast, no torch.

`memory_store`: triples in `talent_core.store.memory.MemoryStore`, the reference store that
runs the read half of the contract suite (it behaves like FalkorDB/Neo4j).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from talent_core.embedding import SentenceTokens
from talent_core.models import Edge
from talent_core.questions import read_questions
from talent_core.store.memory import MemoryStore

DIM = 64
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_WORD = re.compile(r"[a-z0-9]+")


def word_vector(word: str, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(word.encode("utf-8")))
    v = rng.standard_normal(dim)
    return v / np.linalg.norm(v)


class BowEmbedder(SentenceTokens):
    model_name = "bow-test"

    def __init__(self, dim: int = DIM):
        self.dimension = dim
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            words = _WORD.findall(t.lower())
            v = sum((word_vector(w, self.dimension) for w in words), np.zeros(self.dimension))
            n = np.linalg.norm(v)
            out[i] = v / n if n else word_vector("<empty>", self.dimension)
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def kb(text: str) -> list[tuple[str, str, str]]:
    """Triples written as MetaQA's kb.txt writes them: one ``head|relation|tail`` a line
    (other lines skipped)."""
    out = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2]))
    return out


def read_triples(path: Path) -> list[tuple[str, str, str]]:
    return kb(path.read_text(encoding="utf-8"))


def memory_store(triples: Sequence[tuple[str, str, str]], embedder: BowEmbedder) -> MemoryStore:
    """The triples in a MemoryStore (ids = names), entities and relations embedded."""
    store = MemoryStore()
    triples = list(dict.fromkeys(triples))
    ids = list(dict.fromkeys(x for h, _, t in triples for x in (h, t)))
    store.upsert_entities(list(zip(ids, ids, embedder.encode(ids), strict=True)))
    rels = sorted({r for _, r, _ in triples})
    store.upsert_relations(list(zip(rels, embedder.encode(rels), strict=True)))
    store.upsert_triples(as_edges(triples))
    return store


def metaqa_fixture_questions(hop: int) -> list[tuple[str, list[str], list[str]]]:
    """(question without brackets, topic names, answers) from tests/fixtures/metaqa, read
    by the product's question reader."""
    recs = read_questions(FIXTURES / "metaqa" / f"qa_{hop}hop.txt", "metaqa")
    return [(r.question, r.topic_entities, r.answers) for r in recs]


def as_edges(triples) -> list[Edge]:
    return [Edge(src=h, rel=r, dst=t) for h, r, t in triples]
