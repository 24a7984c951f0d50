"""The training loop shared by both LLMs, on `transformers.Trainer`.

Defaults are the paper's Appendix B: LoRA r=8 / alpha=16 / dropout 0.05, lr 5e-5, 3 epochs,
warmup ratio 0.03 (linear schedule), batch 1 with gradient accumulation 8; lambda = 0.001
(WebQSP; use 0.01 for CWQ and ExplaGraphs). All configurable through `TrainConfig`.

* Loss: sum over an example's tokens of w_t * NLL, mean over the examples of an optimizer
  step (the accumulation group).
* End of list: the EOS token after the target line has weight ``eos_weight`` (default 1.0;
  eq. 13 alone would give it 0 and nothing would teach the model where to stop; see `loss`
  for the measured effect). The generator's EOS always has weight 1 (standard SFT).
* Generator ranking loss: ``rank_weight`` > 0 adds that many times `loss.ranking_loss` (the
  context's names scored as ranked decoding scores them) to each example's eq. 15 loss.
* Reproducible and resumable: the data order of epoch e is a permutation seeded by
  ``seed + e``; every ``save_every`` optimizer steps a checkpoint (adapter, optimizer,
  scheduler, step, RNG states) is written atomically under ``output_dir/checkpoints``;
  a run restarted with the same configuration resumes from the latest one and ends with the
  same adapter as an uninterrupted run. A different configuration is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from tqdm.auto import tqdm

from talent_core.errors import ResumeMismatch
from talent_core.llm.features import Features
from talent_core.llm.models import DEFAULT_LORA_TARGETS
from talent_core.llm.prompts import PromptStyle, Task

log = logging.getLogger(__name__)


class TrainConfig(BaseModel):
    output_dir: Path
    base_model: str | None = None  # None: settings.base_model
    task: Task = "kgqa"
    lam: float = 0.001  # weak-positive weight (retriever)
    eos_weight: float = 1.0  # the EOS token after the target line (0: eq. 13 literally)
    # generator: weight of the ranking loss beside eq. 15 (0: eq. 15 alone, the paper)
    rank_weight: float = 0.0
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
    deepspeed: str | None = None  # a DeepSpeed JSON config for the Trainer (multi-GPU)
    prompt_style: PromptStyle = "paper"  # "compact": short instructions (CPU training)
    include_endpoints: bool = False  # generator context: list the other end of E-hat edges
    # generator: tokens of graph rows beyond the empty context (None: all that fit; 0: none)
    text_budget: int | None = None
    # generator: G-Retriever's graph soft prompt (GNN + projector) trained with the LoRA
    graph_prompt: bool = False
    graph_lr: float = 1e-3  # the GNN and projector start from random weights
    graph_layers: int = 2
    graph_hidden: int = 256
    graph_heads: int = 4
    graph_tokens: int = 1
    # recorded in the adapter metadata
    dataset: str = ""
    k: int | None = 10
    hops: int | None = None
    progress: bool = True

    def identity(self) -> dict[str, Any]:
        """Fields that change what is trained (a resumed run must agree on all of them)."""
        skip = {"output_dir", "save_every", "keep_checkpoints", "device", "progress",
                "dataset", "k", "hops", "deepspeed"}
        return {k: (str(v) if isinstance(v, Path) else v)
                for k, v in self.model_dump().items() if k not in skip}


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


def seed_everything(seed: int) -> None:
    from transformers import set_seed

    set_seed(seed)


def _collate(batch: Sequence[Features], pad_id: int, device: str | None = None
             ) -> tuple[Any, Any, Any]:
    import torch

    width = max(len(f) for f in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    weights = torch.zeros((len(batch), width), dtype=torch.float32)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, f in enumerate(batch):  # right padding: the padding has weight 0
        ids[i, : len(f)] = torch.tensor(f.input_ids)
        weights[i, : len(f)] = torch.tensor(f.weights)
        mask[i, : len(f)] = 1
    if device is not None:
        ids, weights, mask = ids.to(device), weights.to(device), mask.to(device)
    return ids, weights, mask


class _FeatureDataset:
    """A map-style dataset over `Features` (what `transformers.Trainer` iterates)."""

    def __init__(self, features: Sequence[Features]):
        self.features = list(features)

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, i: int) -> Features:
        return self.features[i]


def _sft_and_rank_batch(model: Any, inputs: dict[str, Any], rank_weight: float) -> Any:
    """Mean over the batch's examples of eq. 15 + ``rank_weight`` x the ranking loss
    (`loss.sft_and_rank_loss`), one example at a time (each has its own candidate names)."""
    import torch

    from talent_core.llm.loss import ranking_loss, sequence_loss, sft_and_rank_loss
    from talent_core.llm.ranking import continuation_scores

    total = None
    for i, r in enumerate(inputs["rank"]):
        n = int(inputs["attention_mask"][i].sum())
        ids, weights = inputs["input_ids"][i:i + 1, :n], inputs["weights"][i:i + 1, :n]
        if r.shared:
            loss, _ = sft_and_rank_loss(model, ids, weights, r.head_len, r.continuations,
                                        r.gold, r.end_ids, rank_weight=rank_weight)
        else:  # the prompt tokenises differently inside the sequence: two passes
            loss, _ = sequence_loss(model, ids, weights)
            if any(r.gold):
                head = torch.tensor([r.head_ids], device=ids.device)
                scores = continuation_scores(model, head, r.continuations, r.end_ids)
                loss = loss + rank_weight * ranking_loss(
                    scores, torch.tensor(r.gold, device=scores.device))
        total = loss if total is None else total + loss
    return total / len(inputs["rank"])


def _trainer_class(rank_weight: float = 0.0) -> type:
    """`transformers.Trainer` with the token-weighted NLL as its loss, plus ``rank_weight`` x
    the ranking loss for batches that carry `RankFeatures` (built lazily: the import of
    transformers is slow and CLI commands that do not train should not pay it)."""
    from transformers import Trainer

    from talent_core.llm.loss import sequence_loss

    class WeightedLossTrainer(Trainer):
        # our loss is a per-example weighted sum, mean over the micro-batch: the Trainer must
        # divide it by the accumulation steps (it does not when it thinks the model did)
        loss_is_scaled_for_ga = False

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if "rank" in inputs:
                loss = _sft_and_rank_batch(model, inputs, rank_weight)
            else:
                loss, _ = sequence_loss(model, inputs["input_ids"], inputs["weights"],
                                        inputs["attention_mask"])
            return (loss, None) if return_outputs else loss

    return WeightedLossTrainer


def _callbacks(bar_desc: str, total: int, progress: bool,
               on_step: Callable[[int, float], None] | None) -> list[Any]:
    from transformers import TrainerCallback

    class Record(TrainerCallback):
        """A tqdm bar, a finite-loss check, and the ``on_step`` hook after each optimizer
        step's log (the Trainer logs every step) and, when one is due, its checkpoint."""

        bar: Any = None
        last: tuple[int, float] | None = None  # (step, loss) of the latest log

        def on_train_begin(self, args, state, control, **kw):
            self.bar = tqdm(total=total, initial=state.global_step, desc=bar_desc, unit="step",
                            disable=not progress)

        def on_log(self, args, state, control, logs=None, **kw):
            if not logs or "loss" not in logs:
                return
            loss = float(logs["loss"])
            if not math.isfinite(loss):
                raise FloatingPointError(f"{bar_desc}: loss is {loss} at step "
                                         f"{state.global_step}")
            self.last = (state.global_step, round(loss, 6))
            if self.bar is not None:
                self.bar.update(state.global_step - self.bar.n)
                self.bar.set_postfix(loss=f"{loss:.4f}")
            save_due = (args.save_strategy == "steps" and args.save_steps
                        and state.global_step % args.save_steps == 0)
            if not save_due:
                self._fire(state.global_step)

        def on_save(self, args, state, control, **kw):
            self._fire(state.global_step)

        def on_train_end(self, args, state, control, **kw):
            if self.bar is not None:
                self.bar.close()

        def _fire(self, step: int) -> None:
            if on_step is not None and self.last is not None and self.last[0] == step:
                on_step(*self.last)

    return [Record()]


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
    """Train the LoRA parameters of ``model`` on ``features`` with `transformers.Trainer`
    (so ``torchrun`` / ``accelerate launch`` give DDP, and a DeepSpeed config works, by
    configuration); returns training metrics.

    Checkpoints are the Trainer's (``output_dir/checkpoints/checkpoint-N``: adapter,
    optimizer, scheduler, RNG states, data position); a restarted run resumes from the
    latest one. ``checkpoints/fingerprint.json`` ties them to this configuration and data:
    another configuration is refused. ``on_step(step, loss)`` is called after every
    optimizer step, after that step's checkpoint (tests use it to simulate a crash)."""
    import torch
    from transformers import TrainingArguments
    from transformers.trainer_utils import get_last_checkpoint

    if not features:
        raise ValueError("no training examples left (all skipped or none given)")
    out = Path(config.output_dir)
    ckpt_dir = out / "checkpoints"
    n = len(features)
    total_steps = math.ceil(math.ceil(n / config.batch_size) * config.epochs / config.grad_accum)
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    fingerprint = _fingerprint(config, kind, features)
    fp_file = ckpt_dir / "fingerprint.json"
    last = get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None
    if last and not resume:
        raise ResumeMismatch(
            f"{out}: holds checkpoints of an earlier run ({Path(last).name}); resume it "
            "or choose another output directory"
        )
    if last:
        saved = json.loads(fp_file.read_text()) if fp_file.is_file() else {}
        if saved.get("fingerprint") != fingerprint:
            raise ResumeMismatch(
                f"{last}: checkpoint of a different configuration or data; "
                "use another output directory (or the original settings and examples)"
            )
        log.info("resuming %s from %s", kind, last)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    fp_file.write_text(json.dumps({"kind": kind, "fingerprint": fingerprint}) + "\n")

    on_cuda = device.startswith("cuda")
    args = TrainingArguments(
        output_dir=str(ckpt_dir),
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        learning_rate=config.lr,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm or 0.0,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps if config.max_steps is not None else -1,
        lr_scheduler_type="linear",
        warmup_steps=config.warmup_ratio,  # a float < 1 is a ratio of the steps
        logging_steps=1,
        save_strategy="steps" if config.save_every else "no",
        save_steps=config.save_every or 500,
        save_total_limit=config.keep_checkpoints if config.save_every else None,
        seed=config.seed,
        data_seed=config.seed,
        use_cpu=not on_cuda,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        report_to=[],
        disable_tqdm=True,
        save_only_model=False,
        # (no gradient/activation checkpointing argument: load_base enabled it already when
        # asked for, and transformers 5 renamed the argument, warning on the old name)
        deepspeed=config.deepspeed,
    )
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    ranked = config.rank_weight != 0
    if ranked and any(f.rank is None for f in features):
        raise ValueError("rank_weight needs generator features built with rank=True")

    def collate(batch: Sequence[Features]) -> dict[str, Any]:
        ids, weights, mask = _collate(batch, pad_id)
        out = {"input_ids": ids, "weights": weights, "attention_mask": mask}
        if ranked:
            out["rank"] = [f.rank for f in batch]
        return out

    trainer = _trainer_class(config.rank_weight)(
        model=model, args=args, train_dataset=_FeatureDataset(features),
        data_collator=collate,
        callbacks=_callbacks(f"train {kind}", total_steps, config.progress, on_step),
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # logs go to the history and the bar, not stdout
    model.train()
    t_start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=last)
    seconds = time.perf_counter() - t_start
    step = trainer.state.global_step
    resumed_from = None
    if last:
        resumed_from = int(Path(last).name.split("-")[-1])
    # the whole history, earlier runs included (the Trainer keeps its log in its state)
    history = [{"step": h["step"], "loss": round(float(h["loss"]), 6),
                "lr": h.get("learning_rate")}
               for h in trainer.state.log_history if "loss" in h]
    steps_this_run = step - (resumed_from or 0)
    model.eval()
    metrics: dict[str, Any] = {
        "examples": n,
        "epochs": config.epochs,
        "steps": step,
        "resumed_from_step": resumed_from,
        "seconds_this_run": round(seconds, 2),
        "seconds_per_step": round(seconds / steps_this_run, 4) if steps_this_run else None,
        "seconds_per_example": round(seconds / (steps_this_run * config.grad_accum
                                                * config.batch_size), 4)
        if steps_this_run else None,
        "train_loss": round(float(result.training_loss), 6),
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
        "world_size": args.world_size,
        "history": history[-2000:],
    }
    if torch.cuda.is_available() and on_cuda:
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
