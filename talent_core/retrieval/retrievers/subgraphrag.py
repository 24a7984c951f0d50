"""`--method subgraphrag`: SubgraphRAG's MLP triple scorer, the top `top_triples` triples of
the anchors' neighbourhood (the method: `talent_core.retrieval.subgraphrag`, which needs
torch: imported on first use)."""

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


class SubgraphragSettings(RetrieverSettings):
    """SubgraphRAG's own settings."""

    top_triples: int = Field(100, ge=1, description="subgraphrag: K, the top-K scored triples "
                             "kept (the paper: 50/100/200)")
    scorer: str | None = Field(None, description="subgraphrag: a scorer checkpoint (`talent "
                               "train subgraphrag`); default: the one bundled for the embedder")


def retrieve(ctx: RetrievalContext) -> Candidate:
    # torch is heavy: loaded only when this retriever runs
    from talent_core.retrieval.subgraphrag import subgraphrag_candidate

    return subgraphrag_candidate(ctx)


RETRIEVER = Retriever(
    "subgraphrag", SubgraphragSettings, "top_triples", retrieve, order=20,
    summary="SubgraphRAG's MLP triple scorer, top --top-triples triples",
    controls=(Control("K triples", "top_triples", ("top_triples",), lo=5, hi=200),),
    report=(ReportMethod("subgraphrag", "SubgraphRAG: top-K triples by the MLP scorer with "
                         "directional distance encoding (K = top_triples)"),),
    llm_report=True,
)
