"""Training R_theta (eqs. 12-13) and G_phi's SFT (eq. 15): examples -> features -> the
`trainer` loop -> an adapter with its metadata.

* Prompt length: ``max_length`` tokens for prompt + target + EOS; rows of S are dropped to fit
  (see `context`), never the question, the instructions or the target. An example that does
  not fit even without rows is skipped with a warning (counted in the metrics).
* The generator is trained on contexts produced by the TRAINED retriever (``retriever_dir``);
  the retriever's selections are cached in ``output_dir/retriever_selections.jsonl``
  (`selections`).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from tqdm.auto import tqdm

from talent_core.config import RETRIEVER_MAX_NEW_TOKENS, Settings, get_settings
from talent_core.embedding import TextEmbedder, get_embedder
from talent_core.errors import PromptTooLong
from talent_core.llm import graph_prompt as gp
from talent_core.llm.data import TrainingExample
from talent_core.llm.features import Features, generator_features, retriever_features
from talent_core.llm.graph_prompt import save as save_graph_prompt
from talent_core.llm.models import (
    AdapterMeta,
    add_lora,
    load_base,
    lora_config,
    meta_for,
    save_adapter,
)
from talent_core.models import Decode, Selection
from talent_core.training.graph_trainer import run_graph_training
from talent_core.training.selections import SELECTIONS_FILE, collect_selections
from talent_core.training.trainer import TrainConfig, run_training, seed_everything

log = logging.getLogger(__name__)


T = TypeVar("T")


def build_features(
    examples: Sequence[TrainingExample],
    make: Callable[[TrainingExample], T],
    desc: str,
    progress: bool = True,
) -> tuple[list[T], int]:
    """``make`` on every example; one whose prompt cannot fit is skipped (counted, logged)."""
    out: list[T] = []
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
            "weight_decay", "max_grad_norm", "gradient_checkpointing", "rank_weight")
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
                                  config.eos_weight, config.max_length, config.task, name,
                                  config.prompt_style)

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
        metrics=metrics, prompt_style=config.prompt_style,
    )
    save_adapter(model, config.output_dir, meta)
    log.info("retriever adapter saved to %s (%d steps, final loss %s)", config.output_dir,
             metrics["steps"], metrics["final_loss"])
    return meta


GeneratorSource = Literal["trained", "frozen", "none"]


def train_generator(
    examples: Sequence[TrainingExample],
    config: TrainConfig,
    retriever_dir: Path | None,
    source: GeneratorSource = "trained",
    settings: Settings | None = None,
    val_examples: Sequence[TrainingExample] | None = None,
    resume: bool = True,
    retriever_max_new_tokens: int = RETRIEVER_MAX_NEW_TOKENS,
    on_step: Callable[[int, float], None] | None = None,
    retriever_decode: Decode = "free",
    embedder: TextEmbedder | None = None,
) -> AdapterMeta:
    """SFT of G_phi on contexts from the retriever (eq. 15), selected with
    ``retriever_decode`` (train on the contexts the generator will see at inference).

    ``source``: "trained" (the paper: ``retriever_dir`` is required), "frozen" (the base
    model without adapter selects), "none" (all of S, the no-retriever ablation).
    ``config.graph_prompt``: train G-Retriever's GNN + projector soft prompt with the LoRA
    (`graph_trainer`), saved beside the adapter; ``embedder``: the store's embedding model
    for its node and edge features (default: settings')."""
    from talent_core.llm.lm import LoadedLM
    from talent_core.llm.retriever import RetrieverModel

    if config.graph_prompt and config.rank_weight:
        raise ValueError("the ranking loss is not implemented for the graph-prompt generator; "
                         "train it with rank_weight 0")
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
                                             tag, retriever_decode))
        del retriever, lm
        gc.collect()
    model, tok, device = _prepare_model(config, settings)
    sel_of = dict(zip((id(e) for e in all_examples), selections, strict=True))

    def make(ex: TrainingExample) -> Features:
        return generator_features(tok, ex.question, ex.candidate, sel_of[id(ex)], ex.answers,
                                  config.max_length, config.task, name, config.include_endpoints,
                                  style=config.prompt_style, text_budget=config.text_budget,
                                  rank=config.rank_weight != 0)

    if config.graph_prompt:
        metrics, module = _train_with_graph(model, tok, device, examples, val_examples or [],
                                            sel_of, make, config, settings, embedder, resume,
                                            on_step)
        skipped = metrics.pop("skipped_too_long")
    else:
        features, skipped = build_features(examples, make, "generator examples",
                                           config.progress)
        val, _ = build_features(val_examples or [], make, "validation examples",
                                config.progress)
        metrics = run_training(model, tok, device, features, config, "generator", resume, val,
                               on_step)
    metrics["skipped_too_long"] = skipped
    chosen = [s for s in selections[: len(examples)] if s is not None]
    if chosen:
        metrics["retriever_mean_selected"] = round(
            sum(len(s.names) for s in chosen) / len(chosen), 3)
        metrics["retriever_decode"] = retriever_decode
    meta = meta_for(
        model, "generator", task=config.task, dataset=config.dataset, k=config.k,
        hops=config.hops, seed=config.seed, max_length=config.max_length,
        include_endpoints=config.include_endpoints,
        retriever=str(retriever_dir) if source == "trained" else source,
        lora=_lora_fields(config), train=_train_fields(config), metrics=metrics,
        eos_weight=1.0, prompt_style=config.prompt_style, text_budget=config.text_budget,
    )
    save_adapter(model, config.output_dir, meta)
    if config.graph_prompt:
        save_graph_prompt(module, config.output_dir)
    log.info("generator adapter saved to %s (%d steps, final loss %s)", config.output_dir,
             metrics["steps"], metrics["final_loss"])
    return meta


def _train_with_graph(model: Any, tok: Any, device: str, examples: Sequence[TrainingExample],
                      val_examples: Sequence[TrainingExample],
                      sel_of: dict[int, Selection | None],
                      make: Callable[[TrainingExample], Features], config: TrainConfig,
                      settings: Settings, embedder: TextEmbedder | None, resume: bool,
                      on_step: Callable[[int, float], None] | None) -> tuple[dict, Any]:
    """Features + each example's graph tensors, a fresh `graph_prompt` module, the loop."""
    embedder = embedder or get_embedder(settings.embedding_model, "cpu",
                                        settings.embed_batch_size)

    def with_graph(ex: TrainingExample) -> tuple[Features, Any]:
        return make(ex), gp.graph_tensors(gp.prompt_graph(ex.candidate, sel_of[id(ex)]),
                                          embedder.encode)

    pairs, skipped = build_features(examples, with_graph, "generator examples + graphs",
                                    config.progress)
    val, _ = build_features(val_examples, with_graph, "validation examples + graphs",
                            config.progress)
    features, graphs = [f for f, _ in pairs], [g for _, g in pairs]
    module = gp.build(gp.GraphPromptConfig(
        llm_hidden=int(model.config.hidden_size), in_dim=int(embedder.dimension),
        embedding_model=getattr(embedder, "model_name", settings.embedding_model),
        hidden=config.graph_hidden, layers=config.graph_layers, heads=config.graph_heads,
        tokens=config.graph_tokens,
    ))
    metrics = run_graph_training(model, module, tok, device, features, graphs, config, resume,
                                 val, on_step)
    metrics["skipped_too_long"] = skipped
    metrics["graph_parameters"] = sum(p.numel() for p in module.parameters())
    return metrics, module
