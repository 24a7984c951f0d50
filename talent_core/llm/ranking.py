"""Ranked decoding: every candidate name scored by the model, in one batched pass.

Free decoding (the paper) lets the LLM write a line of names; a 135M model then stops
early, repeats itself or names things that do not exist. Ranked decoding asks the same
trained model a narrower question: for each candidate name ``c`` (a node of the prompt's
graph), how likely is ``c`` as the FIRST item of its output line?

    score(c) = log p(c_1 .. c_n | prompt) + log( p("|" | prompt, c) + p(EOS | prompt, c) )

i.e. the name's tokens followed by the end of an item (a separator or the end of the
line), so that ``tom`` cannot win over ``tom hanks`` by being a prefix of it. Scores are
summed log-probabilities (not length-normalised).

Cost: one forward pass over the prompt (its KV cache is kept), then the candidates' tokens
packed into one row per ``chunk`` names over that cache (each sees the prompt and its own
tokens only), never the prompt again. At inference (`scores_with_prompt`) the prompt and the
first chunk of names share ONE pass, after the prompt's fixed head, whose cache
`LoadedLM.score` computes once per adapter.

Choosing the set (pure functions, tuned on a validation split):
* `select_top`: names within ``margin`` (nats) of the best, at most ``top_m``, at least one.
  The retriever's V̂ and the generator's answer set are both chosen this way.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_CHUNK = 64  # continuations packed into one forward pass


@dataclass(frozen=True)
class Scored:
    name: str  # as scored (the prompt's lowercase name)
    score: float  # log-likelihood as the first item of the output line


def _cache_keyword(model: Any) -> str:
    """The forward() keyword of the KV cache: `cache` from transformers 5.x (which
    deprecates `past_key_values`), `past_key_values` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(type(base).forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _cache_layers(cache: Any) -> list[tuple[Any, Any]]:
    """(keys, values) per layer of a transformers cache (5.x ``layers``; 4.x key_cache)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache, strict=True))
    return [tuple(kv) for kv in cache]  # legacy tuple of tuples


def _first_positions(layers: list[tuple[Any, Any]], k: int) -> list[tuple[Any, Any]]:
    """The first ``k`` positions of a KV cache (views)."""
    return [(a[:, :, :k], b[:, :, :k]) for a, b in layers]


def _expanded_cache(layers: list[tuple[Any, Any]], n: int) -> Any:
    """A fresh DynamicCache holding the prompt's keys/values for a batch of ``n`` (views:
    nothing is copied until the continuation's tokens are appended)."""
    from transformers import DynamicCache

    data = [(k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for k, v in layers]
    return DynamicCache(data)


# a KV cache of a prompt's first k tokens (its fixed head, `LoadedLM.score`), and k
Past = tuple[list[tuple[Any, Any]], int]


def prompt_pass(model: Any, prompt_ids: Any, prefix: Any = None
                ) -> tuple[Any, list[tuple[Any, Any]], int]:
    """One forward pass over the prompt: log p(first token), its KV cache, its length."""
    import torch

    if prefix is None:
        out = model(input_ids=prompt_ids, use_cache=True, logits_to_keep=1)  # no vocab x T
    else:
        from talent_core.llm.graph_prompt import prefixed_embeds

        out = model(inputs_embeds=prefixed_embeds(model, prompt_ids, prefix), use_cache=True,
                    logits_to_keep=1)
    first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)  # predicts token 1
    cache_kw = _cache_keyword(model)
    layers = _cache_layers(out[cache_kw] if cache_kw in out else out.past_key_values)
    t = prompt_ids.shape[1] + (0 if prefix is None else prefix.shape[0])
    return first, layers, t


def continuation_scores(
    model: Any,
    prompt_ids: Any,
    continuations: Sequence[Sequence[int]],
    end_ids: Sequence[int],
    chunk: int = DEFAULT_CHUNK,
    prefix: Any = None,
) -> Any:
    """log p(cont + one of ``end_ids`` | prompt) for every token list in ``continuations``,
    as a float tensor (n,); ranked decoding takes ``.tolist()`` of it under the caller's
    adapter and ``torch.inference_mode``. ``prompt_ids``: a (1, T) LongTensor on the model's
    device; ``prefix``: soft tokens (P, H) in front of the prompt (`graph_prompt`).
    Differentiable: the generator's ranking loss (`loss.ranking_loss`) trains exactly the
    score ranked decoding uses."""
    if any(len(c) == 0 for c in continuations):
        raise ValueError("every continuation needs at least one token")
    first, layers, t = prompt_pass(model, prompt_ids, prefix)
    return scores_over_cache(model, first, layers, t, continuations, end_ids, chunk)


def _packed_mask(t: int, lengths: Sequence[int], dtype: Any, device: Any) -> Any:
    """Additive (1, 1, L, t + L) attention mask for continuations packed into one row after
    a cached prompt of ``t`` positions: every token sees the whole prompt and the earlier
    tokens of its OWN continuation, nothing of the others."""
    import torch

    n = sum(lengths)
    mask = torch.full((1, 1, n, t + n), torch.finfo(dtype).min, dtype=dtype, device=device)
    mask[..., :t] = 0
    a = 0
    for ln in lengths:
        block = torch.ones((ln, ln), dtype=torch.bool, device=device).tril()
        mask[0, 0, a:a + ln, t + a:t + a + ln].masked_fill_(block, 0)
        a += ln
    return mask


def scores_over_cache(
    model: Any,
    first: Any,
    layers: list[tuple[Any, Any]],
    t: int,
    continuations: Sequence[Sequence[int]],
    end_ids: Sequence[int],
    chunk: int = DEFAULT_CHUNK,
) -> Any:
    """The scores of `continuation_scores` given the prompt's pass: ``first`` = log p(first
    token) (V,), ``layers`` = its KV cache per layer (batch 1, ``t`` positions).

    Up to ``chunk`` continuations are PACKED into one row of one forward pass over the
    prompt's cache (`_packed_mask`; positions restart at ``t`` for each): no padding and no
    copy of the cache per name (a batch of n names would copy it n times, which cost as much
    as the prompt pass itself on CPU)."""
    import torch

    device = first.device
    dtype = next(model.parameters()).dtype
    kw = _cache_keyword(model)
    out: list[Any] = []
    for lo in range(0, len(continuations), chunk):
        batch = [list(c) for c in continuations[lo:lo + chunk]]
        lengths = [len(c) for c in batch]
        flat = torch.tensor([x for c in batch for x in c], device=device)
        res = model(input_ids=flat[None, :], position_ids=(t + _offsets(lengths, device))[None],
                    attention_mask=_packed_mask(t, lengths, dtype, device), use_cache=True,
                    **{kw: _expanded_cache(layers, 1)})
        logp = torch.log_softmax(res.logits[0].float(), dim=-1)  # (L, V)
        out.append(_names_scores(first, logp, flat, lengths, end_ids))
    return torch.cat(out) if out else torch.zeros(0, device=device)


def _offsets(lengths: Sequence[int], device: Any) -> Any:
    """Each packed token's index within its own continuation."""
    import torch

    return torch.cat([torch.arange(n, device=device) for n in lengths])


def _names_scores(first: Any, logp: Any, flat: Any, lengths: Sequence[int],
                  end_ids: Sequence[int]) -> Any:
    """The packed continuations' scores: ``first`` = log p(first token | prompt) (V,),
    ``logp`` = (L, V) log-probabilities at each packed token ``flat`` (L,)."""
    import torch

    device = flat.device
    lens = torch.tensor(list(lengths), device=device)
    starts = torch.tensor([0, *lengths[:-1]], device=device).cumsum(0)
    offsets = _offsets(lengths, device)
    owner = torch.repeat_interleave(torch.arange(len(lengths), device=device), lens)
    pos = torch.nonzero(offsets > 0).squeeze(1)  # token j >= 1: predicted one position back
    total = first[flat[starts]].clone().index_add(0, owner[pos], logp[pos - 1, flat[pos]])
    last = logp[starts + lens - 1]  # (n, V) after each name
    ends = torch.tensor(list(end_ids), device=device)
    return total + torch.logsumexp(last[:, ends], dim=1)


def scores_with_prompt(
    model: Any,
    prompt_ids: Any,
    continuations: Sequence[Sequence[int]],
    end_ids: Sequence[int],
    past: Past | None = None,
    chunk: int = DEFAULT_CHUNK,
) -> tuple[Any, Any, list[tuple[Any, Any]], int]:
    """`continuation_scores` with the prompt and the first ``chunk`` continuations packed
    into ONE forward pass (the prompt causal, each continuation seeing the prompt and its
    own tokens): one pass fewer than `prompt_pass` + `scores_over_cache`, whose fixed cost
    on CPU is a good part of a short pass. ``past``: the cache of the prompt's first k
    tokens, so only the rest of the prompt is run. Returns (scores, log p(first token), the
    prompt's KV cache, its length); the rest of the continuations go over that cache.
    Inference only (no soft prompt)."""
    import torch

    if not continuations or any(len(c) == 0 for c in continuations):
        raise ValueError("scores_with_prompt needs continuations of at least one token each")
    device = prompt_ids.device
    dtype = next(model.parameters()).dtype
    t = prompt_ids.shape[1]
    k = past[1] if past is not None else 0
    packed = [list(c) for c in continuations[:chunk]]
    lengths = [len(c) for c in packed]
    n = sum(lengths)
    flat = torch.tensor([x for c in packed for x in c], dtype=prompt_ids.dtype, device=device)
    new = t - k
    mask = torch.full((1, 1, new + n, t + n), torch.finfo(dtype).min, dtype=dtype,
                      device=device)
    seen = torch.arange(t, device=device)[None, :] <= torch.arange(k, t, device=device)[:, None]
    mask[0, 0, :new, :t].masked_fill_(seen, 0)  # the prompt: causal
    mask[0, 0, new:] = _packed_mask(t, lengths, dtype, device)[0, 0]
    positions = torch.cat([torch.arange(k, t, device=device), t + _offsets(lengths, device)])
    kw = _cache_keyword(model)
    cache = ({kw: _expanded_cache(_first_positions(past[0], k), 1)}
             if past is not None and k > 0 else {})
    res = model(input_ids=torch.cat([prompt_ids[0, k:], flat])[None], position_ids=positions[None],
                attention_mask=mask, use_cache=True, logits_to_keep=n + 1, **cache)
    logp = torch.log_softmax(res.logits[0].float(), dim=-1)  # (n + 1, V)
    first = logp[0]  # after the prompt's last token
    layers = _first_positions(_cache_layers(res[kw] if kw in res else res.past_key_values), t)
    scores = _names_scores(first, logp[1:], flat, lengths, end_ids)
    rest = scores_over_cache(model, first, layers, t, continuations[chunk:], end_ids, chunk)
    return torch.cat([scores, rest]), first, layers, t


@dataclass(frozen=True)
class ScoringInputs:
    """What ranked decoding feeds the model: the prompt's ids, each unique name's ids, the
    ids that may end an item (EOS, ``|``)."""

    prompt_ids: list[int]
    names: list[str]
    continuations: list[list[int]]
    end_ids: list[int]


def scoring_inputs(tokenizer: Any, prompt: str, names: Sequence[str]) -> ScoringInputs:
    """Tokenise for `continuation_scores` (inference and the ranking loss share this):
    the prompt alone, every distinct non-empty name alone (first occurrence order)."""
    unique = list(dict.fromkeys(n for n in names if n))
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    conts = [list(tokenizer(n, add_special_tokens=False)["input_ids"]) for n in unique]
    sep = tokenizer("|", add_special_tokens=False)["input_ids"]
    ends = [i for i in {tokenizer.eos_token_id, sep[0] if len(sep) == 1 else None}
            if i is not None]
    return ScoringInputs(list(ids), unique, conts, sorted(ends))


def select_top(scored: Sequence[Scored], margin: float, top_m: int | None = None
               ) -> list[Scored]:
    """The best names: score >= best - ``margin``, at most ``top_m``, at least one.
    Input order does not matter; output is best first (ties: input order)."""
    if not scored:
        return []
    ranked = sorted(scored, key=lambda s: -s.score)
    best = ranked[0].score
    keep = [s for s in ranked if s.score >= best - margin]
    if top_m is not None:
        keep = keep[: max(1, top_m)]
    return keep or ranked[:1]
