"""`--method pcst`: TaLenT §2.2 / G-Retriever's candidate S, PCST over prized nodes, with two
prize rules (`prizes`):

* "paper": the anchors' plain n-hop neighbourhood (`neighbourhood.region`), node prizes
  k_v - rank by question-to-name cosine, edge prizes k_e - rank by question-to-relation
  cosine with G-Retriever's tie sharing and cost lowering (`prizes.paper_prizes`), then PCST.
* "default": relation-path prizes, which stay small on 3-hop questions: a beam of the best
  relation paths per depth from the anchors (`paths.expand_paths`), k_v node prizes drawn
  round-robin over the ranked path types (`prizes.path_prizes`), plus the paper's node
  prizes for round(node_sim_share * k_v) nodes of that path graph, PCST with no edge prizes.

Timings: `neighbourhood` (expansion incl. relation scoring; the paper rule's similarity
calls), `pcst` (prizes incl. the default rule's name-similarity call, and PCST).
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
from pydantic import Field

from talent_core.models import Candidate, CandidateEdge, CandidateNode, Edge
from talent_core.retrieval.neighbourhood import OneHop, entity_similarity, ms_since, region
from talent_core.retrieval.paths import PathExpansion, expand_paths
from talent_core.retrieval.pcst import pcst
from talent_core.retrieval.plugin import (
    Control,
    ReportMethod,
    RetrievalContext,
    Retriever,
    RetrieverSettings,
)
from talent_core.retrieval.prizes import Prizes, paper_prizes, path_prizes, rank_prizes
from talent_core.retrieval.relations import RelationScorer
from talent_core.retrieval.seeds import SeedSet

PrizeRule = Literal["default", "paper"]


class PcstSettings(RetrieverSettings):
    """PCST's own settings (defaults: the paper's k_v = k_e = 10, c = 0.5)."""

    k_nodes: int = Field(
        10, ge=0, description="both rules: k_v, prized nodes (paper: by question-to-name "
        "cosine; default: over the ranked relation paths)"
    )
    k_edges: int = Field(
        10, ge=0, description="paper rule: k_e, the top-k_e edges by question-to-relation cosine "
        "get prizes"
    )
    beam: int = Field(
        10, ge=1, description="default rule: relation paths kept per depth of the question-aware "
        "expansion"
    )
    edge_cost: float = Field(0.5, ge=0, description="both rules: PCST cost c per edge")
    prizes: PrizeRule = Field(
        "default", description="prize rule: default = relation paths, paper = G-Retriever's"
    )
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


def retrieve(ctx: RetrievalContext) -> Candidate:
    """The candidate S by the prize rule `ctx.cfg.prizes`."""
    return paper_rule(ctx) if ctx.cfg.prizes == "paper" else default_rule(ctx)


def paper_rule(ctx: RetrievalContext) -> Candidate:
    """G-Retriever's prizes over the plain n-hop neighbourhood, then PCST."""
    cfg, store, enc = ctx.cfg, ctx.store, ctx.encoding
    t = time.perf_counter()
    reg = region(store, ctx.seeds.anchors(), cfg.hops, cfg.caps())
    node_sim_map = entity_similarity(store, ctx.embedder, reg.ids, reg.names, enc.vector)
    rel_sim_map = (store.relation_similarity(reg.relations, enc.vector)
                   if reg.relations else {})
    ctx.timings["neighbourhood"] = ms_since(t)

    t = time.perf_counter()
    node_sim = np.array([node_sim_map.get(i, -1.0) for i in reg.ids], dtype=np.float64)
    rel_sim = np.array([rel_sim_map.get(r, -1.0) for r in reg.relations], dtype=np.float64)
    edge_sim = rel_sim[reg.rel] if len(reg.rel) else np.zeros(0)
    prizes = paper_prizes(node_sim, edge_sim, cfg.k_nodes, cfg.k_edges, cfg.edge_cost)
    edges = [reg.edge(k) for k in range(len(reg.head))]
    cand = select(ctx.question, reg.ids, reg.names, edges, reg.endpoints, prizes, ctx.seeds)
    cand.truncated = reg.truncated
    ctx.timings["pcst"] = ms_since(t)
    return cand


def default_rule(ctx: RetrievalContext) -> Candidate:
    """Relation-path prizes over the question-aware expansion, then PCST."""
    cfg, store, enc = ctx.cfg, ctx.store, ctx.encoding
    t = time.perf_counter()
    scorer = RelationScorer(ctx.embedder)
    one_hop = OneHop(store, cfg.caps())
    exp: PathExpansion = expand_paths(
        [(s.id, s.name) for s in ctx.seeds.anchors()],
        one_hop,
        lambda rels: scorer.scores(enc, rels),
        hops=cfg.hops,
        beam=cfg.beam,
        frontier_per_path=cfg.path_frontier,
        extend=cfg.extend,
    )
    ctx.timings["neighbourhood"] = ms_since(t)

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
        sim_map = entity_similarity(store, ctx.embedder, [exp.ids[j] for j in local.tolist()],
                                    [exp.names[j] for j in local.tolist()], enc.vector)
        sims = np.array([sim_map.get(exp.ids[j], -1.0) for j in local.tolist()])
        extra = np.zeros(len(exp.ids))
        extra[local] = rank_prizes(sims, n_sim)
        prizes = Prizes(
            node=np.maximum(prizes.node, extra), edge=prizes.edge, edge_cost=prizes.edge_cost
        )
    cand = select(ctx.question, exp.ids, exp.names, edges, endpoints, prizes, ctx.seeds)
    cand.truncated = exp.truncated or one_hop.truncated
    ctx.timings["pcst"] = ms_since(t)
    return cand


def select(
    question: str,
    ids: list[str],
    names: list[str],
    edges: list[Edge],
    endpoints: np.ndarray,
    prizes: Prizes,
    seeds: SeedSet,
) -> Candidate:
    """PCST over the prized graph, as a Candidate."""
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


K_SLIDER = Control("k (nodes = edges = path beam)", "k", ("k_nodes", "k_edges", "beam"),
                   lo=1, hi=20,
                   help="k_nodes and, by prize rule, k_edges (paper) or beam (default)")

RETRIEVER = Retriever(
    "pcst", PcstSettings, "k_nodes", retrieve, order=10,
    summary="TaLenT/G-Retriever's candidate S (prize rule --prizes)",
    controls=(K_SLIDER, Control("prize rule", "prizes", ("prizes",), help="", choice=True)),
    report=(
        ReportMethod("pcst-paper", "candidate S, G-Retriever's prizes (prizes=paper)",
                     {"prizes": "paper"}),
        ReportMethod("pcst-default", "candidate S, relation-path prizes (prizes=default)",
                     {"prizes": "default"}),
    ),
)
