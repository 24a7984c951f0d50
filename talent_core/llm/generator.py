"""G_phi at inference: question + eq. 14 context -> answers (free or ranked decoding)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from talent_core.config import GENERATOR_MAX_NEW_TOKENS
from talent_core.llm.context import GraphView, generator_view
from talent_core.llm.features import fit_generator_view, ranked_names
from talent_core.llm.graph_prompt import (
    GraphPrompter,
    VectorSource,
    has_graph_prompt,
    prompt_graph,
)
from talent_core.llm.lm import LanguageModel, Role
from talent_core.llm.parsing import parse_label, parse_names
from talent_core.llm.prompts import Rendered, Task, generator_prompt
from talent_core.llm.ranking import Scored
from talent_core.models import Candidate, GeneratorType, Selection
from talent_core.questions import LABELS


class GeneratorModel(Role):
    """G_phi: question + (V-hat, E-hat) -> answers.

    Two types: "text" (the paper: the context as CSV rows) and "graph-prompt" (G-Retriever:
    the same rows plus soft tokens from a GNN over the context's graph, `graph_prompt`),
    decided by the adapter: a generator adapter saved with a graph prompt beside it is one.
    ``embed`` (texts -> vectors, the store's embedding model) is needed by the latter, which
    reads the stored vectors of KG nodes and relations from ``store`` when given;
    ``text_budget`` overrides the adapter's limit on graph-row tokens (0: graph only)."""

    def __init__(self, lm: LanguageModel, adapter: str | None = "generator",
                 task: Task | None = None,
                 max_new_tokens: int = GENERATOR_MAX_NEW_TOKENS, max_length: int | None = None,
                 include_endpoints: bool | None = None,
                 embed: Callable[[list[str]], np.ndarray] | None = None,
                 text_budget: int | None = None, store: VectorSource | None = None):
        super().__init__(lm, adapter, task, max_new_tokens, max_length)
        self.include_endpoints = (
            include_endpoints if include_endpoints is not None
            else bool(self.meta and self.meta.include_endpoints)
        )
        self.prompter: GraphPrompter | None = None
        path = lm.paths.get(adapter) if adapter else None
        if path is not None and has_graph_prompt(path):
            if embed is None:
                raise ValueError(f"{path}: a graph-prompt generator needs the embedding model "
                                 "(pass embed=)")
            self.prompter = GraphPrompter(lm.graph_prompt(adapter), embed, store)
        self.text_budget = text_budget if text_budget is not None else (
            self.meta.text_budget if self.meta else None)
        # label task: a per-label offset added to the label's score (``ranking`` key
        # ``bias_<label>``), tuned on a validation split (`training.tune.choose_label_bias`)
        # so that a model leaning to one label is re-centred; none: 0
        tuned = self.meta.ranking if self.meta else {}
        self.label_bias = {label: float(tuned.get(f"bias_{label}", 0.0)) for label in LABELS}

    @property
    def kind(self) -> GeneratorType:
        return "graph-prompt" if self.prompter is not None else "text"

    def prompt(self, question: str, candidate: Candidate, selection: Selection | None
               ) -> tuple[Rendered, GraphView]:
        rendered, view = fit_generator_view(
            self.lm.tokenizer, question, candidate, selection, self.prompt_budget, self.task,
            self.lm.base_name, self.include_endpoints, style=self.style,
            text_budget=self.text_budget,
        )
        if self.text_budget is not None:  # answers still come from the whole context
            full = generator_view(candidate, selection, self.include_endpoints)
            view = replace(view, answer_nodes=full.kg_nodes)
        if self.prompter is not None:
            view = replace(view, graph=prompt_graph(candidate, selection))
        return rendered, view

    def soft_prompt(self, context: GraphView) -> Any:
        """The soft tokens for ``context`` (None for a text generator)."""
        if self.prompter is None:
            return None
        if context.graph is None:
            raise ValueError("this context has no graph: build it with GeneratorModel.context")
        return self.prompter(context.graph)

    def context(self, question: str, candidate: Candidate, selection: Selection | None
                ) -> GraphView:
        """Eq. 14 context (``selection=None``: all of S, the no-retriever ablation), rows
        dropped to fit the prompt budget. ``view.kg_edges`` are the edges shown."""
        return self.prompt(question, candidate, selection)[1]

    def rank(self, question: str, context: GraphView, names: Sequence[str] | None = None
             ) -> list[Scored]:
        """``names`` (default: the context's node names; label task: the labels) scored as
        the answer, best first."""
        if names is None:
            names = ranked_names(context, self.task)
        rendered = self._rendered(question, context)
        scored = self.lm.score(rendered.prompt + rendered.answer_prefix, self.adapter, names,
                               prefix=self.soft_prompt(context), head=rendered.head,
                               chat=rendered.chat)
        if self.task == "label" and any(self.label_bias.values()):
            scored = [replace(s, score=s.score + self.label_bias.get(s.name, 0.0))
                      for s in scored]
        return sorted(scored, key=lambda x: -x.score)

    def _rendered(self, question: str, context: GraphView) -> Rendered:
        return generator_prompt(self.lm.tokenizer, question, context.text(self.style), self.task,
                                self.lm.base_name, self.style)

    def answer(self, question: str, context: GraphView) -> tuple[list[str], str]:
        """Free decoding: (answers, raw output). Label task: ``["support"]`` / ``["counter"]``
        / []."""
        rendered = self._rendered(question, context)
        gen = self.lm.generate(rendered.prompt, self.adapter, self.max_new_tokens,
                               prefix=self.soft_prompt(context), chat=rendered.chat)
        if self.task == "label":
            return parse_label(gen.text, LABELS), gen.text
        return parse_names(gen.text, gen.truncated), gen.text
