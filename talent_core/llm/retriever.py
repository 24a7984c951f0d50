"""R_theta at inference: question + S -> `Selection` (free or ranked decoding)."""

from __future__ import annotations

import logging

from talent_core.config import RETRIEVER_MAX_NEW_TOKENS
from talent_core.llm.context import GraphView
from talent_core.llm.features import retriever_inference_prompt
from talent_core.llm.lm import LanguageModel, Role
from talent_core.llm.parsing import Lookup, match_selection, parse_selection
from talent_core.llm.prompts import Rendered, Task
from talent_core.llm.ranking import Scored
from talent_core.models import Candidate, Decode, RankedName, Selection

log = logging.getLogger(__name__)


class RetrieverModel(Role):
    """R_theta: question + S -> `Selection` (names of S, out-of-S names grounded)."""

    def __init__(self, lm: LanguageModel, adapter: str | None = "retriever",
                 task: Task | None = None,
                 max_new_tokens: int = RETRIEVER_MAX_NEW_TOKENS,
                 max_length: int | None = None):
        super().__init__(lm, adapter, task, max_new_tokens, max_length)

    def prompt(self, question: str, candidate: Candidate) -> tuple[Rendered, GraphView]:
        return retriever_inference_prompt(
            self.lm.tokenizer, question, candidate, self.prompt_budget, self.task,
            self.lm.base_name, self.style,
        )

    DEFAULT_MARGIN = 4.0
    DEFAULT_TOP_M = 10

    def rank(self, question: str, candidate: Candidate) -> list[Scored]:
        """Every node name of S shown in the prompt, scored (`ranking`), best first."""
        rendered, view = self.prompt(question, candidate)
        scored = self.lm.score(rendered.prompt + rendered.answer_prefix, self.adapter,
                               [name for _, name in view.nodes], head=rendered.head,
                               chat=rendered.chat)
        return sorted(scored, key=lambda x: -x.score)

    def select(self, question: str, candidate: Candidate, lookup: Lookup | None = None,
               decode: Decode = "free") -> Selection:
        """V-hat. ``decode="free"``: the paper's greedy line (may name out-of-S nodes, which
        are grounded with ``lookup``); ``"ranked"``: the best-scoring nodes of S."""
        if decode == "ranked":
            scored = self.rank(question, candidate)
            chosen = self.choose(scored)
            sel = match_selection([c.name for c in chosen], candidate, lookup)
            return sel.model_copy(update={"decode": "ranked", "ranked": [
                RankedName(name=c.name, score=round(c.score, 4)) for c in scored]})
        rendered, view = self.prompt(question, candidate)
        if view.dropped_nodes:
            log.info("retriever prompt: %d of %d nodes of S dropped to fit %d tokens",
                     view.dropped_nodes, len(candidate.nodes), self.prompt_budget)
        gen = self.lm.generate(rendered.prompt, self.adapter, self.max_new_tokens,
                               chat=rendered.chat)
        return parse_selection(gen.text, candidate, lookup, truncated=gen.truncated)
