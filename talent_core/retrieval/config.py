"""`RetrievalConfig`: every knob of candidate retrieval."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from talent_core.store.base import HUB_SCAN, ExpansionCaps
from talent_core.store.base import MAX_HOPS as STORE_MAX_HOPS

PrizeRule = Literal["default", "paper"]
Method = Literal["pcst", "subgraphrag", "grag", "vector"]


class RetrievalConfig(BaseModel):
    """Every knob of candidate retrieval (defaults: the paper's k_v = k_e = 10, c = 0.5)."""

    model_config = ConfigDict(extra="forbid")

    method: Method = Field(
        "pcst", description="retriever: pcst = TaLenT/G-Retriever's candidate S (prize rule "
        "--prizes); subgraphrag = SubgraphRAG's MLP triple scorer, top --top-triples triples; "
        "grag = GRAG's ranked ego-graphs, soft-pruned; vector = top --k-nodes entities by "
        "question-to-name cosine"
    )
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
    hops: int = Field(
        3, ge=1, le=STORE_MAX_HOPS, description="both rules: expansion depth from the anchors "
        "(MetaQA asks up to 3 hops; the bundled adapters were trained on hops-3 candidates)"
    )
    edge_cost: float = Field(0.5, ge=0, description="both rules: PCST cost c per edge")
    prizes: PrizeRule = Field(
        "default", description="prize rule: default = relation paths, paper = G-Retriever's"
    )
    fanout: int = Field(100, ge=1, description="both rules: edges followed per node and hop")
    hub_scan: int = Field(
        HUB_SCAN, ge=1, description="both rules: edges a database store reads per node and hop "
        "before choosing the fanout by key (a hub's cost; store/expand.py)"
    )
    max_nodes: int = Field(3000, ge=1, description="both rules: node cap of the neighbourhood")
    max_edges: int = Field(10000, ge=1, description="both rules: edge cap of the neighbourhood")
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
    top_triples: int = Field(
        100, ge=1, description="subgraphrag: K, the top-K scored triples kept (the paper: "
        "50/100/200)"
    )
    scorer: str | None = Field(
        None, description="subgraphrag: a scorer checkpoint (`talent train subgraphrag`); "
        "default: the one bundled for the embedder"
    )
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
    k_seed: int = Field(5, ge=0, description="seeds: vector seed entities")
    vector_anchors: int = Field(
        1, ge=1, description="seeds: vector/fulltext seeds that anchor when no topic or name "
        "match exists"
    )
    name_match: bool = Field(True, description="seeds: exact name matches of question spans")
    fulltext_k: int = Field(3, ge=0, description="seeds: fulltext name matches")
    stopwords: list[str] = Field(
        default_factory=list, description="seeds: a dataset's domain words that one-word "
        "question spans never match as names (besides generic English; questions.py)"
    )

    def caps(self) -> ExpansionCaps:
        """The neighbourhood caps handed to the store's expansion."""
        return ExpansionCaps(fanout=self.fanout, max_nodes=self.max_nodes,
                             max_edges=self.max_edges, hub_scan=self.hub_scan)


# The settings only one retriever reads (every other field is shared: seeds, hops, caps).
METHOD_FIELDS: dict[str, frozenset[str]] = {
    "pcst": frozenset({"k_nodes", "k_edges", "beam", "edge_cost", "prizes", "path_frontier",
                       "extend", "node_sim_share"}),
    "subgraphrag": frozenset({"top_triples", "scorer"}),
    "grag": frozenset({"ego_hops", "top_egos", "prune"}),
    "vector": frozenset({"k_nodes"}),
}
# The setting that sets each retriever's output size (coverage-vs-size curves sweep it).
SIZE_FIELD: dict[str, str] = {"pcst": "k_nodes", "subgraphrag": "top_triples",
                              "grag": "top_egos", "vector": "k_nodes"}


def foreign_fields(method: str) -> frozenset[str]:
    """The settings ``method`` does not read (another retriever's own)."""
    own = METHOD_FIELDS.get(method, frozenset())
    return frozenset().union(*METHOD_FIELDS.values()) - own


def field_bounds(name: str) -> tuple[float | None, float | None]:
    """(lower, upper) bound of a `RetrievalConfig` field from its constraints (None: open):
    what the CLI, the UI and the retrieval stages read."""
    lo = hi = None
    for m in RetrievalConfig.model_fields[name].metadata:
        lo = getattr(m, "ge", lo)
        hi = getattr(m, "le", hi)
    return lo, hi


MIN_HOPS, MAX_HOPS = (int(b) for b in field_bounds("hops"))  # type: ignore[arg-type]


class RetrievalSettingsError(ValueError):
    """Bad retrieval overrides; `problems` lists (field, what is wrong)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("bad retrieval settings: " + "; ".join(f"{f}: {m}" for f, m in problems))


def apply_overrides(config: RetrievalConfig, **overrides: Any) -> RetrievalConfig:
    """`config` with `overrides` validated like a new RetrievalConfig (unknown keys and
    out-of-range values raise RetrievalSettingsError naming each field)."""
    if not overrides:
        return config
    try:
        return RetrievalConfig.model_validate({**config.model_dump(), **overrides})
    except ValidationError as e:
        problems = []
        for err in e.errors():
            field = ".".join(str(x) for x in err["loc"]) or "?"
            if err["type"] == "extra_forbidden":
                known = ", ".join(RetrievalConfig.model_fields)
                problems.append((field, f"unknown setting (known: {known})"))
            else:
                problems.append((field, f"{err['msg']} (got {err.get('input')!r})"))
        raise RetrievalSettingsError(problems) from None
