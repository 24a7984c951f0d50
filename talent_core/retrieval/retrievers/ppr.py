"""`--method ppr`: personalised PageRank over the anchors' region. The anchors' n-hop
neighbourhood (`neighbourhood.region`, undirected as the store expands it), PageRank by
power iteration that restarts on the anchors with probability `ppr_restart`; the top
`ppr_nodes` nodes by score and the edges among them are S, a node's prize its score.
Timings: `neighbourhood` (the store's expansion), `rank` (PageRank, top nodes)."""

from __future__ import annotations

import time

import numpy as np
from pydantic import Field

from talent_core.models import Candidate, CandidateEdge, CandidateNode
from talent_core.retrieval.neighbourhood import ms_since, region
from talent_core.retrieval.plugin import (
    Control,
    ReportMethod,
    RetrievalContext,
    Retriever,
    RetrieverSettings,
)


class PprSettings(RetrieverSettings):
    """Personalised PageRank's own settings."""

    ppr_nodes: int = Field(20, ge=1, le=500,
                           description="ppr: the top nodes by personalised PageRank kept")
    ppr_restart: float = Field(0.15, ge=0.01, le=1,
                               description="ppr: restart probability to the anchors per step")


def pagerank(n: int, endpoints: np.ndarray, restart: np.ndarray, alpha: float,
             iterations: int = 100, tol: float = 1e-10) -> np.ndarray:
    """Personalised PageRank on the undirected multigraph of ``endpoints`` ((E, 2) local
    ids): r = alpha * p + (1 - alpha) * W r, W the random walk (a dangling node's mass goes
    back to p), p = ``restart`` normalised."""
    p = restart / restart.sum()
    ep = np.asarray(endpoints, dtype=np.int64).reshape(-1, 2)
    src = np.concatenate([ep[:, 0], ep[:, 1]])
    dst = np.concatenate([ep[:, 1], ep[:, 0]])
    deg = np.bincount(src, minlength=n).astype(np.float64)
    r = p.copy()
    for _ in range(iterations):
        share = np.divide(r, deg, out=np.zeros(n), where=deg > 0)
        walked = np.bincount(dst, weights=share[src], minlength=n).astype(np.float64)
        walked += r[deg == 0].sum() * p
        nxt = alpha * p + (1 - alpha) * walked
        done = np.abs(nxt - r).sum() < tol
        r = nxt
        if done:
            break
    return r


def retrieve(ctx: RetrievalContext) -> Candidate:
    """The top `ppr_nodes` nodes of the anchors' region by personalised PageRank."""
    cfg = ctx.cfg
    t = time.perf_counter()
    reg = region(ctx.store, ctx.seeds.anchors(), cfg.hops, cfg.caps())
    ctx.timings["neighbourhood"] = ms_since(t)

    t = time.perf_counter()
    if reg.n == 0:
        ctx.timings["rank"] = ms_since(t)
        return Candidate(question=ctx.question, seeds=ctx.seeds.seeds, truncated=reg.truncated)
    scores = pagerank(reg.n, reg.endpoints, reg.topic.astype(np.float64), cfg.ppr_restart)
    keep = np.argsort(-scores, kind="stable")[:cfg.ppr_nodes]  # ties: the region's order
    kept = np.zeros(reg.n, dtype=bool)
    kept[keep] = True
    seed_ids = ctx.seeds.ids()
    nodes = [CandidateNode(id=reg.ids[j], name=reg.names[j], prize=float(scores[j]),
                           seed=reg.ids[j] in seed_ids) for j in keep.tolist()]
    edges = [CandidateEdge(**reg.edge(k).model_dump(), prize=0.0)
             for k in np.flatnonzero(kept[reg.head] & kept[reg.tail]).tolist()]
    ctx.timings["rank"] = ms_since(t)
    return Candidate(question=ctx.question, seeds=ctx.seeds.seeds, nodes=nodes, edges=edges,
                     truncated=reg.truncated)


RETRIEVER = Retriever(
    "ppr", PprSettings, "ppr_nodes", retrieve, order=50,
    summary="personalised PageRank from the anchors, top --ppr-nodes nodes",
    controls=(Control("PPR nodes", "ppr_nodes", ("ppr_nodes",), hi=100),),
    report=(ReportMethod("ppr", "personalised PageRank over the anchors' region, top nodes "
                         "and the edges among them (N = ppr_nodes)"),),
    llm_report=True,
)
