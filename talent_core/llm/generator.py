"""G_phi at inference: question + eq. 14 context -> answers (free or ranked decoding)."""

from __future__ import annotations

from collections.abc import Sequence

from talent_core.llm.context import GraphView
from talent_core.llm.features import fit_generator_view
from talent_core.llm.lm import LoadedLM, Role
from talent_core.llm.parsing import parse_label, parse_names
from talent_core.llm.prompts import Rendered, Task, generator_prompt
from talent_core.llm.ranking import Scored
from talent_core.models import Candidate, Selection
from talent_core.questions import LABELS


class GeneratorModel(Role):
    """G_phi: question + (V-hat, E-hat) -> answers."""

    def __init__(self, lm: LoadedLM, adapter: str | None = "generator", task: Task | None = None,
                 max_new_tokens: int = 128, max_length: int | None = None,
                 include_endpoints: bool | None = None):
        super().__init__(lm, adapter, task, max_new_tokens, max_length)
        self.include_endpoints = (
            include_endpoints if include_endpoints is not None
            else bool(self.meta and self.meta.include_endpoints)
        )

    def prompt(self, question: str, candidate: Candidate, selection: Selection | None
               ) -> tuple[Rendered, GraphView]:
        return fit_generator_view(
            self.lm.tokenizer, question, candidate, selection, self.prompt_budget, self.task,
            self.lm.base_name, self.include_endpoints, style=self.style,
        )

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
            names = list(LABELS) if self.task == "label" else [n for _, n in context.nodes]
        rendered = self._rendered(question, context)
        scored = self.lm.score(rendered.prompt + rendered.answer_prefix, self.adapter, names)
        return sorted(scored, key=lambda x: -x.score)

    def _rendered(self, question: str, context: GraphView) -> Rendered:
        return generator_prompt(self.lm.tokenizer, question, context.text(self.style), self.task,
                                self.lm.base_name, self.style)

    def answer(self, question: str, context: GraphView) -> tuple[list[str], str]:
        """Free decoding: (answers, raw output). Label task: ``["support"]`` / ``["counter"]``
        / []."""
        rendered = self._rendered(question, context)
        gen = self.lm.generate(rendered.prompt, self.adapter, self.max_new_tokens)
        if self.task == "label":
            return parse_label(gen.text, LABELS), gen.text
        return parse_names(gen.text, gen.truncated), gen.text
