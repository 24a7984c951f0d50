"""Loading an adapter prints no FutureWarning (issue 28: one printed on every `talent ask`:
peft reads transformers' deprecated `is_gradient_checkpointing`); other warnings pass."""

from __future__ import annotations

import warnings

from talent_core.llm.models import (
    add_lora,
    load_adapter,
    load_base,
    lora_config,
    meta_for,
    save_adapter,
)


def test_load_adapter_without_future_warning(tiny_dir, settings, tmp_path) -> None:
    model, _, _ = load_base(str(tiny_dir), settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = add_lora(model, lora_config())
    assert not [w for w in caught if issubclass(w.category, FutureWarning)], \
        [str(w.message) for w in caught]
    out = save_adapter(model, tmp_path / "adapter", meta_for(model, "generator"))
    fresh, _, _ = load_base(str(tiny_dir), settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_adapter(fresh, out, "generator")
        warnings.warn("a warning of our own still shows", FutureWarning, stacklevel=1)
    future = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert future == ["a warning of our own still shows"], future
