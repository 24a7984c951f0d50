"""Token ids and per-token weights for one training example, and prompts for inference.

Glue between `prompts` (text), `context` (what the graph rows are, truncation), `targets`
(the line to learn) and `loss.align_weights` (characters -> tokens). The prompt and the
target are tokenised together as one sequence; the sequence is::

    prompt + answer_prefix + target line + EOS text

Special-token text in the prompt (``<|im_start|>``, ``<s>``) comes from the chat template and
is tokenised with ``add_special_tokens=False``, exactly as at inference.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from talent_core.errors import PromptTooLong
from talent_core.llm.context import (
    GraphView,
    fit_largest,
    generator_view,
    truncated_candidate_view,
)
from talent_core.llm.loss import align_weights
from talent_core.llm.parsing import answer_key
from talent_core.llm.prompts import (
    PromptStyle,
    Rendered,
    Task,
    generator_prompt,
    retriever_prompt,
)
from talent_core.llm.ranking import scoring_inputs
from talent_core.llm.targets import TargetLine, generator_target, retriever_target
from talent_core.models import Candidate, Selection
from talent_core.questions import LABELS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RankFeatures:
    """The ranking loss's inputs (`loss.sft_and_rank_loss`), tokenised as ranked decoding
    tokenises them (`ranking.scoring_inputs`): the context's node names and which are gold.
    ``head_len``: the prompt's length in tokens; ``shared``: the prompt's ids are a prefix of
    the training sequence, so one pass serves both losses."""

    head_ids: list[int]
    continuations: list[list[int]]
    gold: list[bool]
    end_ids: list[int]
    shared: bool

    @property
    def head_len(self) -> int:
        return len(self.head_ids)


@dataclass
class Features:
    input_ids: list[int]
    weights: list[float]
    prompt_tokens: int  # tokens before the target starts
    target: str
    positives: int = 0  # |P| (names of class P in the target)
    weak: int = 0  # |W|
    dropped_nodes: int = 0
    dropped_edges: int = 0
    rank: RankFeatures | None = None  # generator: what its ranking loss scores

    def __len__(self) -> int:
        return len(self.input_ids)


def count_tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _eos_text(tokenizer: Any) -> str:
    eos = getattr(tokenizer, "eos_token", None)
    if not eos:
        raise ValueError("the tokenizer has no eos_token; set one before training")
    return eos


def encode_weighted(
    tokenizer: Any,
    rendered: Rendered,
    target: TargetLine,
    weak_weight: float,
    eos_weight: float,
    whole_target: bool = False,
) -> tuple[list[int], list[float], int]:
    """Tokenise prompt + target + EOS together and weight the tokens.

    ``whole_target``: every character of the target line has weight 1 (generator SFT);
    otherwise names of class P get 1, class W ``weak_weight``, and the separator AFTER a
    name gets that name's weight (so continuing the list after a gold name is learnt with
    weight 1; with separators at 0 and EOS at 1, greedy decoding learnt to stop after the
    first name: issue 8's one-name collapse). The EOS token after the line gets
    ``eos_weight``."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("a fast tokenizer (offset mappings) is needed for token weights")
    eos = _eos_text(tokenizer)
    head = rendered.prompt + rendered.answer_prefix
    text = head + target.text + eos
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids: list[int] = list(enc["input_ids"])
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    base = len(head)
    spans: list[tuple[int, int, float]]
    if whole_target:
        spans = [(base, base + len(target.text), 1.0)] if target.text else []
    else:
        ends = [nxt.start for nxt in target.spans[1:]] + [target.spans[-1].end] \
            if target.spans else []
        spans = [
            (base + s.start, base + end, 1.0 if s.cls == "P" else weak_weight)
            for s, end in zip(target.spans, ends, strict=True)
        ]
    eos_start = len(text) - len(eos)
    spans.append((eos_start, len(text), eos_weight))
    weights = align_weights(offsets, spans)
    if eos_weight and not any(s >= eos_start for s, e in offsets if e > s):
        # the EOS special token came back without character offsets: weight it by id
        eos_id = tokenizer.eos_token_id
        for i in range(len(ids) - 1, -1, -1):
            if ids[i] == eos_id:
                weights[i] = eos_weight
                break
    prompt_tokens = sum(1 for s, e in offsets if e <= len(rendered.prompt) or e <= s)
    straddle = [i for i, (s, e) in enumerate(offsets) if s < len(rendered.prompt) < e]
    if straddle:
        log.debug("a token straddles the prompt/target boundary (%d tokens)", len(straddle))
    return ids, weights, prompt_tokens


def retriever_features(
    tokenizer: Any,
    question: str,
    candidate: Candidate,
    gold: Sequence[str],
    lam: float,
    eos_weight: float,
    max_length: int,
    task: Task = "kgqa",
    model_name: str | None = None,
    style: PromptStyle = "paper",
) -> Features:
    """Eqs. 9-13 for one example; S rows are dropped (lowest priority first) to fit."""
    eos = _eos_text(tokenizer)

    def build(keep: int) -> tuple[Rendered, TargetLine, GraphView]:
        view, restricted = truncated_candidate_view(candidate, keep)
        rendered = retriever_prompt(tokenizer, question, view.text(style), task, model_name, style)
        return rendered, retriever_target(restricted, gold), view

    def size(item: tuple[Rendered, TargetLine, GraphView]) -> int:
        r, t, _ = item
        return count_tokens(tokenizer, r.prompt + r.answer_prefix + t.text + eos)

    (rendered, target, view), _ = fit_largest(len(candidate.nodes), build, size, max_length)
    if size((rendered, target, view)) > max_length:
        raise PromptTooLong(f"question {question[:60]!r}: prompt exceeds {max_length} tokens "
                            "even without graph rows")
    ids, weights, n_prompt = encode_weighted(tokenizer, rendered, target, lam, eos_weight)
    return Features(
        ids, weights, n_prompt, target.text, len(target.positives), len(target.weak),
        view.dropped_nodes, view.dropped_edges,
    )


def fit_generator_view(
    tokenizer: Any,
    question: str,
    candidate: Candidate,
    selection: Selection | None,
    budget: int,
    task: Task = "kgqa",
    model_name: str | None = None,
    include_endpoints: bool = False,
    reserve: str = "",
    style: PromptStyle = "paper",
    text_budget: int | None = None,
) -> tuple[Rendered, GraphView]:
    """The generator prompt for eq. 14's context, rows dropped to fit ``budget`` tokens
    (``reserve``: text that must fit too, e.g. the training target); ``text_budget``: at
    most this many tokens of graph rows beyond the empty context (0: no rows, the
    graph-prompt-only generator; out-of-S names are always listed)."""

    def render(view: GraphView) -> tuple[Rendered, GraphView]:
        return (generator_prompt(tokenizer, question, view.text(style), task, model_name, style),
                view)

    def size(item: tuple[Rendered, GraphView]) -> int:
        r, _ = item
        return count_tokens(tokenizer, r.prompt + r.answer_prefix + reserve)

    if text_budget is not None:
        empty = (truncated_candidate_view(candidate, 0)[0] if selection is None
                 else generator_view(candidate, selection, include_endpoints, 0, 0))
        budget = min(budget, size(render(empty)) + text_budget)
    if selection is None:  # no-retriever ablation: S itself, truncated like the retriever's
        item, _ = fit_largest(
            len(candidate.nodes),
            lambda k: render(truncated_candidate_view(candidate, k)[0]),
            size, budget,
        )
    else:
        full = generator_view(candidate, selection, include_endpoints)
        n_edges = len(full.kg_edges)
        item, kept = fit_largest(
            n_edges,
            lambda k: render(generator_view(candidate, selection, include_endpoints, k)),
            size, budget,
        )
        if kept == 0 and size(item) > budget:
            item, _ = fit_largest(
                len(full.kg_nodes),
                lambda k: render(generator_view(candidate, selection, include_endpoints, 0, k)),
                size, budget,
            )
    if size(item) > budget:
        raise PromptTooLong(f"question {question[:60]!r}: generator prompt exceeds {budget} "
                            "tokens even without graph rows")
    return item


def generator_features(
    tokenizer: Any,
    question: str,
    candidate: Candidate,
    selection: Selection | None,
    answers: Sequence[str],
    max_length: int,
    task: Task = "kgqa",
    model_name: str | None = None,
    include_endpoints: bool = False,
    eos_weight: float = 1.0,
    style: PromptStyle = "paper",
    text_budget: int | None = None,
    rank: bool = False,
) -> Features:
    """Eq. 15 for one example: weight 1 on every answer token (and EOS), 0 on the prompt.
    ``rank``: also the inputs of the ranking loss (`RankFeatures`), the context's node names
    scored after the prompt exactly as ranked decoding scores them (label task: the labels,
    as `GeneratorModel.rank` scores them)."""
    target = generator_target(answers)
    rendered, view = fit_generator_view(
        tokenizer, question, candidate, selection, max_length, task, model_name,
        include_endpoints, reserve=target.text + _eos_text(tokenizer), style=style,
        text_budget=text_budget,
    )
    ids, weights, n_prompt = encode_weighted(
        tokenizer, rendered, target, 1.0, eos_weight, whole_target=True
    )
    ranked = (_rank_features(tokenizer, rendered, ranked_names(view, task), answers, ids)
              if rank else None)
    return Features(ids, weights, n_prompt, target.text, len(target.spans), 0,
                    view.dropped_nodes, view.dropped_edges, ranked)


def ranked_names(view: GraphView, task: Task) -> list[str]:
    """What the generator's ranked decoding scores as the answer: the two labels for the
    label task, else the context's node names (`GeneratorModel.rank`, the ranking loss)."""
    return list(LABELS) if task == "label" else [n for _, n in view.nodes]


def _rank_features(tokenizer: Any, rendered: Rendered, names: Sequence[str],
                   answers: Sequence[str], ids: Sequence[int]) -> RankFeatures:
    inputs = scoring_inputs(tokenizer, rendered.prompt + rendered.answer_prefix, list(names))
    gold_keys = {answer_key(a) for a in answers} - {""}
    head = inputs.prompt_ids
    shared = list(ids[: len(head)]) == head and len(ids) > len(head)
    return RankFeatures(head, inputs.continuations,
                        [answer_key(n) in gold_keys for n in inputs.names], inputs.end_ids,
                        shared)


def retriever_inference_prompt(
    tokenizer: Any, question: str, candidate: Candidate, budget: int, task: Task = "kgqa",
    model_name: str | None = None, style: PromptStyle = "paper",
) -> tuple[Rendered, GraphView]:
    """The E.1 prompt for S, rows dropped to fit ``budget`` tokens."""

    def build(keep: int) -> tuple[Rendered, GraphView]:
        view, _ = truncated_candidate_view(candidate, keep)
        return (retriever_prompt(tokenizer, question, view.text(style), task, model_name, style),
                view)

    item, _ = fit_largest(
        len(candidate.nodes), build, lambda it: count_tokens(tokenizer, it[0].prompt), budget
    )
    if count_tokens(tokenizer, item[0].prompt) > budget:
        raise PromptTooLong(f"question {question[:60]!r}: retriever prompt exceeds {budget} "
                            "tokens even without graph rows")
    return item
