"""Candidate subgraph retrieval (TaLenT §2.2 / G-Retriever) over a global KG in a store.

    question -> seeds -> neighbourhood -> prizes -> PCST -> Candidate S

One entry point, `retrieve(question, store, embedder, config, topic_entities, ...)`; the
knobs live in `RetrievalConfig` (keyword overrides accepted). Two prize rules:

* `prizes="paper"`: the paper-faithful rule. Plain n-hop neighbourhood of the anchors
  (`store.neighbourhood`), node prizes k_v - rank by question-to-name cosine, edge prizes
  k_e - rank by question-to-relation cosine with G-Retriever's tie sharing and cost
  lowering, PCST (`pcst.pcst`, G-Retriever's virtual edge nodes).
* `prizes="default"`: relation-path prizes, designed to stay small on 3-hop questions:
  1. question-aware expansion (`paths.expand_paths`): a beam of the k_e best relation paths
     per depth from the anchors, a path scored by its distinct relations' token max-sim
     to the question (`relations`) minus their mean; the best `extend` of them go one hop
     deeper (each passing on at most `path_frontier` ends); one store call per depth;
  2. k_v node prizes k_v - r drawn round-robin over the ranked path types
     (`prizes.path_prizes`), anchors k_v + 1;
  3. plus the paper's node prizes for round(node_sim_share * k_v) nodes of that path
     graph by question-to-name cosine (names the question mentions: a character, a title);
  4. PCST with cost c and no edge prizes.

Every store access goes through the GraphStore Protocol methods; no Cypher here.
Timings: `seeds` (topic/name/fulltext lookups + vector seeds), `embed` (the question),
`neighbourhood` (expansion incl. relation scoring; the paper rule's similarity calls),
`pcst` (prizes incl. the default rule's name-similarity call, and PCST), `total`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from talent_core.models import Candidate, CandidateEdge, CandidateNode, Edge
from talent_core.retrieval.neighbourhood import OneHop, check_hops, neighbourhood
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
from talent_core.retrieval.textualise import graph_csv, textualise

log = logging.getLogger(__name__)

PrizeRule = Literal["default", "paper"]


class RetrievalConfig(BaseModel):
    """Every knob of candidate retrieval (defaults: the paper's k_v = k_e = 10, c = 0.5)."""

    model_config = ConfigDict(extra="forbid")

    k_nodes: int = Field(10, ge=0, description="k_v: prized nodes")
    k_edges: int = Field(
        10, ge=0, description="k_e: prized edges (paper) / relation paths kept per depth (default)"
    )
    hops: int = Field(
        3, ge=1, le=3, description="expansion depth from the anchors (MetaQA asks up to 3 hops; "
        "the bundled adapters were trained on hops-3 candidates)"
    )
    edge_cost: float = Field(0.5, ge=0, description="PCST cost c per edge")
    prizes: PrizeRule = "default"
    fanout: int = Field(100, ge=1, description="edges followed per node and hop")
    max_nodes: int = Field(3000, ge=1, description="total node cap of the neighbourhood")
    max_edges: int = Field(10000, ge=1, description="total edge cap of the neighbourhood")
    path_frontier: int = Field(
        16, ge=0, description="default rule: ends of one relation path expanded further (0: all)"
    )
    extend: int = Field(
        4, ge=0, description="default rule: best path types extended to the next depth (0: all)"
    )
    node_sim_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="default rule: round(share * k_nodes) extra node prizes "
        "k - rank by question-to-name cosine (the paper's node prizes) over the path graph",
    )
    k_seed: int = Field(5, ge=0, description="vector seed entities")
    vector_anchors: int = Field(
        1, ge=1, description="vector/fulltext seeds that anchor when no topic or name match exists"
    )
    name_match: bool = True
    fulltext_k: int = Field(3, ge=0)


def question_encoding(embedder, question: str, mentions: Sequence[str] = ()) -> QuestionEncoding:
    """The question's sentence vector plus the token vectors of the question with the
    anchor mentions removed (what relation scores read)."""
    return encode_question(embedder, question, strip_mentions(question, mentions))


def _seed_flags(seeds: SeedSet) -> set[str]:
    return {s.id for s in seeds.seeds}


def _ms(t: float) -> float:
    return (time.perf_counter() - t) * 1000.0


def retrieve(
    question: str,
    store,
    embedder,
    config: RetrievalConfig | None = None,
    topic_entities: Sequence[str] | None = None,
    *,
    encoding: QuestionEncoding | None = None,
    **overrides,
) -> Candidate:
    """Build the candidate subgraph S for `question`.

    `store`: a GraphStore (or anything with its read methods); `embedder`: a
    `talent_core.embedding.Embedder`; `config` and/or keyword `overrides` (any
    `RetrievalConfig` field: k_nodes, k_edges, hops, edge_cost, prizes, fanout, ...);
    `topic_entities`: names given with the question (MetaQA brackets, RoG q_entity).
    `encoding`: a precomputed `encode_question(embedder, question, relation_text)` (benches
    reuse one across configurations; see `question_encoding`). Returns a `Candidate` with timings_ms
    {embed, seeds, neighbourhood, pcst, total}.
    """
    cfg = config or RetrievalConfig()
    if overrides:
        cfg = RetrievalConfig.model_validate({**cfg.model_dump(), **overrides})
    check_hops(cfg.hops)
    t_all = time.perf_counter()
    timings: dict[str, float] = {}

    t = time.perf_counter()
    seeds = text_seeds(
        question,
        store,
        topic_entities,
        name_match=cfg.name_match,
        fulltext_k=cfg.fulltext_k,
        anchors_from_fulltext=cfg.vector_anchors,
    )
    timings["seeds"] = _ms(t)

    t = time.perf_counter()
    enc = encoding or question_encoding(
        embedder, question, [s.name for s in seeds.anchors()] + list(topic_entities or [])
    )
    timings["embed"] = _ms(t)

    t = time.perf_counter()
    add_vector_seeds(seeds, store, enc.vector, cfg.k_seed, cfg.vector_anchors)
    timings["seeds"] += _ms(t)
    anchors = seeds.anchors()

    if cfg.prizes == "paper":
        cand = _paper(question, store, enc, seeds, cfg, timings)
    else:
        cand = _default(question, store, embedder, enc, seeds, cfg, timings)
    timings["total"] = _ms(t_all)
    cand.timings_ms = timings
    log.debug(
        "retrieved |S|=%d nodes, %d edges from %d anchors in %.1f ms",
        len(cand.nodes),
        len(cand.edges),
        len(anchors),
        timings["total"],
    )
    return cand


def _paper(question, store, enc, seeds: SeedSet, cfg: RetrievalConfig, timings) -> Candidate:
    t = time.perf_counter()
    anchors = seeds.anchors()
    sub = neighbourhood(
        store,
        [s.id for s in anchors],
        hops=cfg.hops,
        fanout=cfg.fanout,
        max_nodes=cfg.max_nodes,
        max_edges=cfg.max_edges,
    )
    ids = [n.id for n in sub.nodes]
    names = {n.id: n.name for n in sub.nodes}
    for s in anchors:  # an isolated anchor is still a node of the graph
        if s.id not in names:
            ids.append(s.id)
            names[s.id] = s.name
    index = {i: j for j, i in enumerate(ids)}
    edges = [e for e in sub.edges if e.src in index and e.dst in index]
    node_sim_map = store.entity_similarity(ids, enc.vector) if ids else {}
    rels = sorted({e.rel for e in edges})
    rel_sim_map = store.relation_similarity(rels, enc.vector) if rels else {}
    timings["neighbourhood"] = _ms(t)

    t = time.perf_counter()
    node_sim = np.array([node_sim_map.get(i, -1.0) for i in ids], dtype=np.float64)
    edge_sim = np.array([rel_sim_map.get(e.rel, -1.0) for e in edges], dtype=np.float64)
    prizes = paper_prizes(node_sim, edge_sim, cfg.k_nodes, cfg.k_edges, cfg.edge_cost)
    endpoints = np.array([[index[e.src], index[e.dst]] for e in edges], dtype=np.int64)
    cand = _select(question, ids, [names[i] for i in ids], edges, endpoints, prizes, seeds)
    cand.truncated = sub.truncated
    timings["pcst"] = _ms(t)
    return cand


def _default(question, store, embedder, enc, seeds: SeedSet, cfg, timings) -> Candidate:
    t = time.perf_counter()
    scorer = RelationScorer(embedder)
    one_hop = OneHop(store, fanout=cfg.fanout, max_nodes=cfg.max_nodes, max_edges=cfg.max_edges)
    exp: PathExpansion = expand_paths(
        [(s.id, s.name) for s in seeds.anchors()],
        one_hop,
        lambda rels: scorer.scores(enc, rels),
        hops=cfg.hops,
        beam=cfg.k_edges,
        frontier_per_path=cfg.path_frontier,
        extend=cfg.extend,
    )
    timings["neighbourhood"] = _ms(t)

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
    timings["pcst"] = _ms(t)
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
    seed_ids = _seed_flags(seeds)
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


__all__ = [
    "QuestionEncoding",
    "RetrievalConfig",
    "graph_csv",
    "question_encoding",
    "retrieve",
    "textualise",
]
