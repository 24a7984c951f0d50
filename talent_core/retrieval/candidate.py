"""Candidate subgraph retrieval (TaLenT §2.2 / G-Retriever) over a global KG in a store.

    question -> seeds -> neighbourhood -> prizes -> PCST -> Candidate S

One entry point, `retrieve(question, store, embedder, config, topic_entities, ...)`; the
knobs live in `RetrievalConfig` (keyword overrides accepted). Two prize rules:

* `prizes="paper"`: the paper-faithful rule. Plain n-hop neighbourhood of the anchors
  (`store.neighbourhood`), node prizes k_v - rank by question-to-name cosine, edge prizes
  k_e - rank by question-to-relation cosine with G-Retriever's tie sharing and cost
  lowering, PCST (`pcst.pcst`, G-Retriever's virtual edge nodes).
* `prizes="default"`: relation-path prizes, designed to stay small on 3-hop questions:
  1. question-aware expansion (`paths.expand_paths`): a beam of the `beam` best relation paths
     per depth from the anchors, a path scored by its distinct relations' token max-sim
     to the question (`relations`) minus their mean; the best `extend` of them go one hop
     deeper (each passing on at most `path_frontier` ends); one store call per depth;
  2. k_v node prizes k_v - r drawn round-robin over the ranked path types
     (`prizes.path_prizes`), anchors k_v + 1;
  3. plus the paper's node prizes for round(node_sim_share * k_v) nodes of that path
     graph by question-to-name cosine (names the question mentions: a character, a title);
  4. PCST with cost c and no edge prizes.

Every store access goes through the `GraphReader` Protocol; no Cypher here.
Timings: `seeds` (topic/name/fulltext lookups + vector seeds), `embed` (the question),
`neighbourhood` (expansion incl. relation scoring; the paper rule's similarity calls),
`pcst` (prizes incl. the default rule's name-similarity call, and PCST), `total`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

from talent_core.embedding import Embedder
from talent_core.models import Candidate, CandidateEdge, CandidateNode, Edge
from talent_core.retrieval.config import RetrievalConfig, apply_overrides
from talent_core.retrieval.neighbourhood import OneHop, ms_since, region
from talent_core.retrieval.paths import PathExpansion, expand_paths
from talent_core.retrieval.pcst import pcst
from talent_core.retrieval.prizes import Prizes, paper_prizes, path_prizes, rank_prizes
from talent_core.retrieval.relations import (
    QuestionEncoding,
    RelationScorer,
    encode_question,
    strip_mentions,
)
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
    **overrides,
) -> Candidate:
    """Build the candidate subgraph S for `question`.

    `store`: any `GraphReader`; `embedder`: any `talent_core.embedding.Embedder`;
    `config` and/or keyword `overrides` (any `RetrievalConfig` field: k_nodes, k_edges,
    beam, hops, edge_cost, prizes, fanout, ...);
    `topic_entities`: names given with the question (MetaQA brackets, RoG q_entity).
    `encoding`: a precomputed `encode_question(embedder, question, relation_text)` (benches
    reuse one across configurations; see `question_encoding`). Returns a `Candidate` with timings_ms
    {embed, seeds, neighbourhood, pcst, total}.
    """
    cfg = apply_overrides(config or RetrievalConfig(), **overrides)
    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    seeds, enc = find_seeds(question, store, embedder, cfg, topic_entities, encoding, timings)
    anchors = seeds.anchors()

    if cfg.method == "vector":
        cand = _vector(question, store, enc, seeds, cfg, timings)
    elif cfg.method == "subgraphrag":
        from talent_core.retrieval.subgraphrag import subgraphrag_candidate

        cand = subgraphrag_candidate(question, store, embedder, enc, seeds, cfg, timings)
    elif cfg.method == "grag":
        from talent_core.retrieval.grag import grag_candidate

        cand = grag_candidate(question, store, embedder, enc, seeds, cfg, timings)
    elif cfg.prizes == "paper":
        cand = _paper(question, store, enc, seeds, cfg, timings)
    else:
        cand = _default(question, store, embedder, enc, seeds, cfg, timings)
    cand.method = cfg.method
    cand.anchors = [a.id for a in anchors]
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


def _vector(
    question: str,
    store: GraphReader,
    enc: QuestionEncoding,
    seeds: SeedSet,
    cfg: RetrievalConfig,
    timings: dict[str, float],
) -> Candidate:
    """The vector baseline: the top k_nodes entities by question-to-name cosine (no edges,
    no graph)."""
    t = time.perf_counter()
    hits = store.top_entities(enc.vector, cfg.k_nodes) if cfg.k_nodes else []
    seed_ids = seeds.ids()
    nodes = [CandidateNode(id=h.entity.id, name=h.entity.name, prize=float(h.score),
                           seed=h.entity.id in seed_ids) for h in hits]
    timings["vector"] = ms_since(t)
    return Candidate(question=question, seeds=seeds.seeds, nodes=nodes)


def _paper(
    question: str,
    store: GraphReader,
    enc: QuestionEncoding,
    seeds: SeedSet,
    cfg: RetrievalConfig,
    timings: dict[str, float],
) -> Candidate:
    t = time.perf_counter()
    reg = region(store, seeds.anchors(), cfg.hops, cfg.caps())
    node_sim_map = store.entity_similarity(reg.ids, enc.vector) if reg.ids else {}
    rel_sim_map = (store.relation_similarity(reg.relations, enc.vector)
                   if reg.relations else {})
    timings["neighbourhood"] = ms_since(t)

    t = time.perf_counter()
    node_sim = np.array([node_sim_map.get(i, -1.0) for i in reg.ids], dtype=np.float64)
    rel_sim = np.array([rel_sim_map.get(r, -1.0) for r in reg.relations], dtype=np.float64)
    edge_sim = rel_sim[reg.rel] if len(reg.rel) else np.zeros(0)
    prizes = paper_prizes(node_sim, edge_sim, cfg.k_nodes, cfg.k_edges, cfg.edge_cost)
    edges = [reg.edge(k) for k in range(len(reg.head))]
    cand = _select(question, reg.ids, reg.names, edges, reg.endpoints, prizes, seeds)
    cand.truncated = reg.truncated
    timings["pcst"] = ms_since(t)
    return cand


def _default(
    question: str,
    store: GraphReader,
    embedder: Embedder,
    enc: QuestionEncoding,
    seeds: SeedSet,
    cfg: RetrievalConfig,
    timings: dict[str, float],
) -> Candidate:
    t = time.perf_counter()
    scorer = RelationScorer(embedder)
    one_hop = OneHop(store, cfg.caps())
    exp: PathExpansion = expand_paths(
        [(s.id, s.name) for s in seeds.anchors()],
        one_hop,
        lambda rels: scorer.scores(enc, rels),
        hops=cfg.hops,
        beam=cfg.beam,
        frontier_per_path=cfg.path_frontier,
        extend=cfg.extend,
    )
    timings["neighbourhood"] = ms_since(t)

    t = time.perf_counter()
    used = exp.used_edges()
    edges = [exp.edges[k] for k in used.tolist()]
    endpoints = exp.endpoints[used] if used.size else np.zeros((0, 2), dtype=np.int64)
    prizes = path_prizes(
        len(exp.ids),
        len(edges),
        exp.anchors.tolist(),
        [tp.ends.tolist() for tp in exp.types],
        cfg.k_nodes,
        cfg.edge_cost,
    )
    n_sim = round(cfg.node_sim_share * cfg.k_nodes)
    if n_sim > 0 and endpoints.size:
        local = np.unique(endpoints)
        sim_map = store.entity_similarity([exp.ids[j] for j in local.tolist()], enc.vector)
        sims = np.array([sim_map.get(exp.ids[j], -1.0) for j in local.tolist()])
        extra = np.zeros(len(exp.ids))
        extra[local] = rank_prizes(sims, n_sim)
        prizes = Prizes(
            node=np.maximum(prizes.node, extra), edge=prizes.edge, edge_cost=prizes.edge_cost
        )
    cand = _select(question, exp.ids, exp.names, edges, endpoints, prizes, seeds)
    cand.truncated = exp.truncated or one_hop.truncated
    timings["pcst"] = ms_since(t)
    return cand


def _select(
    question: str,
    ids: list[str],
    names: list[str],
    edges: list[Edge],
    endpoints: np.ndarray,
    prizes: Prizes,
    seeds: SeedSet,
) -> Candidate:
    res = pcst(len(ids), endpoints, prizes.node, prizes.edge, prizes.edge_cost)
    seed_ids = seeds.ids()
    nodes = [
        CandidateNode(
            id=ids[j], name=names[j], prize=float(prizes.node[j]), seed=ids[j] in seed_ids
        )
        for j in res.nodes.tolist()
    ]
    cedges = [
        CandidateEdge(
            src=edges[k].src, rel=edges[k].rel, dst=edges[k].dst, prize=float(prizes.edge[k])
        )
        for k in res.edges.tolist()
    ]
    return Candidate(question=question, seeds=seeds.seeds, nodes=nodes, edges=cedges)
