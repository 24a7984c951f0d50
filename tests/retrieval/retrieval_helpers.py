"""Retrieval test helpers (imported by conftest.py and the tests): a bag-of-words embedder
(no model) and a dict-backed store.

`BowEmbedder`: each lowercase word (letters/digits; `_` and `.` split words) gets a fixed
pseudo-random unit vector; a text is the normalised sum of its words' vectors. Cosine
similarity therefore tracks word overlap: "who directed Gravity" is close to the relation
"directed_by" and to the entity "Gravity". Deterministic, fast, no torch.

`DictStore`: the read side of the GraphStore Protocol over a list of triples, using the
stores' own expansion code (`talent_core.store.expand`) with the same per-node edge order
(neighbour id, relation, direction) as their Cypher, so it behaves like FalkorDB/Neo4j.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from talent_core.models import Edge, Entity, ScoredEntity, ScoredRelation, Subgraph
from talent_core.store.expand import expand, validate_caps
from talent_core.text import normalise_name

DIM = 64
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_WORD = re.compile(r"[a-z0-9]+")


def word_vector(word: str, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(word.encode("utf-8")))
    v = rng.standard_normal(dim)
    return v / np.linalg.norm(v)


class BowEmbedder:
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


def read_triples(path: Path) -> list[tuple[str, str, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("|")
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2]))
    return out


class DictStore:
    dialect = "dict"

    def __init__(self, triples: Sequence[tuple[str, str, str]], embedder: BowEmbedder):
        self.names: dict[str, str] = {}
        self.edges = list(dict.fromkeys(triples))
        for h, _, t in self.edges:
            self.names.setdefault(h, h)
            self.names.setdefault(t, t)
        ids = list(self.names)
        self.ent_vec = dict(zip(ids, embedder.encode([self.names[i] for i in ids]), strict=True))
        rels = sorted({r for _, r, _ in self.edges})
        self.rel_vec = dict(zip(rels, embedder.encode(rels), strict=True))
        self.rows: dict[str, list[tuple[str, str, bool]]] = {}
        for h, r, t in self.edges:
            self.rows.setdefault(h, []).append((t, r, True))
            self.rows.setdefault(t, []).append((h, r, False))
        for v in self.rows.values():
            v.sort()
        self.calls: list[str] = []

    def top_entities(self, vector, k: int) -> list[ScoredEntity]:
        self.calls.append("top_entities")
        q = np.asarray(vector)
        scored = sorted(((-float(v @ q), i) for i, v in self.ent_vec.items()))[:k]
        return [ScoredEntity(entity=Entity(id=i, name=self.names[i]), score=-s) for s, i in scored]

    def top_relations(self, vector, k: int) -> list[ScoredRelation]:
        q = np.asarray(vector)
        scored = sorted(((-float(v @ q), r) for r, v in self.rel_vec.items()))[:k]
        return [ScoredRelation(name=r, score=-s) for s, r in scored]

    def entities_by_name(self, names: Sequence[str]) -> list[Entity]:
        self.calls.append("entities_by_name")
        want = {normalise_name(n) for n in names}
        return [Entity(id=i, name=n) for i, n in self.names.items() if normalise_name(n) in want]

    def entities_by_id(self, ids: Sequence[str]) -> list[Entity]:
        return [Entity(id=i, name=self.names[i]) for i in dict.fromkeys(ids) if i in self.names]

    def search_names(self, text: str, k: int) -> list[Entity]:
        self.calls.append("search_names")
        words = set(_WORD.findall(text.lower()))
        hits = [
            (-len(words & set(_WORD.findall(n.lower()))), i)
            for i, n in self.names.items()
            if words & set(_WORD.findall(n.lower()))
        ]
        return [Entity(id=i, name=self.names[i]) for _, i in sorted(hits)[:k]]

    def neighbourhood(self, seed_ids, hops=2, fanout=50, max_nodes=2000, max_edges=5000):
        self.calls.append(f"neighbourhood:{hops}")
        validate_caps(hops, fanout, max_nodes, max_edges)
        seeds = self.entities_by_id(seed_ids)
        if not seeds:
            return Subgraph()

        def fetch(frontier, limit):
            for fid in frontier:
                for mid, rel, out in self.rows.get(fid, [])[:limit]:
                    yield (fid, out, rel, mid, self.names[mid])

        return expand(seeds, fetch, hops, fanout, max_nodes, max_edges)

    def entity_similarity(self, ids, vector) -> dict[str, float]:
        q = np.asarray(vector)
        return {i: float(self.ent_vec[i] @ q) for i in ids if i in self.ent_vec}

    def relation_similarity(self, names, vector) -> dict[str, float]:
        q = np.asarray(vector)
        return {r: float(self.rel_vec[r] @ q) for r in names if r in self.rel_vec}


def metaqa_fixture_questions(hop: int) -> list[tuple[str, list[str], list[str]]]:
    """(question without brackets, topic names, answers) from tests/fixtures/metaqa."""
    out = []
    for line in (FIXTURES / "metaqa" / f"qa_{hop}hop.txt").read_text().splitlines():
        q, _, a = line.partition("\t")
        out.append(
            (re.sub(r"\[([^\]]+)\]", r"\1", q), re.findall(r"\[([^\]]+)\]", q), a.split("|"))
        )
    return out


def as_edges(triples) -> list[Edge]:
    return [Edge(src=h, rel=r, dst=t) for h, r, t in triples]
