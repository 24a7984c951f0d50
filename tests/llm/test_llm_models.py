from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_llm import tiny_llama

from talent_core.errors import BaseModelMismatch
from talent_core.llm import models as llm_models
from talent_core.llm.models import (
    add_lora,
    canonical_name,
    load_adapter,
    load_base,
    lora_config,
    meta_for,
    read_meta,
    resolve_base_model,
    save_adapter,
)


def _perturbed_lora(tiny_dir: Path, settings, targets: str = "q_proj,v_proj"):
    model, tok, _ = load_base(str(tiny_dir), settings)
    model = add_lora(model, lora_config(targets=targets))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # LoRA B starts at zero: make the adapter do something
    return model, tok


def test_adapter_round_trip(tiny_dir, settings, tmp_path) -> None:
    model, tok = _perturbed_lora(tiny_dir, settings)
    ids = tok("james cameron|titanic", return_tensors="pt")["input_ids"]
    model.eval()
    with torch.no_grad():
        tuned = model(input_ids=ids).logits
        with model.disable_adapter():
            base = model(input_ids=ids).logits
    assert not torch.allclose(tuned, base)
    meta = meta_for(model, "retriever", lam=0.01, eos_weight=1.0, k=10, hops=2,
                    dataset="metaqa", seed=3, metrics={"final_loss": 1.5})
    out = save_adapter(model, tmp_path / "adapter", meta)
    assert (out / "adapter_model.safetensors").is_file()
    saved = json.loads((out / "talent_meta.json").read_text())
    assert saved["kind"] == "retriever" and saved["lam"] == 0.01 and saved["hops"] == 2
    assert saved["base_model"] == str(tiny_dir) and saved["metrics"]["final_loss"] == 1.5
    assert saved["base_fingerprint"]["hidden_size"] == 32

    fresh, _, _ = load_base(str(tiny_dir), settings)
    loaded, meta2 = load_adapter(fresh, out, "retriever")
    loaded.eval()
    with torch.no_grad():
        again = loaded(input_ids=ids).logits
    assert torch.allclose(again, tuned, atol=1e-6)
    assert meta2.dataset == "metaqa" and read_meta(out).seed == 3


def test_adapter_on_other_base_fails_clearly(tiny_dir, settings, tmp_path) -> None:
    model, _ = _perturbed_lora(tiny_dir, settings)
    out = save_adapter(model, tmp_path / "adapter", meta_for(model, "generator"))
    # same architecture, another model: the name check catches it
    other = tiny_llama(tmp_path / "other-model", seed=5)
    base, _, _ = load_base(str(other), settings)
    with pytest.raises(BaseModelMismatch, match="other-model") as e:
        load_adapter(base, out)
    assert "tiny-llama" in str(e.value)
    # same name, different architecture: the fingerprint check catches it
    wide = tiny_llama(tmp_path / "wide" / "tiny-llama", hidden=64)
    base, _, _ = load_base(str(wide), settings)
    with pytest.raises(BaseModelMismatch, match="hidden_size"):
        load_adapter(base, out)


def test_missing_meta_is_an_error(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="talent_meta.json"):
        read_meta(tmp_path)


def test_all_linear_targets(tiny_dir, settings) -> None:
    model, _ = _perturbed_lora(tiny_dir, settings, "all-linear")
    names = {n for n, _ in model.named_parameters() if "lora_A" in n}
    assert any("mlp.down_proj" in n for n in names) and any("k_proj" in n for n in names)
    q_only, _ = _perturbed_lora(tiny_dir, settings)
    names = {n for n, _ in q_only.named_parameters() if "lora_A" in n}
    assert names and all("q_proj" in n or "v_proj" in n for n in names)


def test_canonical_names() -> None:
    assert canonical_name("smollm2") == canonical_name("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert canonical_name("/models/Llama-2-7b-chat-hf/") == canonical_name(
        "meta-llama/Llama-2-7b-chat-hf")
    assert canonical_name("meta-llama/Llama-2-7b-hf") != canonical_name(
        "meta-llama/Llama-2-7b-chat-hf")


def test_smollm2_alias_converts_once(tmp_path, monkeypatch) -> None:
    calls: list[Path] = []

    def fake_convert(gguf: Path, out: Path) -> Path:
        calls.append(out)
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        return out

    monkeypatch.setattr(llm_models, "convert_gguf", fake_convert)
    monkeypatch.setattr(llm_models, "smollm2_gguf", lambda: tmp_path / "x.gguf")
    first = resolve_base_model("smollm2", tmp_path / "cache")
    second = resolve_base_model("SmolLM2", tmp_path / "cache")
    assert first == second == str(tmp_path / "cache" / "smollm2-135m-instruct")
    assert len(calls) == 1
    assert resolve_base_model("meta-llama/Llama-2-7b-chat-hf") == "meta-llama/Llama-2-7b-chat-hf"
