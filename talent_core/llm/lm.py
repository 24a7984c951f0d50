"""The base model loaded once, with named LoRA adapters, and what both LLM roles share.

`LoadedLM` holds the base model once, with any number of named LoRA adapters on it (peft
multi-adapter; for inference an adapter runs merged into a copy of its layers' weights,
`merged`); `retriever.RetrieverModel` and `generator.GeneratorModel` are `Role`s that
switch to their adapter (or disable adapters: the frozen base model, the paper's "frozen
retriever" ablation). Decoding is greedy (free) or ranked (`ranking`).

Typical use (what the pipeline does; `loading.load_models` builds both roles)::

    retriever, generator = load_models(base_model, retriever_dir, generator_dir, settings)
    selection = retriever.select(question, candidate, lookup=kg_lookup, decode="ranked")
    context = generator.context(question, candidate, selection)  # selection=None: all of S
    ranked = generator.rank(question, context)
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from talent_core.config import Settings, get_settings
from talent_core.llm.merged import Merged, lora_layers, mergeable, merged, swapped_in
from talent_core.llm.models import AdapterMeta, load_adapter, load_base
from talent_core.llm.prompts import PromptStyle, Task
from talent_core.llm.ranking import (
    Past,
    Scored,
    continuation_scores,
    prompt_pass,
    scores_with_prompt,
    scoring_inputs,
    select_top,
)
from talent_core.llm.threads import torch_threads
from talent_core.models import LLMBackend, Ranking

log = logging.getLogger(__name__)

Stage = Callable[[str, int, int], None]  # (what is loading, stages done, stages in all)

DEFAULT_MAX_LENGTH = 4096  # prompt + completion tokens, when no adapter says otherwise


@dataclass(frozen=True)
class Generation:
    text: str
    truncated: bool  # stopped at max_new_tokens, not at EOS
    prompt_tokens: int
    new_tokens: int


class LanguageModel(Protocol):
    """What the two roles use of a language model, whichever backend runs it: `LoadedLM`
    (local weights) or `server.ServerLM` (an OpenAI-compatible server)."""

    backend: LLMBackend
    base_name: str  # the model whose tokenizer and chat template render the prompts
    tokenizer: Any
    metas: dict[str, AdapterMeta]  # the adapters it answers with, by role name
    paths: dict[str, Path]

    # how `score` ranks names: "logprobs" (their log-likelihood), "choice" (the model
    # chose among them: a server without log-probabilities), "free" (its free text, grounded)
    ranking: Ranking

    def score(self, prompt: str, adapter: str | None, names: Sequence[str], prefix: Any = None,
              head: str = "", chat: tuple[str, str] = ("", "")) -> list[Scored]: ...

    def generate(self, prompt: str, adapter: str | None, max_new_tokens: int,
                 prefix: Any = None, chat: tuple[str, str] = ("", "")) -> Generation: ...

    def count_tokens(self, text: str) -> int: ...

    def describe(self, adapter: str | None) -> str: ...

    def ensure_adapter(self, name: str, path: Path) -> None: ...

    def graph_prompt(self, name: str) -> Any: ...


class LoadedLM:
    """A base model loaded once, with optional named adapters (the `local` backend; the
    `openai` one is `server.ServerLM`, the same interface over HTTP)."""

    backend: LLMBackend = "local"
    ranking: Ranking = "logprobs"

    def __init__(
        self,
        base_model: str | None = None,
        adapters: dict[str, Path] | None = None,
        settings: Settings | None = None,
        device: str | None = None,
        on_stage: Stage | None = None,
    ):
        """``on_stage(what, done, total)``: called before each loading stage (the base model,
        then each adapter) and once at the end, for progress bars."""
        settings = settings or get_settings()
        self.base_name = base_model or settings.base_model
        adapters = adapters or {}
        total = 1 + len(adapters)
        stage = on_stage or (lambda what, done, total: None)
        stage(f"base model {self.base_name}", 0, total)
        self.model, self.tokenizer, self.device = load_base(self.base_name, settings, device)
        self.metas: dict[str, AdapterMeta] = {}
        self.paths: dict[str, Path] = {}
        self._graph_prompts: dict[str, Any] = {}  # adapter name -> its graph-prompt module
        self._lock = threading.Lock()  # adapter switching + generate: one call at a time
        # adapters merged for inference (`merged`), least recently used first
        self._merged: OrderedDict[str, Merged] = OrderedDict()
        self.merge_capacity = settings.merged_adapters
        self._frozen: Merged | None = None  # every LoRA layer, to switch off (adapter None)
        # (adapter, prompt head) -> the head's token ids and KV cache, computed alone once
        self._heads: dict[tuple[str | None, str], tuple[list[int], Any]] = {}
        for i, (name, path) in enumerate(adapters.items(), start=1):
            stage(f"{name} adapter", i, total)
            self.add_adapter(name, path)
        self.model.eval()
        stage("done", total, total)

    def add_adapter(self, name: str, path: Path) -> AdapterMeta:
        self.model, meta = load_adapter(self.model, Path(path), adapter_name=name)
        self.metas[name] = meta
        self.paths[name] = Path(path)
        self._graph_prompts.pop(name, None)  # read again from this path when asked
        self._merged.clear()  # merged again on use (new LoRA layers are switched off too)
        self._frozen = None
        self._heads.clear()
        self.model.eval()
        return meta

    def graph_prompt(self, name: str) -> Any:
        """The graph-prompt module saved beside adapter ``name`` (`graph_prompt.load`), read
        once: every role built on the adapter shares it (inference only)."""
        if name not in self._graph_prompts:
            from talent_core.llm.graph_prompt import load

            self._graph_prompts[name] = load(self.paths[name], self.device)
        return self._graph_prompts[name]

    def ensure_adapter(self, name: str, path: Path) -> None:
        """Add the adapter at ``path`` as ``name`` unless it is loaded, under the one-call
        lock (another thread may be answering on the model): a second task's adapters ride
        on weights already loaded."""
        with self._lock:
            if name not in self.metas:
                self.add_adapter(name, path)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def describe(self, adapter: str | None) -> str:
        """Which model answers with ``adapter`` (None: the frozen base model)."""
        return f"{self.base_name} + {adapter} adapter" if adapter else f"{self.base_name}"

    def _merged_weights(self, adapter: str) -> Merged | None:
        """``adapter``'s merged weights (built on first use, kept for `merge_capacity`
        adapters, least recently used dropped); None: run it unmerged. Under the lock."""
        if self.merge_capacity < 1:
            return None
        if adapter not in self._merged:
            if not mergeable(self.model, adapter):
                return None
            while len(self._merged) >= self.merge_capacity:
                self._merged.popitem(last=False)
            self._merged[adapter] = merged(self.model, adapter)
        self._merged.move_to_end(adapter)
        return self._merged[adapter]

    @contextlib.contextmanager
    def using(self, adapter: str | None) -> Iterator[Any]:
        """The model with ``adapter`` active (None: adapters disabled, the frozen base
        model; merged into a copy of its layers' weights where it can be, `merged`), under
        inference mode with torch's threads chosen for this call from the free cores
        (`threads.torch_threads`); one caller at a time."""
        import torch

        if adapter is not None and adapter not in self.metas:
            raise KeyError(f"no adapter named {adapter!r} is loaded ({sorted(self.metas)})")
        with self._lock:
            ctx: Any = contextlib.nullcontext()
            if hasattr(self.model, "disable_adapter"):
                if adapter is None:  # every LoRA layer off (peft's disable_adapter is slow)
                    if self._frozen is None:  # the model's walk, once per set of adapters
                        self._frozen = Merged([], lora_layers(self.model))
                    ctx = swapped_in(self._frozen)
                elif (weights := self._merged_weights(adapter)) is not None:
                    ctx = swapped_in(weights)
                else:
                    self.model.set_adapter(adapter)
            with ctx, torch.inference_mode(), torch_threads():
                yield self.model

    def score(self, prompt: str, adapter: str | None, names: Sequence[str], prefix: Any = None,
              head: str = "", chat: tuple[str, str] = ("", "")) -> list[Scored]:
        """Every name's log-likelihood as the first item of the completion of ``prompt``
        (`ranking.scores_with_prompt`: the prompt and the names in one pass); ``head``: the
        prompt's fixed start (`prompts.Rendered.head`), whose KV cache is computed alone
        once per adapter and reused, so a prompt always scores the same whatever came
        before; ``prefix``: soft tokens (P, H) in front of the prompt (`graph_prompt`)."""
        import torch

        inputs = scoring_inputs(self.tokenizer, prompt, names)
        if not inputs.names:
            return []
        with self.using(adapter) as model:
            ids = torch.tensor([inputs.prompt_ids], device=model.device)
            if prefix is not None:  # soft tokens first: the head is not the prompt's start
                scores = continuation_scores(model, ids, inputs.continuations, inputs.end_ids,
                                             prefix=prefix)
            else:
                scores, *_ = scores_with_prompt(model, ids, inputs.continuations,
                                                inputs.end_ids,
                                                past=self._head(model, adapter, head,
                                                                inputs.prompt_ids))
        return [Scored(n, sc) for n, sc in zip(inputs.names, scores.tolist(), strict=True)]

    def _head(self, model: Any, adapter: str | None, head: str, prompt_ids: list[int]
              ) -> Past | None:
        """The KV cache of ``head`` with ``adapter`` (computed alone on first use) and its
        length, when the prompt's tokens start with the head's; else None. Under `using`."""
        import torch

        if not head:
            return None
        if (adapter, head) not in self._heads:
            head_ids = self.tokenizer(head, add_special_tokens=False)["input_ids"]
            _, layers, _ = prompt_pass(model, torch.tensor([head_ids], device=model.device))
            self._heads[(adapter, head)] = (head_ids, layers)
        head_ids, layers = self._heads[(adapter, head)]
        n = len(head_ids)
        return (layers, n) if 0 < n < len(prompt_ids) and prompt_ids[:n] == head_ids else None

    def generate(self, prompt: str, adapter: str | None, max_new_tokens: int,
                 prefix: Any = None, chat: tuple[str, str] = ("", "")) -> Generation:
        """Greedy completion of ``prompt`` with ``adapter`` (None: the frozen base model);
        ``prefix``: soft tokens (P, H) in front of the prompt (`graph_prompt`)."""
        import torch

        tok = self.tokenizer
        enc = tok(prompt, add_special_tokens=False, return_tensors="pt")
        input_ids = enc["input_ids"].to(self.model.device)
        options = dict(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                       eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                       temperature=None, top_p=None, top_k=None)
        with self.using(adapter) as model:
            if prefix is None:
                out = model.generate(input_ids=input_ids,
                                     attention_mask=torch.ones_like(input_ids), **options)
                new = out[0, input_ids.shape[1]:].tolist()
            else:  # from inputs_embeds alone, generate returns the new tokens only
                from talent_core.llm.graph_prompt import prefixed_embeds

                embeds = prefixed_embeds(model, input_ids, prefix)
                mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)
                new = model.generate(inputs_embeds=embeds, attention_mask=mask,
                                     **options)[0].tolist()
        ended = tok.eos_token_id in new
        if ended:
            new = new[: new.index(tok.eos_token_id)]
        text = tok.decode(new, skip_special_tokens=True)
        return Generation(text, not ended and len(new) >= max_new_tokens,
                          int(input_ids.shape[1]), len(new))


class Role:
    """What the retriever and the generator share: their adapter on a `LoadedLM` (None: the
    frozen base model), task, prompt style and token budgets, and the ranked-decoding cut
    (margin / top-m, tuned on a validation split and stored in the adapter's metadata)."""

    def __init__(
        self,
        lm: LanguageModel,
        adapter: str | None,
        task: Task | None,
        max_new_tokens: int,
        max_length: int | None,
    ):
        self.lm = lm
        self.adapter = adapter
        meta = lm.metas.get(adapter) if adapter else None
        self.meta = meta
        self.task: Task = task or (meta.task if meta else "kgqa")
        self.max_new_tokens = max_new_tokens
        self.max_length = max_length or (meta.max_length if meta else DEFAULT_MAX_LENGTH)
        # an adapter is prompted as it was trained; the frozen base model gets the paper's
        self.style: PromptStyle = meta.prompt_style if meta else "paper"
        # ranked decoding: names within `margin` nats of the best, at most `top_m` (tuned on
        # a validation split and stored in the adapter's metadata; defaults otherwise)
        tuned = meta.ranking if meta else {}
        self.margin = float(tuned.get("margin", self.DEFAULT_MARGIN))
        top_m = tuned.get("top_m", self.DEFAULT_TOP_M)
        self.top_m: int | None = int(top_m) if top_m else None

    DEFAULT_MARGIN = 2.0
    DEFAULT_TOP_M: int | None = None

    def choose(self, scored: Sequence[Scored]) -> list[Scored]:
        return select_top(scored, self.margin, self.top_m)

    @property
    def prompt_budget(self) -> int:
        return max(1, self.max_length - self.max_new_tokens)

    @property
    def frozen(self) -> bool:
        return self.adapter is None

    @property
    def model(self) -> str:
        """Which model answers in this role (`LanguageModel.describe`)."""
        return self.lm.describe(self.adapter)
