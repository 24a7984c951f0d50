"""`--method grag`: GRAG's ranked ego-graphs, merged and soft-pruned (the method:
`talent_core.retrieval.grag`, which needs scipy: imported on first use)."""

from __future__ import annotations

from pydantic import Field

from talent_core.models import Candidate
from talent_core.retrieval.plugin import (
    Control,
    ReportMethod,
    RetrievalContext,
    Retriever,
    RetrieverSettings,
)
from talent_core.store.base import MAX_HOPS as STORE_MAX_HOPS


class GragSettings(RetrieverSettings):
    """GRAG's own settings (defaults: the authors' WebQSP preprocessing)."""

    ego_hops: int = Field(
        2, ge=1, le=STORE_MAX_HOPS, description="grag: K, the radius of the ego-graph of "
        "every node of the anchors' --hops region (the paper's code: 2)"
    )
    top_egos: int = Field(
        10, ge=1, description="grag: N, the top-N ego-graphs by question cosine merged "
        "(the paper's code: 10)"
    )
    prune: float = Field(
        0.1, description="grag: soft-pruning gate on question cosine: an edge stays when its "
        "relation or both its ends reach it, then only what stays connected to an ego centre "
        "(<= 0: no pruning)"
    )


def retrieve(ctx: RetrievalContext) -> Candidate:
    # scipy is heavy: loaded only when this retriever runs
    from talent_core.retrieval.grag import grag_candidate

    return grag_candidate(ctx)


RETRIEVER = Retriever(
    "grag", GragSettings, "top_egos", retrieve, order=30,
    summary="GRAG's ranked ego-graphs, soft-pruned",
    controls=(Control("N ego-graphs", "top_egos", ("top_egos",), lo=1, hi=10),
              Control("ego-graph radius", "ego_hops", ("ego_hops",), lo=1, help="")),
    report=(ReportMethod("grag", "GRAG: top-N ego-graphs by question similarity, merged and "
                         "soft-pruned (N = top_egos)"),),
    llm_report=True,
)
