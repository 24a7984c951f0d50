"""Training the path re-ranker (`planning.reranker`): a cross-encoder reading the question
and one relation path in words together, fitted listwise over a question's gold path and
the paths the bi-encoder matcher confuses with it.

Loss: for each question, the candidates are its gold path, up to ``hard`` of the paths the
bi-encoder ranks highest among those it could have planned (its anchor's other paths for a
store's or MetaQA's question, the training vocabulary of the same domain for a WebQSP
record: `mine`), and ``draws`` hard negatives of the matcher's own kinds (`contrast.negative`:
one relation longer or shorter, reordered, another ground path); cross-entropy of the
softmax over the candidates' logits with the gold as the target (the listwise loss of
cross-encoder re-rankers, e.g. Nogueira & Cho's monoBERT trained with a softmax over one
positive and its negatives).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from talent_core.errors import TrainingDataError
from talent_core.planning.matcher import (
    Pair,
    PathMatcher,
    path_words,
    save_matcher,
)
from talent_core.planning.paths import PathT
from talent_core.planning.reranker import RERANKER_DIR, ROLE, pair_text
from talent_core.training.contrast import (
    Steps,
    by_domain,
    domain,
    factors_of,
    lora_encoder,
    negative,
    start_factors,
    step_count,
    unit_vectors,
)

log = logging.getLogger(__name__)


@dataclass
class RerankSettings:
    epochs: int = 1
    batch: int = 8  # questions per step (each with its candidates)
    hard: int = 4  # mined negatives per question and step (of its `mine` list)
    draws: int = 3  # negatives of the matcher's kinds per question and step
    lr: float = 3e-4
    rank: int = 16
    alpha: float = 32.0
    max_length: int = 64
    seed: int = 0
    threads: int = 0


def mine(pairs: Sequence[Pair], matcher: PathMatcher, k: int = 8) -> list[list[PathT]]:
    """Per pair, the ``k`` non-gold paths the bi-encoder ``matcher`` scores highest: of the
    pair's own negatives (its anchor's other paths) where it has several, else of the
    gold paths of every pair in the same domain (WebQSP's labels, no KG behind them)."""
    domains = by_domain(pairs)
    out = []
    for p in pairs:
        gold = set(p.gold)
        pool = p.negatives if len(p.negatives) >= 2 and p.source != "webqsp" else sorted(
            set(domains.get(domain(p.gold[0]), [])) | set(p.negatives))
        pool = [t for t in dict.fromkeys(pool) if t not in gold]
        if not pool:
            out.append([])
            continue
        sims = matcher.similarity(matcher.encode_question(p.text), pool)
        out.append([pool[i] for i in np.argsort(-sims)[:k]])
    return out


def fit_reranker(pairs: Sequence[Pair], hard: Sequence[Sequence[PathT]], output: Path, *,
                 name: str, base_model: str, settings: RerankSettings | None = None,
                 trained_on: dict[str, Any] | None = None, init: Path | None = None,
                 progress: Callable[[int, int, float], None] | None = None) -> dict[str, Any]:
    """Fit the re-ranker's LoRA factors and head on ``pairs`` (``hard``: each pair's mined
    negatives, `mine`) and write it to ``output`` as a matcher directory whose meta's
    ``role`` is `planning.reranker.ROLE`; returns its meta. ``init``: a re-ranker whose
    factors and head training starts from (its rank and alpha are kept)."""
    import torch

    s = settings or RerankSettings()
    start = start_factors(init, s)
    if not pairs:
        raise TrainingDataError("no training pair (question with a labelled relation path)")
    rng = random.Random(s.seed)
    tok, model = lora_encoder(base_model, s, start)
    head = torch.nn.Linear(int(model.config.hidden_size), 1)
    scale = 20.0  # the head reads the unit vector; a zero head starts every path equal
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        if "head.w" in start:  # a re-ranker; a bi-encoder matcher lends its encoder only
            head.weight.copy_(torch.from_numpy(start["head.w"] / scale).reshape(1, -1))
            head.bias.copy_(torch.from_numpy(start["head.b"]).reshape(1))

    def logits(texts: list[str]) -> Any:
        return scale * head(unit_vectors(tok, model, texts, s.max_length)).squeeze(-1)

    domains = by_domain(pairs)
    params = [p for p in model.parameters() if p.requires_grad] + list(head.parameters())
    steps = step_count(len(pairs), s.batch, s.epochs)
    fit = Steps(params, s.lr, steps, progress)
    order = list(range(len(pairs)))
    model.train()
    for _ in range(s.epochs):
        rng.shuffle(order)
        for b in range(0, len(order), s.batch):
            texts: list[str] = []
            spans: list[tuple[int, int]] = []
            for i in order[b:b + s.batch]:
                p = pairs[i]
                gold = set(p.gold)
                cands = [rng.choice(p.gold)]
                mined = list(hard[i])
                cands += rng.sample(mined, min(s.hard, len(mined)))
                for _ in range(s.draws):
                    cands.append(negative(p, rng, domains))
                cands = [cands[0]] + [t for t in dict.fromkeys(cands[1:])
                                      if t not in gold and t != cands[0]]
                spans.append((len(texts), len(texts) + len(cands)))
                texts += [pair_text(p.text, path_words(t)) for t in cands]
            z = logits(texts)
            fit.take(torch.stack([torch.nn.functional.cross_entropy(
                z[a:e].unsqueeze(0), torch.zeros(1, dtype=torch.long)) for a, e in spans]).mean())
    training = fit.record(last=50)
    factors = factors_of(model)
    factors["head.w"] = (scale * head.weight.detach().numpy().reshape(-1))
    factors["head.b"] = head.bias.detach().numpy().reshape(1)
    meta: dict[str, Any] = {
        "name": name, "role": ROLE, "base_model": base_model, "lora_rank": s.rank,
        "lora_alpha": s.alpha, "settings": s.__dict__,
        "trained_on": {**(trained_on or {}), "pairs": len(pairs),
                       "started_from": str(init) if init is not None else None,
                       "sources": sorted({p.source for p in pairs})},
        "training": training,
    }
    save_matcher(output, meta, factors)
    log.info("reranker %s: %d pairs, %d steps in %.0f s -> %s", name, len(pairs), steps,
             training["fit_s"], output)
    return meta


def fit_rerank_after(pairs: Sequence[Pair], output: Path, base_model: str, *, init: Path,
                     epochs: int, lr: float, seed: int = 0,
                     progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """The re-ranker that goes with the matcher just written to ``output``: fitted on the
    same ``pairs``, their negatives mined by that matcher, from ``init`` (a re-ranker, or
    a matcher lending its encoder), into ``output``'s `RERANKER_DIR` (progress stage
    "rerank"); returns its meta."""
    from talent_core.planning.matcher import load_matcher

    def step(k: int, n: int, loss: float) -> None:
        if k % 20 == 0 or k == n:
            log.info("re-ranker step %d/%d, loss %.3f", k, n, loss)
        if progress:
            progress("rerank", k, n)

    hard = mine(pairs, load_matcher(str(output), base_model, None))
    return fit_reranker(pairs, hard, output / RERANKER_DIR, name=f"{output.name}-reranker",
                        base_model=base_model,
                        settings=RerankSettings(epochs=epochs, lr=lr, seed=seed),
                        init=init, progress=step, trained_on={"with_matcher": str(output)})
