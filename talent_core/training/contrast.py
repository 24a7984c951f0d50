"""What the path matcher and the path re-ranker share in training: the LoRA targets of the
sentence encoder, reading the adapted modules back, and the hard negatives a question's gold
relation path is contrasted with (`training.matcher`, `training.reranker`)."""

from __future__ import annotations

import itertools
import random
import re
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from talent_core.planning.matcher import Pair, load_meta, read_factors
from talent_core.planning.paths import PathT

TARGETS = r".*encoder\.layer\.\d+\..*(query|key|value|dense)"


def lora_modules(model: Any) -> list[tuple[str, Any]]:
    """(the adapted weight's name in the base model, its LoRA module) of a peft model."""
    return [(re.sub(r"^base_model\.model\.", "", name) + ".weight", mod)
            for name, mod in model.named_modules()
            if hasattr(mod, "lora_A") and "default" in getattr(mod, "lora_A", {})]


def start_factors(init: Path | None, settings: Any) -> dict[str, np.ndarray]:
    """The factors a fit starts from (``init``: a matcher directory; none: {}); ``settings``
    takes its LoRA rank and alpha."""
    if init is None:
        return {}
    meta = load_meta(init)
    settings.rank, settings.alpha = int(meta["lora_rank"]), float(meta["lora_alpha"])
    return read_factors(init, meta)


def lora_encoder(base_model: str, settings: Any, start: dict[str, np.ndarray]
                 ) -> tuple[Any, Any]:
    """(tokenizer, the sentence encoder with LoRA factors on `TARGETS`: fresh, or
    ``start``'s), torch seeded and threaded as ``settings`` say."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModel, AutoTokenizer

    from talent_core.embedding_common import resolve_model_path

    if settings.threads:
        torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    root = resolve_model_path(base_model)
    tok = AutoTokenizer.from_pretrained(root)
    model = get_peft_model(AutoModel.from_pretrained(root),
                           LoraConfig(r=settings.rank, lora_alpha=settings.alpha,
                                      lora_dropout=0.0, target_modules=TARGETS))
    if start:
        with torch.no_grad():
            for weight, mod in lora_modules(model):
                mod.lora_A["default"].weight.copy_(torch.from_numpy(start[weight + ".A"]))
                mod.lora_B["default"].weight.copy_(torch.from_numpy(start[weight + ".B"]))
    return tok, model


def unit_vectors(tok: Any, model: Any, texts: list[str], max_length: int) -> Any:
    """The encoder's unit mean-pooled vectors of ``texts`` (a torch tensor, with grad), as
    sentence-transformers pools MiniLM and the numpy query path reads it."""
    import torch

    enc = tok(texts, padding=True, truncation=True, max_length=max_length,
              return_tensors="pt")
    out = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(out.dtype)
    pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1)
    return torch.nn.functional.normalize(pooled, dim=-1)


def step_count(items: int, batch: int, epochs: int) -> int:
    """Optimiser steps of a fit: ``epochs`` passes over ``items`` in batches of ``batch``
    (the last batch of a pass may be short)."""
    return epochs * ((items + batch - 1) // batch)


class Steps:
    """AdamW under a linear warm-up (the first tenth of the steps) and a linear decay to 0:
    `take` one step per batch's loss; `record` is the meta's training record."""

    def __init__(self, params: list[Any], lr: float, steps: int,
                 progress: Callable[[int, int, float], None] | None = None):
        import torch

        self.steps, self.progress, self.losses = steps, progress, []
        self.opt = torch.optim.AdamW(params, lr=lr)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda k: min(1.0, (k + 1) / max(1, steps // 10)) * max(0.0, 1 - k / steps))
        self.t0 = time.perf_counter()

    def take(self, loss: Any) -> None:
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.sched.step()
        self.losses.append(float(loss.item()))
        if self.progress:
            self.progress(len(self.losses), self.steps, self.losses[-1])

    def record(self, last: int = 20) -> dict[str, Any]:
        """Seconds, steps, the mean loss of the ``last`` steps, the process's peak RSS."""
        return {"fit_s": round(time.perf_counter() - self.t0, 1), "steps": self.steps,
                "final_loss": (round(float(np.mean(self.losses[-last:])), 4)
                               if self.losses else None),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                     / 1024, 1)}


def factors_of(model: Any) -> dict[str, np.ndarray]:
    """A fitted encoder's LoRA factors, by adapted weight (``<name>.A`` / ``<name>.B``)."""
    out: dict[str, np.ndarray] = {}
    for weight, mod in lora_modules(model):
        out[weight + ".A"] = mod.lora_A["default"].weight.detach().numpy()
        out[weight + ".B"] = mod.lora_B["default"].weight.detach().numpy()
    return out


def domain(path: PathT) -> str:
    """A path's domain: its first relation's first dotted part (Freebase), or "" (MetaQA's
    relations have one domain)."""
    head = path[0]
    return head.split(".")[0] if "." in head else ""


def by_domain(pairs: Any) -> dict[str, list[PathT]]:
    """Every gold path of ``pairs`` under its `domain` (repeats kept: a common path is
    drawn as a negative as often as it is asked)."""
    out: dict[str, list[PathT]] = {}
    for p in pairs:
        for g in p.gold:
            out.setdefault(domain(g), []).append(g)
    return out


def reorderings(path: PathT) -> list[PathT]:
    """The path's own relations in another order, or one fewer at either end: what a
    bag of relation words cannot tell from it."""
    out = set(itertools.permutations(path)) | ({path[:-1], path[1:]} if len(path) > 1 else set())
    out.discard(path)
    return sorted(out)


def negative(pair: Pair, rng: random.Random, by_domain: dict[str, list[PathT]]) -> PathT:
    """A hard negative, one of: the gold path one relation longer (30 %; a relation of a
    same-domain path: the beam grows paths, so the matcher must prefer stopping where the
    question does), for a store's own question (--self) its gold's relations reordered
    or one fewer (30 %: a bag of relation words cannot tell them, the question's order
    can), for a pair with every other path of its anchor (MetaQA's types, a store's own)
    one of those, else (WebQSP: labels without the KG) the gold path one
    relation shorter (10 %), one of the record's other ground paths (30 %), a same-domain
    path."""
    gold = set(pair.gold)
    g = rng.choice(pair.gold)
    pool = by_domain.get(domain(g), []) or [g]
    draw = rng.random()
    for _ in range(8):
        if draw < 0.3:
            t = (*g, rng.choice(rng.choice(pool)))
        elif draw < 0.6 and pair.source == "self" and len(g) > 1:
            t = rng.choice(reorderings(g))
        elif pair.negatives and pair.source != "webqsp":
            t = rng.choice(pair.negatives)
        elif draw < 0.4 and len(g) > 1:
            t = g[:-1]
        elif draw < 0.7 and pair.negatives:
            t = rng.choice(pair.negatives)
        else:
            t = rng.choice(pool)
        if t not in gold:
            return t
        draw = rng.random()
    return (*g, g[-1])
