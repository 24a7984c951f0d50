"""The training loop of a graph-prompt generator: LoRA + GNN + projector, one loss.

The loss is the generator's (eq. 15, `loss.sequence_loss`) with the soft tokens in front of
the prompt; gradients flow through the LLM into the projector and the GNN. The schedule is
`trainer`'s (AdamW, linear warmup/decay, gradient accumulation, clipping, batch 1), with its
own learning rate for the graph module (``graph_lr``: it starts from random weights).

It is a plain loop rather than `transformers.Trainer`: a Trainer checkpoint of a module that
wraps the base model would hold every base weight. Checkpoints here
hold the trainable tensors only (LoRA, GNN, projector), the optimizer, the scheduler, the
step and the RNG state, written atomically every ``save_every`` steps under
``output_dir/checkpoints``; a restarted run with the same configuration and data resumes
from the latest one and ends with the same weights as an uninterrupted run.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from talent_core.errors import ResumeMismatch
from talent_core.llm.features import Features
from talent_core.training.trainer import TrainConfig, _collate, _fingerprint, _peak_rss_mb

log = logging.getLogger(__name__)

GraphTensors = tuple[Any, Any, Any]  # (x, edge_index, edge_attr)
CKPT_PREFIX = "checkpoint-"


def _order(n: int, epochs: int, seed: int) -> list[int]:
    """Example indices in training order: epoch e is a permutation seeded by seed + e."""
    import torch

    out: list[int] = []
    for e in range(epochs):
        g = torch.Generator().manual_seed(seed + e)
        out += torch.randperm(n, generator=g).tolist()
    return out


def _trainable(model: Any) -> dict[str, Any]:
    return {k: p for k, p in model.named_parameters() if p.requires_grad}


def _latest(ckpt_dir: Path) -> Path | None:
    found = [p for p in ckpt_dir.glob(CKPT_PREFIX + "*.pt") if p.stem[len(CKPT_PREFIX):].isdigit()]
    return max(found, key=lambda p: int(p.stem[len(CKPT_PREFIX):]), default=None)


def example_loss(model: Any, module: Any, f: Features, graph: GraphTensors, pad_id: int,
                 device: str) -> Any:
    """The weighted NLL of one example with its soft prompt (differentiable)."""
    from talent_core.llm.loss import sequence_loss

    ids, weights, mask = _collate([f], pad_id, device)
    x, ei, ea = (t.to(device) for t in graph)
    prefix = module(x, ei, ea)
    return sequence_loss(model, ids, weights, mask, prefix=prefix)[0]


def run_graph_training(
    model: Any,
    module: Any,
    tokenizer: Any,
    device: str,
    features: Sequence[Features],
    graphs: Sequence[GraphTensors],
    config: TrainConfig,
    resume: bool = True,
    val: Sequence[tuple[Features, GraphTensors]] = (),
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Train ``model``'s LoRA parameters and ``module`` together; returns the metrics."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    if not features:
        raise ValueError("no training examples left (all skipped or none given)")
    if config.batch_size != 1:
        raise ValueError("graph-prompt training runs batch 1 (use --grad-accum)")
    n, ga = len(features), config.grad_accum
    order = _order(n, config.epochs, config.seed)
    total = math.ceil(len(order) / ga)
    if config.max_steps is not None:
        total = min(total, config.max_steps)
    out = Path(config.output_dir)
    ckpt_dir = out / "checkpoints"
    fingerprint = _fingerprint(config, "generator+graph", features)
    fp_file = ckpt_dir / "fingerprint.json"
    last = _latest(ckpt_dir) if ckpt_dir.is_dir() else None
    if last and not resume:
        raise ResumeMismatch(f"{out}: holds checkpoints of an earlier run ({last.name}); "
                             "resume it or choose another output directory")
    if last:
        saved = json.loads(fp_file.read_text()) if fp_file.is_file() else {}
        if saved.get("fingerprint") != fingerprint:
            raise ResumeMismatch(f"{last}: checkpoint of a different configuration or data; "
                                 "use another output directory (or the original settings)")
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    fp_file.write_text(json.dumps({"kind": "generator+graph", "fingerprint": fingerprint}) + "\n")

    module.to(device)
    lora = _trainable(model)
    optimizer = torch.optim.AdamW(
        [{"params": list(lora.values()), "lr": config.lr},
         {"params": list(module.parameters()), "lr": config.graph_lr}],
        weight_decay=config.weight_decay,
    )
    warmup = math.ceil(config.warmup_ratio * total) if config.warmup_ratio < 1 else int(
        config.warmup_ratio)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total)  # as the Trainer
    step, history = 0, []
    resumed_from = None
    if last:
        state = torch.load(last, map_location="cpu", weights_only=False)
        with torch.no_grad():
            for k, v in state["lora"].items():
                lora[k].copy_(v)
        module.load_state_dict(state["graph"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        step, history, resumed_from = state["step"], state["history"], state["step"]
        log.info("resuming the graph-prompt generator from %s", last)

    params = [*lora.values(), *module.parameters()]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    bar = tqdm(total=total, initial=step, desc="train generator+graph", unit="step",
               disable=not config.progress)
    model.train()
    module.train()
    t_start = time.perf_counter()
    while step < total:
        group = order[step * ga:(step + 1) * ga]
        loss_sum = 0.0
        for i in group:
            loss = example_loss(model, module, features[i], graphs[i], pad_id, device)
            (loss / len(group)).backward()
            loss_sum += float(loss.detach())
        loss_value = loss_sum / len(group)
        if not math.isfinite(loss_value):
            raise FloatingPointError(f"generator+graph: loss is {loss_value} at step {step + 1}")
        if config.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        lr_now = scheduler.get_last_lr()[0]
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        history.append({"step": step, "loss": round(loss_value, 6), "lr": lr_now})
        bar.update(1)
        bar.set_postfix(loss=f"{loss_value:.4f}")
        if config.save_every and step % config.save_every == 0 and step < total:
            _save_checkpoint(ckpt_dir, step, lora, module, optimizer, scheduler, history,
                             config.keep_checkpoints)
        if on_step is not None:
            on_step(step, loss_value)
    bar.close()
    seconds = time.perf_counter() - t_start
    model.eval()
    module.eval()
    run_steps = step - (resumed_from or 0)
    metrics: dict[str, Any] = {
        "examples": n, "epochs": config.epochs, "steps": step,
        "resumed_from_step": resumed_from,
        "seconds_this_run": round(seconds, 2),
        "seconds_per_step": round(seconds / run_steps, 4) if run_steps else None,
        "seconds_per_example": round(seconds / (run_steps * ga), 4) if run_steps else None,
        "train_loss": round(sum(h["loss"] for h in history) / len(history), 6),
        "first_loss": history[0]["loss"],
        "final_loss": sum(h["loss"] for h in history[-10:]) / len(history[-10:]),
        "mean_tokens": round(sum(len(f) for f in features) / n, 1),
        "max_tokens": max(len(f) for f in features),
        "mean_graph_nodes": round(sum(int(g[0].shape[0]) for g in graphs) / n, 2),
        "examples_with_dropped_rows": sum(1 for f in features if f.dropped_nodes
                                          or f.dropped_edges),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "history": history[-2000:],
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        metrics["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    if val:
        with torch.inference_mode():
            metrics["val_loss"] = sum(float(example_loss(model, module, f, g, pad_id, device))
                                      for f, g in val) / len(val)
    return metrics


def _save_checkpoint(ckpt_dir: Path, step: int, lora: dict[str, Any], module: Any,
                     optimizer: Any, scheduler: Any, history: list, keep: int) -> None:
    import torch

    path = ckpt_dir / f"{CKPT_PREFIX}{step}.pt"
    tmp = path.with_suffix(".pt.tmp")
    torch.save({
        "step": step,
        "lora": {k: v.detach().cpu().clone() for k, v in lora.items()},
        "graph": module.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": torch.get_rng_state(),
        "history": history,
    }, tmp)
    os.replace(tmp, path)
    done = sorted((p for p in ckpt_dir.glob(CKPT_PREFIX + "*.pt")),
                  key=lambda p: int(p.stem[len(CKPT_PREFIX):]))
    for old in done[:-max(1, keep)]:
        old.unlink()
