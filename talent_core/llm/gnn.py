"""The graph soft prompt's encoder as a torch module: TransformerConv layers, mean pooling and
G-Retriever's projector (see `graph_prompt`). Imported only when a graph prompt is built or
loaded: torch and torch_geometric are slow imports that other commands should not pay."""

from __future__ import annotations

import warnings
from typing import Protocol

import torch
from torch import nn

with warnings.catch_warnings():  # its own internals (torch.jit.script, .distributed)
    warnings.simplefilter("ignore", DeprecationWarning)
    from torch_geometric.nn import TransformerConv


class Shape(Protocol):
    """The encoder's shape: what it reads of `graph_prompt.GraphPromptConfig` (a Protocol,
    so this module does not import the one that imports it)."""

    llm_hidden: int
    in_dim: int
    hidden: int
    layers: int
    heads: int
    dropout: float
    proj_hidden: int
    tokens: int


class GraphPrompt(nn.Module):
    """``layers`` x TransformerConv (edge features in the attention) with LayerNorm + ReLU
    between layers, mean pooling over nodes, then Linear -> Sigmoid -> Linear to ``tokens``
    soft tokens of the LLM's hidden size. ``config`` is kept (saved beside the weights)."""

    def __init__(self, config: Shape):
        super().__init__()
        c = config
        if c.hidden % c.heads:
            raise ValueError(f"hidden ({c.hidden}) must be a multiple of heads ({c.heads})")
        self.config = c
        dims = [c.in_dim] + [c.hidden] * c.layers
        self.convs = nn.ModuleList(
            TransformerConv(dims[i], c.hidden // c.heads, heads=c.heads, concat=True,
                            edge_dim=c.in_dim, dropout=c.dropout)
            for i in range(c.layers)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(c.hidden) for _ in range(c.layers - 1))
        self.projector = nn.Sequential(
            nn.Linear(c.hidden, c.proj_hidden), nn.Sigmoid(),
            nn.Linear(c.proj_hidden, c.tokens * c.llm_hidden),
        )

    def encode(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor
               ) -> torch.Tensor:
        """Mean-pooled graph vector (hidden,); zeros for a graph without nodes."""
        if x.shape[0] == 0:
            return torch.zeros(self.config.hidden, device=x.device)
        h = x
        for i, conv in enumerate(self.convs):
            h = conv(h, edge_index, edge_attr)
            if i < len(self.norms):
                h = torch.relu(self.norms[i](h))
        return h.mean(dim=0)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor
                ) -> torch.Tensor:
        """The soft tokens, (tokens, llm_hidden)."""
        z = self.projector(self.encode(x, edge_index, edge_attr))
        return z.view(self.config.tokens, self.config.llm_hidden)
