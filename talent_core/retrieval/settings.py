"""The retrieval settings every retriever shares (seeds, expansion depth, neighbourhood caps);
each retriever's own settings live in its plug-in (`retrievers/`), and `config` joins them
all into `RetrievalConfig`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from talent_core.store.base import HUB_SCAN
from talent_core.store.base import MAX_HOPS as STORE_MAX_HOPS


class SharedSettings(BaseModel):
    """The settings no single retriever owns."""

    model_config = ConfigDict(extra="forbid")

    hops: int = Field(
        3, ge=1, le=STORE_MAX_HOPS, description="both rules: expansion depth from the anchors "
        "(MetaQA asks up to 3 hops; the bundled adapters were trained on hops-3 candidates)"
    )
    fanout: int = Field(100, ge=1, description="both rules: edges followed per node and hop")
    hub_scan: int = Field(
        HUB_SCAN, ge=1, description="both rules: edges a database store reads per node and hop "
        "before choosing the fanout by key (a hub's cost; store/expand.py)"
    )
    max_nodes: int = Field(3000, ge=1, description="both rules: node cap of the neighbourhood")
    max_edges: int = Field(10000, ge=1, description="both rules: edge cap of the neighbourhood")
    k_seed: int = Field(5, ge=0, description="seeds: vector seed entities")
    vector_anchors: int = Field(
        1, ge=1, description="seeds: vector/fulltext seeds that anchor when no topic or name "
        "match exists"
    )
    name_match: bool = Field(True, description="seeds: exact name matches of question spans")
    fulltext_k: int = Field(3, ge=0, description="seeds: fulltext name matches")
    fuzzy_link: bool = Field(
        True, description="linking: names with small typos or without accents link to the "
        "KG's entity (fuzzy fulltext + folded edit similarity), and an unlinked mention makes "
        "the answer abstain (\"not in the KG\"); off: exact names only"
    )
    link_threshold: float = Field(
        0.75, ge=0.0, le=1.0, description="linking: the least folded-name similarity "
        "(1 - edits / length) at which a mention links to an entity"
    )
    plan_join: int = Field(
        12, ge=0, description="planning: nodes of the planned relation paths (their ends and "
        "the hops reaching them, likeliest path first) that join S, at most; 0: S is the "
        "retriever's alone (no planner: nothing joins)"
    )
    stopwords: list[str] = Field(
        default_factory=list, description="seeds: a dataset's domain words that one-word "
        "question spans never match as names (besides generic English; questions.py)"
    )


def bounds(model: type[BaseModel], name: str) -> tuple[float | None, float | None]:
    """(lower, upper) bound of ``model``'s field ``name`` from its constraints (None: open)."""
    lo = hi = None
    for m in model.model_fields[name].metadata:
        lo = getattr(m, "ge", lo)
        hi = getattr(m, "le", hi)
    return lo, hi


MIN_HOPS, MAX_HOPS = (int(b) for b in bounds(SharedSettings, "hops"))  # type: ignore[arg-type]
