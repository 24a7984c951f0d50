"""Stage 1: seed entities for a question, with where each came from.

Sources (a seed found by several keeps all of them, in this order):
  "topic"    entities given with the question (MetaQA `[...]`, RoG `q_entity`), resolved by
             exact normalised name, then by id;
  "name"     exact normalised name matches of question spans (word n-grams, n <= 6, with
             edge punctuation and a trailing possessive 's removed), longest first, spans
             not overlapping; a one-word span that is a stopword or shorter than 3
             characters is not looked up;
  "fulltext" the store's fulltext search over names (only when topic and name found none);
  "vector"   the top-k_seed entities by cosine similarity to the question vector.

Anchors, the seeds the expansion starts from: the topic entities when given; else the name
matches (only the multi-word ones when there are any); else the fulltext hits (top
`vector_anchors`); else the top `vector_anchors`
vector seeds. Vector seeds are always recorded but only anchor as the last resort: on
MetaQA a question's top vector hits are mostly look-alike titles whose neighbourhoods are
noise.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence

from talent_core.models import Entity, Seed
from talent_core.store.base import GraphReader, Vector
from talent_core.text import normalise_name

log = logging.getLogger(__name__)

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
    ]
)  # generic English; a dataset's domain words come with its question format (questions.py)
_EDGE_PUNCT = "\"'“”‘’`.,;:!?()[]{}"
MAX_NGRAM = 6


def question_spans(
    question: str, max_n: int = MAX_NGRAM, stopwords: Collection[str] = STOPWORDS
) -> list[tuple[int, int, str]]:
    """(start, end, text) word spans, longest first; each span also as a cleaned variant."""
    words = question.split()
    out: list[tuple[int, int, str]] = []
    for n in range(min(max_n, len(words)), 0, -1):
        for i in range(len(words) - n + 1):
            raw = " ".join(words[i : i + n])
            variants = {raw, raw.strip(_EDGE_PUNCT)}
            cleaned = raw.strip(_EDGE_PUNCT)
            if re.search(r"['’]s$", cleaned):
                variants.add(cleaned[:-2].strip(_EDGE_PUNCT))
            for v in variants:
                if not v:
                    continue
                if n == 1 and (v.lower() in stopwords or len(v) < 3):
                    continue
                out.append((i, i + n, v))
    return out


def name_matches(question: str, store: GraphReader, max_n: int = MAX_NGRAM) -> list[Entity]:
    """Entities whose normalised name equals a question span; longest spans win, spans do
    not overlap. One `entities_by_name` call."""
    return [e for e, _ in name_match_spans(question, store, max_n)]


def name_match_spans(
    question: str,
    store: GraphReader,
    max_n: int = MAX_NGRAM,
    stopwords: Collection[str] = STOPWORDS,
) -> list[tuple[Entity, int]]:
    """`name_matches` with the number of words of the span each entity matched."""
    spans = question_spans(question, max_n, stopwords)
    if not spans:
        return []
    found = store.entities_by_name(sorted({s for _, _, s in spans}))
    by_name: dict[str, list[Entity]] = {}
    for e in found:
        by_name.setdefault(normalise_name(e.name), []).append(e)
    used = [False] * len(question.split())
    out: list[tuple[Entity, int]] = []
    seen: set[str] = set()
    for i, j, text in spans:  # longest first
        hits = by_name.get(normalise_name(text))
        if not hits or any(used[i:j]):
            continue
        used[i:j] = [True] * (j - i)
        for e in hits:
            if e.id not in seen:
                seen.add(e.id)
                out.append((e, j - i))
    return out


def resolve_topic(store: GraphReader, topic: Sequence[str]) -> list[Entity]:
    names = [t for t in topic if t and t.strip()]
    if not names:
        return []
    found = store.entities_by_name(names)
    got = {normalise_name(e.name) for e in found}
    missing = [t for t in names if normalise_name(t) not in got]
    if missing:
        found = list(found) + list(store.entities_by_id(missing))
    if len(found) < len(names):
        log.info("topic entities not in the store: %s", [t for t in names if t not in got])
    return list(found)


class SeedSet:
    """Seeds in discovery order with merged sources; `anchors` are what expansion uses."""

    def __init__(self) -> None:
        self._seeds: dict[str, Seed] = {}
        self.anchor_ids: list[str] = []

    def add(self, entity: Entity, source: str, score: float = 0.0) -> None:
        s = self._seeds.get(entity.id)
        if s is None:
            self._seeds[entity.id] = Seed(
                id=entity.id, name=entity.name, score=score, sources=[source]
            )
            return
        if source not in s.sources:
            s.sources.append(source)
        s.score = max(s.score, score)

    def anchor(self, ids: Sequence[str]) -> None:
        for i in ids:
            if i in self._seeds and i not in self.anchor_ids:
                self.anchor_ids.append(i)

    @property
    def seeds(self) -> list[Seed]:
        return list(self._seeds.values())

    def anchors(self) -> list[Seed]:
        return [self._seeds[i] for i in self.anchor_ids]

    def ids(self) -> set[str]:
        """The ids of every seed (what a Candidate flags as `seed`)."""
        return set(self._seeds)


def text_seeds(
    question: str,
    store: GraphReader,
    topic_entities: Sequence[str] | None = None,
    *,
    name_match: bool = True,
    fulltext_k: int = 3,
    anchors_from_fulltext: int = 1,
    stopwords: Collection[str] = (),
) -> SeedSet:
    """Topic, name and (fallback) fulltext seeds: everything that needs no embedding.
    `stopwords`: a dataset's words, besides the generic STOPWORDS, that one-word spans
    never match."""
    seeds = SeedSet()
    topic = resolve_topic(store, topic_entities or [])
    for e in topic:
        seeds.add(e, "topic", 1.0)
    words = STOPWORDS | {w.lower() for w in stopwords}
    spans = name_match_spans(question, store, stopwords=words) if name_match else []
    for e, _ in spans:
        seeds.add(e, "name", 1.0)
    if topic:
        seeds.anchor([e.id for e in topic])
    elif spans:
        # multi-word matches are specific ("Some Mother's Son"); a one-word match is often a
        # common word that happens to be an entity (MetaQA's tag "director"): one-word
        # matches anchor only when no longer span matched
        longest = max(n for _, n in spans)
        seeds.anchor([e.id for e, n in spans if n >= 2 or longest == 1])
    elif fulltext_k > 0:
        hits = store.search_names(question, fulltext_k)
        for r, e in enumerate(hits):
            seeds.add(e, "fulltext", 1.0 / (r + 1))
        seeds.anchor([e.id for e in hits[:anchors_from_fulltext]])
    return seeds


def add_vector_seeds(
    seeds: SeedSet, store: GraphReader, vector: Vector, k_seed: int, vector_anchors: int = 1
) -> None:
    """Top-k_seed vector hits (recorded); they anchor only when nothing else did."""
    if k_seed <= 0:
        return
    hits = store.top_entities(vector, k_seed)
    for h in hits:
        seeds.add(h.entity, "vector", h.score)
    if not seeds.anchor_ids:
        seeds.anchor([h.entity.id for h in hits[:vector_anchors]])
