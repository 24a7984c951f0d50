"""Inference: the retriever R_theta selects nodes of S, the generator G_phi answers.

One `LoadedLM` holds the base model once, with any number of named LoRA adapters on it
(peft multi-adapter); `RetrieverModel` and `GeneratorModel` are views that switch to their
adapter (or disable adapters: the frozen base model, the paper's "frozen retriever"
ablation). Decoding is greedy; ``max_new_tokens`` is configurable.

Typical use (what the pipeline does)::

    retriever, generator = load_models(base_model, retriever_dir, generator_dir, settings)
    selection = retriever.select(question, candidate, lookup=store.entities_by_name)
    context = generator.context(candidate, selection)        # or selection=None: all of S
    answers, raw = generator.answer(question, context)
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talent_core.config import Settings, get_settings
from talent_core.llm.context import GraphView
from talent_core.llm.features import fit_generator_view, retriever_inference_prompt
from talent_core.llm.models import AdapterMeta, load_adapter, load_base
from talent_core.llm.parsing import (
    Lookup,
    match_selection,
    parse_label,
    parse_names,
    parse_selection,
)
from talent_core.llm.prompts import LABELS, PromptStyle, Rendered, Task
from talent_core.llm.ranking import Scored, score_continuations, select_top
from talent_core.models import Candidate, Decode, RankedName, Selection

log = logging.getLogger(__name__)

DEFAULT_MAX_LENGTH = 4096  # prompt + completion tokens, when no adapter says otherwise


@dataclass(frozen=True)
class Generation:
    text: str
    truncated: bool  # stopped at max_new_tokens, not at EOS
    prompt_tokens: int
    new_tokens: int


class LoadedLM:
    """A base model loaded once, with optional named adapters."""

    def __init__(
        self,
        base_model: str | None = None,
        adapters: dict[str, Path] | None = None,
        settings: Settings | None = None,
        device: str | None = None,
    ):
        settings = settings or get_settings()
        self.base_name = base_model or settings.base_model
        self.model, self.tokenizer, self.device = load_base(self.base_name, settings, device)
        self.metas: dict[str, AdapterMeta] = {}
        self._lock = threading.Lock()  # adapter switching + generate: one call at a time
        for name, path in (adapters or {}).items():
            self.add_adapter(name, path)
        self.model.eval()

    def add_adapter(self, name: str, path: Path) -> AdapterMeta:
        self.model, meta = load_adapter(self.model, Path(path), adapter_name=name)
        self.metas[name] = meta
        self.model.eval()
        return meta

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    @contextlib.contextmanager
    def using(self, adapter: str | None) -> Iterator[Any]:
        """The model with ``adapter`` active (None: adapters disabled, the frozen base
        model), under inference mode; one caller at a time."""
        import torch

        if adapter is not None and adapter not in self.metas:
            raise KeyError(f"no adapter named {adapter!r} is loaded ({sorted(self.metas)})")
        with self._lock:
            ctx: Any = contextlib.nullcontext()
            if hasattr(self.model, "disable_adapter"):
                if adapter is None:
                    ctx = self.model.disable_adapter()
                else:
                    self.model.set_adapter(adapter)
            with ctx, torch.inference_mode():
                yield self.model

    def score(self, prompt: str, adapter: str | None, names: Sequence[str]) -> list[Scored]:
        """Every name's log-likelihood as the first item of the completion of ``prompt``
        (`ranking.score_continuations`; the prompt is encoded once)."""
        tok = self.tokenizer
        unique = list(dict.fromkeys(n for n in names if n))
        if not unique:
            return []
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        conts = [tok(n, add_special_tokens=False)["input_ids"] for n in unique]
        sep = tok("|", add_special_tokens=False)["input_ids"]
        ends = [i for i in {tok.eos_token_id, sep[0] if len(sep) == 1 else None}
                if i is not None]
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        with self.using(adapter) as model:
            scores = score_continuations(model, ids.to(model.device), conts, ends, pad)
        return [Scored(n, sc) for n, sc in zip(unique, scores, strict=True)]

    def generate(self, prompt: str, adapter: str | None, max_new_tokens: int) -> Generation:
        """Greedy completion of ``prompt`` with ``adapter`` (None: the frozen base model)."""
        tok = self.tokenizer
        enc = tok(prompt, add_special_tokens=False, return_tensors="pt")
        input_ids = enc["input_ids"].to(self.model.device)
        attention = enc["attention_mask"].to(self.model.device)
        with self.using(adapter):
            out = self.model.generate(
                input_ids=input_ids, attention_mask=attention,
                max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                temperature=None, top_p=None, top_k=None,
            )
        new = out[0, input_ids.shape[1]:].tolist()
        ended = tok.eos_token_id in new
        if ended:
            new = new[: new.index(tok.eos_token_id)]
        text = tok.decode(new, skip_special_tokens=True)
        return Generation(text, not ended and len(new) >= max_new_tokens,
                          int(input_ids.shape[1]), len(new))


class _View:
    def __init__(
        self,
        lm: LoadedLM,
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


class RetrieverModel(_View):
    """R_theta: question + S -> `Selection` (names of S, out-of-S names grounded)."""

    def __init__(self, lm: LoadedLM, adapter: str | None = "retriever", task: Task | None = None,
                 max_new_tokens: int = 256, max_length: int | None = None):
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
                               [name for _, name in view.nodes])
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
        gen = self.lm.generate(rendered.prompt, self.adapter, self.max_new_tokens)
        return parse_selection(gen.text, candidate, lookup, truncated=gen.truncated)


class GeneratorModel(_View):
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
        from talent_core.llm.prompts import generator_prompt

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


def load_models(
    base_model: str | None = None,
    retriever_dir: Path | None = None,
    generator_dir: Path | None = None,
    settings: Settings | None = None,
    device: str | None = None,
    retriever_max_new_tokens: int = 256,
    generator_max_new_tokens: int = 128,
) -> tuple[RetrieverModel, GeneratorModel]:
    """Both models on ONE base model. A missing adapter means the frozen base model.
    ``base_model`` defaults to the adapters' base (they must agree), then to settings."""
    from talent_core.llm.models import read_meta

    metas = [read_meta(d) for d in (retriever_dir, generator_dir) if d is not None]
    if base_model is None and metas:
        base_model = metas[0].base_model
    adapters: dict[str, Path] = {}
    if retriever_dir is not None:
        adapters["retriever"] = Path(retriever_dir)
    if generator_dir is not None:
        adapters["generator"] = Path(generator_dir)
    lm = LoadedLM(base_model, adapters, settings, device)
    task = next((m.task for m in metas), None)
    retriever = RetrieverModel(lm, "retriever" if retriever_dir else None, task,
                               retriever_max_new_tokens)
    generator = GeneratorModel(lm, "generator" if generator_dir else None, task,
                               generator_max_new_tokens)
    return retriever, generator
