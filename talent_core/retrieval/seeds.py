"""Stage 1: seed entities for a question, with where each came from.

Sources (a seed found by several keeps all of them, in this order):
  "topic"    entities given with the question (MetaQA `[...]`, RoG `q_entity`), resolved by
             exact normalised name, then by id;
  "name"     exact normalised name matches of question spans (word n-grams, n <= 6, with
             edge punctuation and a trailing possessive 's removed), longest first, spans
             not overlapping; a one-word span that is a stopword or shorter than 3
             characters is not looked up; a span also matches the names written as its
             identifier forms ("Daniel Opare" -> "Daniel_OPARE": `linking.name_keys`);
  "fuzzy"    with `fuzzy_link`, mentions read with small typos or without accents
             (`linking`): a topic with no exact name or id, or question spans when no
             multi-word span matched exactly;
  "fulltext" the store's fulltext search over names (only when topic and name found none);
  "vector"   the top-k_seed entities by cosine similarity to the question vector.

Anchors, the seeds the expansion starts from: the topic entities (and fuzzy-linked topics)
when given; else the fuzzy span links when they are multi-word or no exact span matched;
else the name matches (only the multi-word ones when there are any); else the fulltext hits (top
`vector_anchors`); else the top `vector_anchors`
vector seeds. Vector seeds are always recorded but only anchor as the last resort: on
MetaQA a question's top vector hits are mostly look-alike titles whose neighbourhoods are
noise.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence

from talent_core.models import Entity, Link, Seed
from talent_core.retrieval.linking import EDGE_PUNCT as _EDGE_PUNCT
from talent_core.retrieval.linking import (
    by_name_key,
    link_spans,
    link_topics,
    lookup_names,
    named_by,
    unlinked_mentions,
)
from talent_core.store.base import GraphReader, Vector
from talent_core.text import fold_name

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
    return _entities_of(exact_spans(question, store, stopwords, max_n))


def _entities_of(exact: list[tuple[str, int, int, list[Entity]]]) -> list[tuple[Entity, int]]:
    out: list[tuple[Entity, int]] = []
    seen: set[str] = set()
    for _, i, j, hits in exact:
        for e in hits:
            if e.id not in seen:
                seen.add(e.id)
                out.append((e, j - i))
    return out


def exact_spans(question: str, store: GraphReader, stopwords: Collection[str] = STOPWORDS,
                max_n: int = MAX_NGRAM) -> list[tuple[str, int, int, list[Entity]]]:
    """(span text, start, end, entities) of the spans whose normalised text (or one of its
    identifier forms) is a name: longest first, not overlapping. One `entities_by_name`
    call."""
    spans = question_spans(question, max_n, stopwords)
    if not spans:
        return []
    found = store.entities_by_name(sorted({n for _, _, s in spans for n in lookup_names(s)}))
    by_name = by_name_key(found)
    used = [False] * len(question.split())
    out = []
    for i, j, text in spans:  # longest first
        hits = named_by(text, by_name)
        if not hits or any(used[i:j]):
            continue
        used[i:j] = [True] * (j - i)
        out.append((text, i, j, hits))
    return out


def resolve_topic(store: GraphReader, topic: Sequence[str]) -> list[Entity]:
    names = [t for t in topic if t and t.strip()]
    if not names:
        return []
    by_name = by_name_key(store.entities_by_name([n for t in names for n in lookup_names(t)]))
    named = {t: named_by(t, by_name) for t in names}
    found = list({e.id: e for hits in named.values() for e in hits}.values())
    missing = [t for t in names if not named[t]]
    if missing:
        by_id = {e.id: e for e in store.entities_by_id(missing)}
        found += [e for e in by_id.values() if e.id not in {f.id for f in found}]
        missing = [t for t in missing if t not in by_id]
    if missing:
        log.info("topic entities not in the store: %s", missing)
    return found


class SeedSet:
    """Seeds in discovery order with merged sources; `anchors` are what expansion uses;
    `links`: the entity linking of the question's mentions (`linking`)."""

    def __init__(self) -> None:
        self._seeds: dict[str, Seed] = {}
        self.anchor_ids: list[str] = []
        self.links: list[Link] = []

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
    fuzzy_link: bool = False,
    link_threshold: float = 0.75,
    referents: Sequence[Entity] = (),
) -> SeedSet:
    """Topic, name, fuzzy and (fallback) fulltext seeds: everything that needs no embedding.
    `stopwords`: a dataset's words, besides the generic STOPWORDS, that one-word spans
    never match. `fuzzy_link`: link the mentions (`linking`): a topic without an exact
    name or id, or (without topics) a question without an exact multi-word span, reads
    names with small typos (source "fuzzy"); `seeds.links` records every mention.
    `referents`: the entities a follow-up's referring words read as (`conversation`):
    topics known by id, linked as such."""
    seeds = SeedSet()
    names = [t for t in topic_entities or [] if t and t.strip()]
    topic = resolve_topic(store, names) + list(referents)
    seeds.links += [Link(mention=e.name, id=e.id, name=e.name, score=1.0, how="id",
                         topic=True) for e in referents]
    for e in topic:
        seeds.add(e, "topic", 1.0)
    fuzzy_ids: list[str] = []
    if fuzzy_link and names:
        for link, ids in link_topics(store, names, topic, link_threshold):
            seeds.links.append(link)
            if link.how == "fuzzy":
                for e in store.entities_by_id(ids):
                    seeds.add(e, "fuzzy", link.score)
                fuzzy_ids += ids
    words = STOPWORDS | {w.lower() for w in stopwords}
    exact = exact_spans(question, store, words) if name_match else []
    spans = _entities_of(exact)
    for e, _ in spans:
        seeds.add(e, "name", 1.0)
    if fuzzy_link and not names and not referents:
        fuzzy_ids = _link_spans(seeds, question, store, words, exact, link_threshold)
    if topic or fuzzy_ids and names:
        seeds.anchor([e.id for e in topic] + fuzzy_ids)
    elif fuzzy_ids:
        seeds.anchor(fuzzy_ids)
    elif spans:
        # multi-word matches are specific ("Some Mother's Son"); a one-word match is often a
        # common word that happens to be an entity (MetaQA's tag "director", the film
        # *Made*): one-word matches anchor only when the question wrote them capitalised
        # after its first word, as a name ("did Ridley Scott direct Alien", "who made the
        # movie Jaws"), or when no longer span matched and none is written so
        longest = max(n for _, n in spans)
        named = {e.id for text, i, _, hits in exact if i > 0 and text[:1].isupper()
                 for e in hits}
        seeds.anchor([e.id for e, n in spans
                      if n >= 2 or e.id in named or longest == 1 and not named])
    elif fulltext_k > 0:
        hits = store.search_names(question, fulltext_k)
        for r, e in enumerate(hits):
            seeds.add(e, "fulltext", 1.0 / (r + 1))
        seeds.anchor([e.id for e in hits[:anchors_from_fulltext]])
    return seeds


def _link_spans(seeds: SeedSet, question: str, store: GraphReader, words: Collection[str],
                exact: list[tuple[str, int, int, list[Entity]]], threshold: float) -> list[str]:
    """Links of a question without topics: its exact name spans, then (when none of them
    is multi-word) fuzzy links of the other spans; the fuzzy ids that anchor (the
    multi-word ones when there are any), [] when the exact matches anchor as before."""
    covered = [False] * len(question.split())
    for text, i, j, ents in exact:
        covered[i:j] = [True] * (j - i)
        seeds.links.append(Link(mention=text, id=ents[0].id, name=ents[0].name, score=1.0,
                                how="exact"))
    if any(j - i >= 2 for _, i, j, _ in exact):
        return []
    if not exact:  # a name longer than MAX_NGRAM words, verbatim: the fulltext seeds find it
        folded = f" {fold_name(question)} "
        for e in store.search_names(question, 3):
            if " " in e.name.strip() and f" {fold_name(e.name)} " in folded:
                seeds.links.append(Link(mention=e.name, id=e.id, name=e.name, score=1.0,
                                        how="exact"))
                return []
    # one-word exact matches may be parts of a typo'd title ("Big Fivsh"): spans may
    # overlap them, and a multi-word fuzzy link then anchors in their place
    found = link_spans(store, question, words, threshold)
    found = [f for f in found if f[2] >= 2 or not any(covered[f[3]:f[4]])]
    for link, ids, *_ in found:
        seeds.links.append(link)
        for e in store.entities_by_id(ids):
            seeds.add(e, "fuzzy", link.score)
    if not seeds.links:
        seeds.links = unlinked_mentions(store, question, words)
    if not found:
        return []
    if any(f[2] >= 2 for f in found):
        return [i for _, ids, n, *_ in found if n >= 2 for i in ids]
    # one-word fuzzy links anchor beside the one-word exact matches (which anchor as before)
    return [i for _, ids, *_ in found for i in ids] + [e.id for *_, ents in exact for e in ents]


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
