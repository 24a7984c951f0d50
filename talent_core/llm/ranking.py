"""Ranked decoding: every candidate name scored by the model, in one batched pass.

Free decoding (the paper) lets the LLM write a line of names; a 135M model then stops
early, repeats itself or names things that do not exist. Ranked decoding asks the same
trained model a narrower question: for each candidate name ``c`` (a node of the prompt's
graph), how likely is ``c`` as the FIRST item of its output line?

    score(c) = log p(c_1 .. c_n | prompt) + log( p("|" | prompt, c) + p(EOS | prompt, c) )

i.e. the name's tokens followed by the end of an item (a separator or the end of the
line), so that ``tom`` cannot win over ``tom hanks`` by being a prefix of it. Scores are
summed log-probabilities (not length-normalised).

Cost: one forward pass over the prompt (its KV cache is kept), then the candidates'
tokens in batches of ``chunk`` over the shared cache, never the prompt again.

Choosing the set (pure functions, tuned on a validation split):
* `select_top`: names within ``margin`` (nats) of the best, at most ``top_m``, at least one.
  The retriever's V̂ and the generator's answer set are both chosen this way.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_CHUNK = 16


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


def _expanded_cache(layers: list[tuple[Any, Any]], n: int) -> Any:
    """A fresh DynamicCache holding the prompt's keys/values for a batch of ``n`` (views:
    nothing is copied until the continuation's tokens are appended)."""
    from transformers import DynamicCache

    data = [(k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for k, v in layers]
    return DynamicCache(data)


def score_continuations(
    model: Any,
    prompt_ids: Any,
    continuations: Sequence[Sequence[int]],
    end_ids: Sequence[int],
    pad_id: int,
    chunk: int = DEFAULT_CHUNK,
    prefix: Any = None,
) -> list[float]:
    """log p(cont + one of ``end_ids`` | prompt) for every token list in ``continuations``.

    ``prompt_ids``: a (1, T) LongTensor on the model's device; ``prefix``: soft tokens
    (P, H) in front of the prompt (`graph_prompt`). Runs under the caller's adapter and
    ``torch.inference_mode``."""
    import torch

    if not continuations:
        return []
    if any(len(c) == 0 for c in continuations):
        raise ValueError("every continuation needs at least one token")
    device = prompt_ids.device
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
    ends = torch.tensor(list(end_ids), device=device)
    scores: list[float] = []
    for lo in range(0, len(continuations), chunk):
        batch = continuations[lo:lo + chunk]
        n, width = len(batch), max(len(c) for c in batch)
        ids = torch.full((n, width), pad_id, dtype=torch.long, device=device)
        for i, c in enumerate(batch):
            ids[i, : len(c)] = torch.tensor(list(c), device=device)
        mask = torch.ones((n, t + width), dtype=torch.long, device=device)
        for i, c in enumerate(batch):
            mask[i, t + len(c):] = 0  # right padding: never attended to by real tokens
        res = model(input_ids=ids, attention_mask=mask, use_cache=True,
                    **{cache_kw: _expanded_cache(layers, n)})
        logp = torch.log_softmax(res.logits.float(), dim=-1)  # (n, width, V)
        for i, c in enumerate(batch):
            total = float(first[c[0]])
            for j in range(1, len(c)):
                total += float(logp[i, j - 1, c[j]])
            total += float(torch.logsumexp(logp[i, len(c) - 1, ends], dim=0))
            scores.append(total)
    return scores


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
