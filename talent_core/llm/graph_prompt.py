"""G-Retriever's graph soft prompt: a GNN over the generator's graph, mean-pooled, projected
to the LLM's hidden size and prepended to the prompt's token embeddings (``inputs_embeds``).

The generator then reads the graph twice, as G-Retriever does: as text (eq. 14's CSV rows)
and as ``tokens`` soft token(s) in front of the prompt. GRAG's "graph view" is the same
mechanism.

* Graph (`prompt_graph`, pure): the eq. 14 context as a graph: the selected nodes of S, the
  other endpoint of every E-hat edge (so the edges connect), E-hat, and the retriever's
  out-of-S names as isolated nodes; with no selection (the no-retriever mode) all of S.
  The text rows may be truncated to a token budget (``text_budget``); the graph never is.
* Features (`graph_tensors`): node feature = the store's vector of the entity (the embedding
  of its name), edge feature = the store's vector of its relation (of the relation's name);
  names outside the KG, and everything in training, are embedded with the same model and
  text, which gives the same vectors.
* Encoder (`gnn.GraphPrompt`): ``layers`` x TransformerConv (torch_geometric; edge features in
  the attention, ``heads`` heads concatenated) with LayerNorm + ReLU between layers, mean
  pooling over nodes, then G-Retriever's projector Linear -> Sigmoid -> Linear to
  ``tokens`` x the LLM hidden size.

Deviations from G-Retriever (Graph Transformer, 4 layers, 1024 hidden, BatchNorm, 1024-d
SentenceBERT features, 7B LLM): 2 layers of 256 by default, LayerNorm instead of BatchNorm
(batch 1 and one-node graphs make batch statistics meaningless), 384-d MiniLM features, and
the soft tokens go first in the sequence (before the chat template) instead of after BOS.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from pydantic import BaseModel

from talent_core.llm.parsing import clean_name
from talent_core.models import Candidate, Selection

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

WEIGHTS_FILE = "graph_prompt.safetensors"
CONFIG_FILE = "graph_prompt.json"


class GraphPromptConfig(BaseModel):
    """The encoder's shape (saved beside its weights) and how the generator uses it."""

    llm_hidden: int  # the base model's hidden size
    in_dim: int = 384  # the embedding model's dimension
    embedding_model: str = "minilm"
    hidden: int = 256
    layers: int = 2
    heads: int = 4
    dropout: float = 0.0
    proj_hidden: int = 1024
    tokens: int = 1  # soft tokens prepended


# --- the graph (pure) ------------------------------------------------------------------


@dataclass(frozen=True)
class GraphInput:
    """Node texts (with their KG ids where they are KG nodes) and (src index, relation,
    dst index) edges."""

    nodes: list[str] = field(default_factory=list)
    edges: list[tuple[int, str, int]] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)  # parallel to nodes; None: not in KG


class VectorSource(Protocol):
    """Where stored vectors come from (the graph store: `GraphReader`)."""

    def entity_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    def relation_vectors(self, names: Sequence[str]) -> dict[str, np.ndarray]: ...


def prompt_graph(candidate: Candidate, selection: Selection | None) -> GraphInput:
    """The generator's eq. 14 graph (all of S when ``selection`` is None), untruncated.
    Nodes with the same lowercase name (one row in the prompt's text) are one node, with
    the KG spelling and id of the first."""
    by_id = {n.id: n for n in candidate.nodes}
    if selection is None:
        keep = list(by_id)
        edges = [e for e in candidate.edges if e.src in by_id and e.dst in by_id]
        extra: list[str] = []
    else:
        chosen = {n.id for n in selection.selected if n.id in by_id}
        edges = [e for e in candidate.edges if (e.src in chosen or e.dst in chosen)
                 and e.src in by_id and e.dst in by_id]
        ends = {x for e in edges for x in (e.src, e.dst)}
        keep = [i for i in by_id if i in chosen or i in ends]
        extra = [clean_name(o.name) for o in selection.out_of_candidate]
    index: dict[str, int] = {}
    nodes: list[str] = []
    ids: list[str | None] = []

    def node(name: str, kg_id: str | None) -> int:
        key = name.lower()
        if key not in index:
            index[key] = len(nodes)
            nodes.append(name)
            ids.append(kg_id)
        return index[key]

    local = {i: node(by_id[i].name, i) for i in keep}
    for name in extra:
        if name:
            node(name, None)
    out_edges = list(dict.fromkeys((local[e.src], e.rel, local[e.dst]) for e in edges))
    return GraphInput(nodes, out_edges, ids)


def graph_tensors(graph: GraphInput, embed: Callable[[list[str]], np.ndarray],
                  store: VectorSource | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x (N, d), edge_index (2, E), edge_attr (E, d)) float32 on CPU. With ``store``, the
    stored vectors of the KG nodes and relations are read from it; what it lacks (names
    outside the KG) is embedded, each unique string once."""
    import torch

    rels = list(dict.fromkeys(r for _, r, _ in graph.edges))
    node_vecs: dict[int, np.ndarray] = {}
    rel_vecs: dict[str, np.ndarray] = {}
    if store is not None:
        known = {i: kg for i, kg in enumerate(graph.ids) if kg is not None}
        found = store.entity_vectors(list(dict.fromkeys(known.values()))) if known else {}
        node_vecs = {i: found[kg] for i, kg in known.items() if kg in found}
        rel_vecs = store.relation_vectors(rels) if rels else {}
    texts = list(dict.fromkeys([*(n for i, n in enumerate(graph.nodes) if i not in node_vecs),
                                *(r for r in rels if r not in rel_vecs)]))
    if texts:
        embedded = np.asarray(embed(texts), dtype=np.float32)
        by_text = dict(zip(texts, embedded, strict=True))
        node_vecs.update({i: by_text[n] for i, n in enumerate(graph.nodes) if i not in node_vecs})
        rel_vecs.update({r: by_text[r] for r in rels if r not in rel_vecs})
    dim = next(iter(node_vecs.values())).shape[0] if node_vecs else 1
    x = torch.from_numpy(np.stack([node_vecs[i] for i in range(len(graph.nodes))]).astype(
        np.float32) if graph.nodes else np.zeros((0, dim), np.float32))
    edge_index = torch.tensor([[s for s, _, _ in graph.edges], [d for _, _, d in graph.edges]],
                              dtype=torch.long).reshape(2, -1)
    edge_attr = torch.from_numpy(np.stack([rel_vecs[r] for _, r, _ in graph.edges]).astype(
        np.float32) if graph.edges else np.zeros((0, dim), np.float32))
    return x, edge_index, edge_attr


# --- the encoder -----------------------------------------------------------------------


def build(config: GraphPromptConfig) -> Any:
    """A freshly initialised graph prompt module (`gnn.GraphPrompt`)."""
    from talent_core.llm.gnn import GraphPrompt  # torch + torch_geometric: only when used

    return GraphPrompt(config)


def save(module: Any, out_dir: Path) -> None:
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    save_file(state, str(out_dir / WEIGHTS_FILE))
    (out_dir / CONFIG_FILE).write_text(module.config.model_dump_json(indent=2) + "\n")


def has_graph_prompt(adapter_dir: Path | str) -> bool:
    return (Path(adapter_dir) / CONFIG_FILE).is_file()


def load(adapter_dir: Path, device: str = "cpu") -> Any:
    """The trained graph prompt saved beside a generator adapter (eval mode)."""
    from safetensors.torch import load_file

    path = Path(adapter_dir)
    try:
        config = GraphPromptConfig.model_validate(json.loads((path / CONFIG_FILE).read_text()))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path / CONFIG_FILE}: unreadable graph prompt config: {e}") from e
    module = build(config)
    module.load_state_dict(load_file(str(path / WEIGHTS_FILE)))
    return module.to(device).eval()


# --- the LLM side ----------------------------------------------------------------------


def prefixed_embeds(model: Any, input_ids: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
    """``inputs_embeds`` (B, P + T, H): the soft tokens ``prefix`` (P, H), the same for every
    row, then the token embeddings of ``input_ids`` (B, T)."""
    import torch

    tokens = model.get_input_embeddings()(input_ids)
    pre = prefix.to(dtype=tokens.dtype, device=tokens.device)
    return torch.cat([pre.unsqueeze(0).expand(tokens.shape[0], -1, -1), tokens], dim=1)


class GraphPrompter:
    """A trained `GraphPrompt` with where its features come from (the store's vectors,
    else the embedding function): GraphInput -> soft tokens."""

    def __init__(self, module: Any, embed: Callable[[list[str]], np.ndarray],
                 store: VectorSource | None = None):
        self.module = module
        self.embed = embed
        self.store = store

    @property
    def config(self) -> GraphPromptConfig:
        return self.module.config

    def __call__(self, graph: GraphInput) -> torch.Tensor:
        import torch

        device = next(self.module.parameters()).device
        x, ei, ea = (t.to(device) for t in graph_tensors(graph, self.embed, self.store))
        from talent_core.llm.threads import torch_threads

        with torch.inference_mode(), torch_threads():
            return self.module(x, ei, ea)

