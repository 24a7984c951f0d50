"""`--method vector`: the vector baseline, the top `k_nodes` entities by question-to-name
cosine (no edges, no graph). Timings: `vector` (the store's top-k call)."""

from __future__ import annotations

import time

from pydantic import Field

from talent_core.models import Candidate, CandidateNode
from talent_core.retrieval.neighbourhood import ms_since
from talent_core.retrieval.plugin import Control, RetrievalContext, Retriever, RetrieverSettings


class VectorSettings(RetrieverSettings):
    """The vector baseline's one setting (shared with pcst: the same field)."""

    k_nodes: int = Field(10, ge=0, description="vector: the top k entities kept")


def retrieve(ctx: RetrievalContext) -> Candidate:
    """The top k_nodes entities by question-to-name cosine."""
    t = time.perf_counter()
    k = ctx.cfg.k_nodes
    hits = ctx.store.top_entities(ctx.encoding.vector, k) if k else []
    seed_ids = ctx.seeds.ids()
    nodes = [CandidateNode(id=h.entity.id, name=h.entity.name, prize=float(h.score),
                           seed=h.entity.id in seed_ids) for h in hits]
    ctx.timings["vector"] = ms_since(t)
    return Candidate(question=ctx.question, seeds=ctx.seeds.seeds, nodes=nodes)


RETRIEVER = Retriever(
    "vector", VectorSettings, "k_nodes", retrieve, order=40,
    summary="top --k-nodes entities by question-to-name cosine",
    # key "k" as pcst's k slider: switching between the two keeps its value
    controls=(Control("k (nodes)", "k", ("k_nodes",), lo=1, hi=20,
                      help="k_nodes: the top k entities by question-to-name cosine"),),
)
