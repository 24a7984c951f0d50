"""Token-weighted negative log-likelihood (paper eqs. 12-13, and eq. 15 as a special case).

    L(theta) = - sum_t w_t log p(y_t | x, y_<t)     per example; the batch loss is the mean

Weights come from character spans: the prompt and the target are tokenised TOGETHER and each
token gets the largest weight of the name spans its character offsets overlap (1 for a gold
answer in S, lambda for another node of S, 0 for prompt text and ``|`` separators). A name
that tokenises differently in context, or a token that straddles a separator and a name, is
therefore weighted by what it actually covers in the sequence the model is trained on.

End of list: eq. 13 gives the EOS token weight 0 ("otherwise"), so nothing would teach the
model where the list stops. We give the EOS token after the target line its own weight,
``eos_weight`` (`train.TrainConfig.eos_weight`, default 1.0; 0 is eq. 13 literally):
without it a trained model tends to run on past its line to the token limit.

Ranking loss (generator; beyond the paper, ``TrainConfig.rank_weight``, 0 = eq. 15 alone).
Ranked decoding picks the answer by each context name's log-likelihood as the first item of
the output (`ranking`). Eq. 15 trains that only for the first gold name of the target line
and never pushes a wrong name down, so ``rank_weight`` adds, per example,

    L_rank = logsumexp_{c in C} s_c - logsumexp_{c in C, gold} s_c

over the context's names C scored exactly as at inference (`ranking_loss`,
`sft_and_rank_loss`: one pass over the sequence gives eq. 15, the first-token distribution
and the prompt's KV cache the names are scored over). Examples with no gold name in the
context keep eq. 15 alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def align_weights(
    offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int, float]]
) -> list[float]:
    """Per-token weight: the max weight of the character spans ``[start, end)`` the token's
    offsets overlap; 0 for zero-width tokens and tokens outside every span."""
    ordered = sorted((s, e, w) for s, e, w in spans if e > s)
    out: list[float] = []
    first = 0  # first span that can still overlap (tokens come in text order)
    for ts, te in offsets:
        if te <= ts:
            out.append(0.0)
            continue
        while first < len(ordered) and ordered[first][1] <= ts:
            first += 1
        w = 0.0
        j = first
        while j < len(ordered) and ordered[j][0] < te:
            s, e, sw = ordered[j]
            if s < te and e > ts:
                w = max(w, sw)
            j += 1
        out.append(w)
    return out


def weighted_nll(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``logits[b, t]`` predicts ``labels[b, t]`` with weight ``weights[b, t]``.

    Returns (mean over the batch of the per-example weighted sums, the per-example sums).
    Only positions with a non-zero weight are put through the softmax."""
    if logits.shape[:2] != labels.shape or labels.shape != weights.shape:
        raise ValueError(
            f"shape mismatch: logits {tuple(logits.shape)}, labels {tuple(labels.shape)}, "
            f"weights {tuple(weights.shape)}"
        )
    weights = weights.to(torch.float32)
    mask = weights != 0
    per_token = torch.zeros(weights.shape, dtype=torch.float32, device=logits.device)
    if mask.any():
        nll = F.cross_entropy(logits[mask].float(), labels[mask], reduction="none")
        per_token = per_token.masked_scatter(mask, nll)
    else:  # keep the graph connected so backward() still works
        per_token = per_token + logits.sum() * 0.0
    per_example = (per_token * weights).sum(dim=1)
    return per_example.mean(), per_example


def sequence_loss(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    weights: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    prefix: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted NLL of a causal LM on (B, T) token ids with (B, T) weights on those tokens;
    ``prefix``: soft tokens (P, H) in front of every row (`graph_prompt`; weight 0).

    Logits are computed only for the positions that predict weighted tokens (the target sits
    at the end of the sequence), through the model's ``logits_to_keep``."""
    nz = (weights != 0).any(dim=0).nonzero()
    t = input_ids.shape[1]
    first = int(nz[0]) if len(nz) else t - 1
    first = max(first, 1)
    keep = t - first + 1  # logits at positions first-1 .. t-1 (counted from the end)
    if prefix is None:
        out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep)
    else:
        from talent_core.llm.graph_prompt import prefixed_embeds

        embeds = prefixed_embeds(model, input_ids, prefix)
        if attention_mask is not None:
            ones = attention_mask.new_ones((attention_mask.shape[0], prefix.shape[0]))
            attention_mask = torch.cat([ones, attention_mask], dim=1)
        out = model(inputs_embeds=embeds, attention_mask=attention_mask, logits_to_keep=keep)
    logits = out.logits[:, :-1]  # positions first-1 .. t-2 predict tokens first .. t-1
    return weighted_nll(logits, input_ids[:, first:], weights[:, first:])


def ranking_loss(scores: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """Listwise loss of ranked decoding: - log of the probability mass that a softmax over
    the candidates' scores puts on the gold ones,

        L = logsumexp_{c in C} s_c - logsumexp_{c in C, gold} s_c

    (0 when only gold names are candidates; needs at least one gold). ``scores``: (n,) the
    `ranking.continuation_scores` of the context's names, ``gold``: (n,) bool."""
    if scores.shape != gold.shape:
        raise ValueError(f"shape mismatch: scores {tuple(scores.shape)}, gold {tuple(gold.shape)}")
    if not bool(gold.any()):
        raise ValueError("the ranking loss needs at least one gold candidate")
    return torch.logsumexp(scores, dim=0) - torch.logsumexp(scores[gold], dim=0)


def sft_and_rank_loss(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    weights: torch.Tensor,
    head_len: int,
    continuations: list[list[int]],
    gold: list[bool],
    end_ids: list[int],
    sft_weight: float = 1.0,
    rank_weight: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One example (``input_ids``: (1, T) = prompt + answer prefix + target + EOS, the
    first ``head_len`` tokens being the prompt as ranked decoding tokenises it):

        sft_weight * (eq. 15 weighted NLL) + rank_weight * `ranking_loss`

    from ONE pass over the sequence: its logits from position ``head_len - 1`` on give the
    SFT term and the first-name distribution, and its KV cache cut at ``head_len`` is what
    the candidate names are scored over (`ranking.scores_over_cache`). Returns (loss, the
    ranking term or None when no candidate is gold)."""
    from talent_core.llm.ranking import (
        _cache_keyword,
        _cache_layers,
        _first_positions,
        scores_over_cache,
    )

    t = input_ids.shape[1]
    if not 0 < head_len < t:
        raise ValueError(f"head_len {head_len} outside the sequence (length {t})")
    if bool((weights[:, :head_len] != 0).any()):
        raise ValueError("the prompt has weighted tokens: head_len does not end the prompt")
    has_gold = any(gold)
    out = model(input_ids=input_ids, use_cache=has_gold and rank_weight != 0,
                logits_to_keep=t - head_len + 1)
    logits = out.logits  # positions head_len - 1 .. t - 1
    per_example = weighted_nll(logits[:, :-1], input_ids[:, head_len:], weights[:, head_len:])[1]
    loss = sft_weight * per_example[0]
    if not has_gold or rank_weight == 0:
        return loss, None
    first = torch.log_softmax(logits[0, 0].float(), dim=-1)
    kw = _cache_keyword(model)
    cache = out[kw] if kw in out else out.past_key_values
    layers = _first_positions(_cache_layers(cache), head_len)
    scores = scores_over_cache(model, first, layers, head_len, continuations, end_ids)
    rank = ranking_loss(scores, torch.tensor(gold, device=scores.device))
    return loss + rank_weight * rank, rank
