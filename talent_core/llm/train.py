"""Training loops: the retriever (eqs. 12-13) and the generator SFT (eq. 15).

Defaults are the paper's Appendix B: LoRA r=8 / alpha=16 / dropout 0.05, lr 5e-5, 3 epochs,
warmup ratio 0.03 (linear schedule), batch 1 with gradient accumulation 8; lambda = 0.001
(WebQSP; use 0.01 for CWQ and ExplaGraphs). All configurable through `TrainConfig`.

* Loss: sum over an example's tokens of w_t * NLL, mean over the examples of an optimizer
  step (the accumulation group).
* End of list: the EOS token after the target line has weight ``eos_weight`` (default 1.0;
  eq. 13 alone would give it 0 and nothing would teach the model where to stop; see `loss`
  for the measured effect). The generator's EOS always has weight 1 (standard SFT).
* Prompt length: ``max_length`` tokens for prompt + target + EOS; rows of S are dropped to fit
  (see `context`), never the question, the instructions or the target. An example that does
  not fit even without rows is skipped with a warning (counted in the metrics).
* Reproducible and resumable: the data order of epoch e is a permutation seeded by
  ``seed + e``; every ``save_every`` optimizer steps a checkpoint (adapter, optimizer,
  scheduler, step, RNG states) is written atomically under ``output_dir/checkpoints``;
  a run restarted with the same configuration resumes from the latest one and ends with the
  same adapter as an uninterrupted run. A different configuration is refused.
* The generator is trained on contexts produced by the TRAINED retriever (``retriever_dir``);
  the retriever's selections are cached in ``output_dir/retriever_selections.jsonl``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import math
import os
import random
import resource
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from tqdm.auto import tqdm

from talent_core.config import Settings, get_settings
from talent_core.llm.data import TrainingExample
from talent_core.llm.features import (
    Features,
    PromptTooLong,
    generator_features,
    retriever_features,
)
from talent_core.llm.models import (
    DEFAULT_LORA_TARGETS,
    AdapterMeta,
    add_lora,
    load_base,
    lora_config,
    meta_for,
    save_adapter,
)
from talent_core.llm.prompts import Task
from talent_core.models import Selection

log = logging.getLogger(__name__)

STATE_FILE = "trainer_state.pt"
SELECTIONS_FILE = "retriever_selections.jsonl"


class TrainConfig(BaseModel):
    output_dir: Path
    base_model: str | None = None  # None: settings.base_model
    task: Task = "kgqa"
    lam: float = 0.001  # weak-positive weight (retriever)
    eos_weight: float = 1.0  # the EOS token after the target line (0: eq. 13 literally)
    epochs: int = 3
    lr: float = 5e-5
    warmup_ratio: float = 0.03
    batch_size: int = 1
    grad_accum: int = 8
    max_length: int = 4096  # prompt + target + EOS tokens
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    lora_targets: str = DEFAULT_LORA_TARGETS  # comma list or "all-linear"
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 0
    max_steps: int | None = None  # optimizer steps; None: epochs decide
    save_every: int = 100  # optimizer steps between checkpoints; 0: none
    keep_checkpoints: int = 2
    gradient_checkpointing: bool = False
    device: str | None = None  # None: cuda when available, else cpu
    include_endpoints: bool = False  # generator context: list the other end of E-hat edges
    # recorded in the adapter metadata
    dataset: str = ""
    k: int | None = 10
    hops: int | None = None
    progress: bool = True

    def identity(self) -> dict[str, Any]:
        """Fields that change what is trained (a resumed run must agree on all of them)."""
        skip = {"output_dir", "save_every", "keep_checkpoints", "device", "progress",
                "dataset", "k", "hops"}
        return {k: (str(v) if isinstance(v, Path) else v)
                for k, v in self.model_dump().items() if k not in skip}


class ResumeMismatch(ValueError):
    """The checkpoints in the output directory belong to another configuration or data."""


# --- helpers ---------------------------------------------------------------------------


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _fingerprint(config: TrainConfig, kind: str, features: Sequence[Features]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"kind": kind, **config.identity()}, sort_keys=True).encode())
    for f in features:
        h.update(len(f.input_ids).to_bytes(4, "little"))
        h.update(b"".join(i.to_bytes(4, "little", signed=True) for i in f.input_ids))
        h.update(json.dumps(f.weights).encode())
    return h.hexdigest()


def _rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _checkpoints(output_dir: Path) -> list[Path]:
    root = output_dir / "checkpoints"
    if not root.is_dir():
        return []
    done = [p for p in root.glob("step-*") if p.is_dir() and not p.name.endswith(".tmp")
            and (p / STATE_FILE).is_file()]
    return sorted(done, key=lambda p: int(p.name.split("-")[1]))


def _save_checkpoint(model: Any, output_dir: Path, state: dict[str, Any], keep: int) -> Path:
    import torch

    root = output_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{state['step']:07d}"
    tmp = root / (final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    torch.save(state, tmp / STATE_FILE)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in _checkpoints(output_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    log.info("checkpoint %s", final)
    return final


def _load_checkpoint(model: Any, ckpt: Path) -> dict[str, Any]:
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = ckpt / "adapter_model.safetensors"
    set_peft_model_state_dict(model, load_file(str(weights)))
    return torch.load(ckpt / STATE_FILE, weights_only=False, map_location="cpu")


def _collate(batch: Sequence[Features], pad_id: int, device: str) -> tuple[Any, Any, Any]:
    import torch

    width = max(len(f) for f in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    weights = torch.zeros((len(batch), width), dtype=torch.float32)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, f in enumerate(batch):  # right padding: the padding has weight 0
        ids[i, : len(f)] = torch.tensor(f.input_ids)
        weights[i, : len(f)] = torch.tensor(f.weights)
        mask[i, : len(f)] = 1
    return ids.to(device), weights.to(device), mask.to(device)


# --- the loop ----------------------------------------------------------------------------


def run_training(
    model: Any,
    tokenizer: Any,
    device: str,
    features: Sequence[Features],
    config: TrainConfig,
    kind: str,
    resume: bool = True,
    val_features: Sequence[Features] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Train the LoRA parameters of ``model`` on ``features``; returns training metrics.

    ``on_step(step, loss)`` is called after every optimizer step (tests use it to simulate
    an interruption)."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from talent_core.llm.loss import sequence_loss

    if not features:
        raise ValueError("no training examples left (all skipped or none given)")
    out = Path(config.output_dir)
    n = len(features)
    micro_per_epoch = math.ceil(n / config.batch_size)
    total_micro = micro_per_epoch * config.epochs
    total_steps = math.ceil(total_micro / config.grad_accum)
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
        total_micro = min(total_micro, total_steps * config.grad_accum)
    warmup = math.ceil(config.warmup_ratio * total_steps)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total_steps)
    fingerprint = _fingerprint(config, kind, features)

    step, micro, history = 0, 0, []
    resumed_from = None
    checkpoints = _checkpoints(out)
    if checkpoints and not resume:
        raise ResumeMismatch(
            f"{out}: holds checkpoints of an earlier run ({checkpoints[-1].name}); resume it "
            "or choose another output directory"
        )
    if checkpoints:
        state = _load_checkpoint(model, checkpoints[-1])
        if state["fingerprint"] != fingerprint:
            raise ResumeMismatch(
                f"{checkpoints[-1]}: checkpoint of a different configuration or data; "
                "use another output directory (or the original settings and examples)"
            )
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step, micro, history = state["step"], state["micro"], state["history"]
        resumed_from = step
        _set_rng_state(state["rng"])
        log.info("resuming %s from %s (step %d/%d)", kind, checkpoints[-1].name, step,
                 total_steps)

    perms: dict[int, list[int]] = {}

    def batch_at(m: int) -> list[Features]:
        epoch, idx = divmod(m, micro_per_epoch)
        if epoch not in perms:
            g = torch.Generator().manual_seed(config.seed + epoch)
            perms[epoch] = torch.randperm(n, generator=g).tolist()
        order = perms[epoch]
        return [features[i] for i in order[idx * config.batch_size:(idx + 1) * config.batch_size]]

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    model.train()
    t_start = time.perf_counter()
    steps_this_run = 0
    bar = tqdm(total=total_steps, initial=step, desc=f"train {kind}", unit="step",
               disable=not config.progress)
    try:
        while micro < total_micro:
            group_start = micro
            group = min(config.grad_accum, total_micro - group_start)
            group_loss = 0.0
            for _ in range(group):
                ids, weights, mask = _collate(batch_at(micro), pad_id, device)
                loss, _per_example = sequence_loss(model, ids, weights, mask)
                (loss / group).backward()
                group_loss += float(loss.detach()) / group
                micro += 1
            if config.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            steps_this_run += 1
            if not math.isfinite(group_loss):
                raise FloatingPointError(f"{kind} training: loss is {group_loss} at step {step}")
            history.append({"step": step, "loss": round(group_loss, 6),
                            "lr": scheduler.get_last_lr()[0]})
            bar.update(1)
            bar.set_postfix(loss=f"{group_loss:.4f}")
            if config.save_every and step % config.save_every == 0 and micro < total_micro:
                _save_checkpoint(model, out, {
                    "step": step, "micro": micro, "history": history,
                    "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "rng": _rng_state(), "fingerprint": fingerprint,
                }, config.keep_checkpoints)
            if on_step is not None:
                on_step(step, group_loss)
    finally:
        bar.close()
    seconds = time.perf_counter() - t_start
    model.eval()
    metrics: dict[str, Any] = {
        "examples": n,
        "epochs": config.epochs,
        "steps": step,
        "micro_steps": micro,
        "resumed_from_step": resumed_from,
        "seconds_this_run": round(seconds, 2),
        "seconds_per_step": round(seconds / steps_this_run, 4) if steps_this_run else None,
        "seconds_per_example": round(seconds / (steps_this_run * config.grad_accum), 4)
        if steps_this_run else None,
        "first_loss": history[0]["loss"] if history else None,
        "final_loss": (sum(h["loss"] for h in history[-10:]) / len(history[-10:]))
        if history else None,
        "mean_tokens": round(sum(len(f) for f in features) / n, 1),
        "max_tokens": max(len(f) for f in features),
        "mean_positive": round(sum(f.positives for f in features) / n, 3),
        "mean_weak": round(sum(f.weak for f in features) / n, 3),
        "examples_with_dropped_rows": sum(1 for f in features if f.dropped_nodes
                                          or f.dropped_edges),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "history": history[-2000:],
    }
    if torch.cuda.is_available() and device.startswith("cuda"):
        metrics["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    if val_features:
        metrics["val_loss"] = evaluate_loss(model, tokenizer, device, val_features)
    return metrics


def evaluate_loss(model: Any, tokenizer: Any, device: str, features: Sequence[Features]
                  ) -> float:
    """Mean per-example weighted NLL (no gradient)."""
    import torch

    from talent_core.llm.loss import sequence_loss

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    model.eval()
    total = 0.0
    with torch.inference_mode():
        for f in tqdm(features, desc="validation loss", leave=False):
            ids, weights, mask = _collate([f], pad_id, device)
            total += float(sequence_loss(model, ids, weights, mask)[0])
    return total / len(features)


# --- retriever ---------------------------------------------------------------------------


def build_features(
    examples: Sequence[TrainingExample],
    make: Callable[[TrainingExample], Features],
    desc: str,
    progress: bool = True,
) -> tuple[list[Features], int]:
    out: list[Features] = []
    skipped = 0
    for ex in tqdm(examples, desc=desc, unit="ex", disable=not progress):
        try:
            out.append(make(ex))
        except PromptTooLong as e:
            skipped += 1
            log.warning("skipped: %s", e)
    return out, skipped


def _prepare_model(config: TrainConfig, settings: Settings) -> tuple[Any, Any, str]:
    seed_everything(config.seed)
    model, tok, device = load_base(config.base_model or settings.base_model, settings,
                                   config.device, config.gradient_checkpointing)
    model = add_lora(model, lora_config(config.lora_r, config.lora_alpha, config.lora_dropout,
                                        config.lora_targets))
    return model, tok, device


def _lora_fields(config: TrainConfig) -> dict[str, Any]:
    return {"r": config.lora_r, "alpha": config.lora_alpha, "dropout": config.lora_dropout,
            "targets": config.lora_targets}


def _train_fields(config: TrainConfig) -> dict[str, Any]:
    keys = ("epochs", "lr", "warmup_ratio", "batch_size", "grad_accum", "max_steps",
            "weight_decay", "max_grad_norm", "gradient_checkpointing")
    return {k: getattr(config, k) for k in keys}


def train_retriever(
    examples: Sequence[TrainingExample],
    config: TrainConfig,
    settings: Settings | None = None,
    val_examples: Sequence[TrainingExample] | None = None,
    resume: bool = True,
    on_step: Callable[[int, float], None] | None = None,
) -> AdapterMeta:
    """Train R_theta with the token-weighted NLL; saves the adapter in ``output_dir``."""
    settings = settings or get_settings()
    model, tok, device = _prepare_model(config, settings)
    name = config.base_model or settings.base_model

    def make(ex: TrainingExample) -> Features:
        return retriever_features(tok, ex.question, ex.candidate, ex.retriever_gold, config.lam,
                                  config.eos_weight, config.max_length, config.task, name)

    features, skipped = build_features(examples, make, "retriever examples", config.progress)
    val, _ = build_features(val_examples or [], make, "validation examples", config.progress)
    metrics = run_training(model, tok, device, features, config, "retriever", resume, val,
                           on_step)
    metrics["skipped_too_long"] = skipped
    metrics["examples_without_positive"] = sum(1 for f in features if f.positives == 0)
    meta = meta_for(
        model, "retriever", task=config.task, lam=config.lam, eos_weight=config.eos_weight,
        k=config.k, hops=config.hops, dataset=config.dataset, seed=config.seed,
        max_length=config.max_length, lora=_lora_fields(config), train=_train_fields(config),
        metrics=metrics,
    )
    save_adapter(model, config.output_dir, meta)
    log.info("retriever adapter saved to %s (%d steps, final loss %s)", config.output_dir,
             metrics["steps"], metrics["final_loss"])
    return meta


# --- generator ---------------------------------------------------------------------------


def _selection_key(ex: TrainingExample, tag: str = "") -> str:
    h = hashlib.sha1(tag.encode() + b"\x00" + ex.question.encode())
    for n in ex.candidate.nodes:
        h.update(b"\x00" + n.id.encode())
    return h.hexdigest()


def collect_selections(
    examples: Sequence[TrainingExample],
    retriever: Any,
    cache_path: Path | None = None,
    progress: bool = True,
    tag: str = "",
) -> list[Selection]:
    """Run ``retriever.select`` on every example, caching to JSONL (resumable: an
    interrupted run keeps what it wrote; a partial last line is ignored). ``tag`` names
    the retriever (part of the cache key, so another retriever never reuses the cache)."""
    cached: dict[str, Selection] = {}
    if cache_path is not None and cache_path.is_file():
        with cache_path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                try:
                    rec = json.loads(line)
                    cached[rec["key"]] = Selection.model_validate(rec["selection"])
                except (ValueError, KeyError):
                    log.warning("%s:%d: unreadable cache line ignored", cache_path, lineno)
    out: list[Selection] = []
    sink = None
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        sink = cache_path.open("a", encoding="utf-8")
    try:
        for ex in tqdm(examples, desc="retriever selections", unit="q", disable=not progress):
            key = _selection_key(ex, tag)
            sel = cached.get(key)
            if sel is None:
                sel = retriever.select(ex.question, ex.candidate)
                cached[key] = sel
                if sink is not None:
                    sink.write(json.dumps({"key": key, "selection": sel.model_dump()}) + "\n")
                    sink.flush()
            out.append(sel)
    finally:
        if sink is not None:
            sink.close()
    return out


GeneratorSource = Literal["trained", "frozen", "none"]


def train_generator(
    examples: Sequence[TrainingExample],
    config: TrainConfig,
    retriever_dir: Path | None,
    source: GeneratorSource = "trained",
    settings: Settings | None = None,
    val_examples: Sequence[TrainingExample] | None = None,
    resume: bool = True,
    retriever_max_new_tokens: int = 256,
    on_step: Callable[[int, float], None] | None = None,
) -> AdapterMeta:
    """SFT of G_phi on contexts from the retriever (eq. 15).

    ``source``: "trained" (the paper: ``retriever_dir`` is required), "frozen" (the base
    model without adapter selects), "none" (all of S, the no-retriever ablation)."""
    from talent_core.llm.infer import LoadedLM, RetrieverModel

    settings = settings or get_settings()
    name = config.base_model or settings.base_model
    out = Path(config.output_dir)
    all_examples = list(examples) + list(val_examples or [])
    selections: list[Selection | None]
    if source == "none":
        selections = [None] * len(all_examples)
    else:
        if source == "trained" and retriever_dir is None:
            raise ValueError("the generator is trained on the TRAINED retriever's contexts: "
                             "give its adapter directory (or choose source 'frozen'/'none')")
        adapters = {"retriever": Path(retriever_dir)} if source == "trained" else {}
        lm = LoadedLM(name, adapters, settings, config.device)
        retriever = RetrieverModel(lm, "retriever" if adapters else None, config.task,
                                   retriever_max_new_tokens, config.max_length)
        cache = out / (SELECTIONS_FILE if source == "trained" else "frozen_" + SELECTIONS_FILE)
        meta = lm.metas.get("retriever")
        tag = f"{name}|{retriever_dir}|{meta.created if meta else 'frozen'}"
        selections = list(collect_selections(all_examples, retriever, cache, config.progress,
                                             tag))
        del retriever, lm
        gc.collect()
    model, tok, device = _prepare_model(config, settings)
    sel_of = dict(zip((id(e) for e in all_examples), selections, strict=True))

    def make(ex: TrainingExample) -> Features:
        return generator_features(tok, ex.question, ex.candidate, sel_of[id(ex)], ex.answers,
                                  config.max_length, config.task, name, config.include_endpoints)

    features, skipped = build_features(examples, make, "generator examples", config.progress)
    val, _ = build_features(val_examples or [], make, "validation examples", config.progress)
    metrics = run_training(model, tok, device, features, config, "generator", resume, val,
                           on_step)
    metrics["skipped_too_long"] = skipped
    chosen = [s for s in selections[: len(examples)] if s is not None]
    if chosen:
        metrics["retriever_mean_selected"] = round(
            sum(len(s.names) for s in chosen) / len(chosen), 3)
    meta = meta_for(
        model, "generator", task=config.task, dataset=config.dataset, k=config.k,
        hops=config.hops, seed=config.seed, max_length=config.max_length,
        include_endpoints=config.include_endpoints,
        retriever=str(retriever_dir) if source == "trained" else source,
        lora=_lora_fields(config), train=_train_fields(config), metrics=metrics,
        eos_weight=1.0,
    )
    save_adapter(model, config.output_dir, meta)
    log.info("generator adapter saved to %s (%d steps, final loss %s)", config.output_dir,
             metrics["steps"], metrics["final_loss"])
    return meta
