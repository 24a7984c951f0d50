"""An adapter's LoRA folded into its own copy of the adapted layers' weights, for inference.

peft runs an active LoRA adapter as ``x W^T + s (x A^T) B^T`` in every adapted layer: two
extra small matmuls per layer, a slower forward pass on CPU than the base model's. A merged
copy ``W' = W + s B A`` (what ``merge_and_unload`` computes, via the layer's own
``get_delta_weight``) gives the same function in one matmul; swapping it into the base
layers for one call, with the adapters disabled, leaves the peft model, its other adapters
and the base weights untouched (no merge / unmerge drift, nothing copied but the adapted
weights). Only vanilla LoRA (no DoRA-style variants, no LoRA bias) is merged; anything else
runs unmerged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Merged:
    """One adapter merged: each layer it adapts with ``W + delta`` as a new frozen Parameter
    (the base weight is not changed), and every LoRA layer of the model (all are switched
    off while the merged weights run)."""

    weights: list[tuple[Any, Any]]  # (base layer, merged weight)
    lora_layers: list[Any]


def lora_layers(model: Any) -> list[Any]:
    """Every LoRA layer of ``model``."""
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def mergeable(model: Any, adapter: str) -> bool:
    """True when every layer ``adapter`` adapts is vanilla LoRA with its base weight in
    memory (not offloaded to the meta device): mergeable by `merged`."""
    layers = [m for m in lora_layers(model) if adapter in m.lora_A]
    return bool(layers) and all(
        adapter not in getattr(m, "lora_variant", {}) and not m.lora_bias.get(adapter, False)
        and m.get_base_layer().weight.device.type != "meta"
        for m in layers
    )


def merged(model: Any, adapter: str) -> Merged:
    """``adapter`` merged into copies of the weights of the layers it adapts."""
    import torch

    lora = lora_layers(model)
    weights = []
    with torch.no_grad():
        for m in lora:
            if adapter in m.lora_A:
                base = m.get_base_layer()
                w = base.weight + m.get_delta_weight(adapter).to(base.weight.dtype)
                weights.append((base, torch.nn.Parameter(w, requires_grad=False)))
    return Merged(weights, lora)


@contextlib.contextmanager
def swapped_in(merged: Merged) -> Iterator[None]:
    """For the body: every LoRA layer off (its forward is its base layer's) and the merged
    weights in place of the base layers' own; everything put back afterwards. The layers'
    flag is set directly: peft's ``disable_adapter()`` walks the whole model on every call
    and its ``enable_adapters`` changes requires_grad."""
    saved = [(layer, layer.weight) for layer, _ in merged.weights]
    flags = [m._disable_adapters for m in merged.lora_layers]
    try:
        for m in merged.lora_layers:
            m._disable_adapters = True
        for layer, w in merged.weights:
            layer.weight = w
        yield
    finally:
        for layer, w in saved:
            layer.weight = w
        for m, flag in zip(merged.lora_layers, flags, strict=True):
            m._disable_adapters = flag
