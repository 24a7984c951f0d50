"""Candidate subgraph retrieval (TaLenT §2.2 / G-Retriever) over a global KG in a store.

    question -> seeds -> the retriever `method` (`registry`) -> Candidate S

One entry point, `retrieve(question, store, embedder, config, topic_entities, ...)`; the
knobs live in `RetrievalConfig` (keyword overrides accepted). Seeding is shared
(`find_seeds`); each retriever is a plug-in under `retrievers/` (pcst with its two prize
rules, vector, subgraphrag, grag, ...) called with one `RetrievalContext`.

Every store access goes through the `GraphReader` Protocol; no Cypher here.
Timings: `seeds` (topic/name/fulltext lookups + vector seeds), `embed` (the question), the
retriever's own stages, `total`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from talent_core.embedding import Embedder
from talent_core.models import Candidate, Entity
from talent_core.retrieval import registry
from talent_core.retrieval.config import RetrievalConfig, apply_overrides
from talent_core.retrieval.neighbourhood import ms_since
from talent_core.retrieval.plugin import RetrievalContext
from talent_core.retrieval.relations import QuestionEncoding, encode_question, strip_mentions
from talent_core.retrieval.seeds import SeedSet, add_vector_seeds, text_seeds
from talent_core.store.base import GraphReader

log = logging.getLogger(__name__)


def question_encoding(
    embedder: Embedder, question: str, mentions: Sequence[str] = ()
) -> QuestionEncoding:
    """The question's sentence vector plus the token vectors of the question with the
    anchor mentions removed (what relation scores read)."""
    return encode_question(embedder, question, strip_mentions(question, mentions))


def retrieve(
    question: str,
    store: GraphReader,
    embedder: Embedder,
    config: RetrievalConfig | None = None,
    topic_entities: Sequence[str] | None = None,
    *,
    encoding: QuestionEncoding | None = None,
    referents: Sequence[Entity] = (),
    **overrides,
) -> Candidate:
    """Build the candidate subgraph S for `question`.

    `store`: any `GraphReader`; `embedder`: any `talent_core.embedding.Embedder`;
    `config` and/or keyword `overrides` (any `RetrievalConfig` field: k_nodes, k_edges,
    beam, hops, edge_cost, prizes, fanout, ...);
    `topic_entities`: names given with the question (MetaQA brackets, RoG q_entity).
    `encoding`: a precomputed `encode_question(embedder, question, relation_text)` (benches
    reuse one across configurations; see `question_encoding`). `referents`: a follow-up's
    anchors, known by id (`conversation`). Returns a `Candidate` with
    timings_ms {seeds, embed, the retriever's stages (pcst: neighbourhood, pcst), total}.
    """
    cfg = apply_overrides(config or RetrievalConfig(), **overrides)
    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    seeds, enc = find_seeds(question, store, embedder, cfg, topic_entities, encoding, timings,
                           referents)
    anchors = seeds.anchors()

    ctx = RetrievalContext(question, store, embedder, enc, seeds, cfg, timings)
    cand = registry.get(cfg.method).retrieve(ctx)
    cand.method = cfg.method
    cand.anchors = [a.id for a in anchors]
    cand.links = seeds.links
    timings["total"] = ms_since(t_all)
    cand.timings_ms = timings
    log.debug(
        "retrieved |S|=%d nodes, %d edges from %d anchors in %.1f ms",
        len(cand.nodes),
        len(cand.edges),
        len(anchors),
        timings["total"],
    )
    return cand


def find_seeds(
    question: str,
    store: GraphReader,
    embedder: Embedder,
    cfg: RetrievalConfig,
    topic_entities: Sequence[str] | None = None,
    encoding: QuestionEncoding | None = None,
    timings: dict[str, float] | None = None,
    referents: Sequence[Entity] = (),
) -> tuple[SeedSet, QuestionEncoding]:
    """Stage 1: topic/name/fulltext seeds, the question's encoding, vector seeds; the
    anchors (`SeedSet.anchors`) are where expansion starts. ``timings`` gets `seeds` and
    `embed` (ms)."""
    timings = {} if timings is None else timings
    t = time.perf_counter()
    seeds = text_seeds(
        question,
        store,
        topic_entities,
        name_match=cfg.name_match,
        fulltext_k=cfg.fulltext_k,
        anchors_from_fulltext=cfg.vector_anchors,
        stopwords=cfg.stopwords,
        fuzzy_link=cfg.fuzzy_link,
        link_threshold=cfg.link_threshold,
        referents=referents,
    )
    timings["seeds"] = ms_since(t)

    t = time.perf_counter()
    enc = encoding or question_encoding(
        embedder, question, [s.name for s in seeds.anchors()] + list(topic_entities or [])
    )
    timings["embed"] = ms_since(t)

    t = time.perf_counter()
    add_vector_seeds(seeds, store, enc.vector, cfg.k_seed, cfg.vector_anchors)
    timings["seeds"] += ms_since(t)
    return seeds, enc
