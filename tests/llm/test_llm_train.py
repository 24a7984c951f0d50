from __future__ import annotations

import math
from pathlib import Path

import pytest
from safetensors.torch import load_file
from tiny_llm import sample_examples

from talent_core.errors import ResumeMismatch
from talent_core.llm.data import TrainingExample, read_examples, write_examples
from talent_core.llm.models import read_meta
from talent_core.training.llm import train_generator, train_retriever
from talent_core.training.trainer import TrainConfig


def _examples(n: int = 3) -> list[TrainingExample]:
    return sample_examples(n)


def _config(out: Path, tiny_dir: Path, **kw) -> TrainConfig:
    base = {"output_dir": out, "base_model": str(tiny_dir), "epochs": 1, "grad_accum": 2,
            "lr": 1e-2, "warmup_ratio": 0.0, "lam": 0.01, "save_every": 0, "progress": False,
            "seed": 7}
    base.update(kw)
    return TrainConfig(**base)


def _lora(path: Path) -> dict:
    return load_file(str(path / "adapter_model.safetensors"))


def test_retriever_training_learns(tiny_dir, settings, tmp_path) -> None:
    examples = _examples(3)
    cfg = _config(tmp_path / "r", tiny_dir, epochs=4, grad_accum=3)
    meta = train_retriever(examples, cfg, settings, val_examples=examples[:1])
    m = meta.metrics
    assert m["steps"] == 4 and m["examples"] == 3
    losses = [h["loss"] for h in m["history"]]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]  # the same 3 examples every step: the loss must fall
    assert math.isfinite(m["val_loss"]) and m["mean_positive"] == 1.0
    weights = _lora(tmp_path / "r")
    b = [v for k, v in weights.items() if "lora_B" in k]
    assert b and any(float(t.abs().max()) > 0 for t in b)  # LoRA B starts at 0: it moved
    saved = read_meta(tmp_path / "r")
    assert saved.kind == "retriever" and saved.lam == 0.01 and saved.eos_weight == 1.0
    assert saved.lora == {"r": 8, "alpha": 16, "dropout": 0.05, "targets": "q_proj,v_proj"}


def test_resume_continues_from_checkpoint(tiny_dir, settings, tmp_path) -> None:
    examples = _examples(3)
    # uninterrupted: 2 epochs x 3 examples / accum 1 = 6 steps
    full = train_retriever(examples, _config(tmp_path / "a", tiny_dir, epochs=2, grad_accum=1),
                           settings)
    assert full.metrics["steps"] == 6

    class Crash(RuntimeError):
        pass

    def crash_at_5(step: int, loss: float) -> None:
        if step == 5:
            raise Crash

    cfg = _config(tmp_path / "b", tiny_dir, epochs=2, grad_accum=1, save_every=2,
                  keep_checkpoints=1)
    with pytest.raises(Crash):
        train_retriever(examples, cfg, settings, on_step=crash_at_5)
    ckpts = sorted(p.name for p in (tmp_path / "b" / "checkpoints").iterdir() if p.is_dir())
    assert ckpts == ["checkpoint-4"]  # keep_checkpoints=1 pruned step 2; step 5 was lost
    resumed = train_retriever(examples, cfg, settings)
    assert resumed.metrics["resumed_from_step"] == 4 and resumed.metrics["steps"] == 6
    assert [h["step"] for h in resumed.metrics["history"]] == [1, 2, 3, 4, 5, 6]
    # same data order, optimizer, scheduler and RNG: the same adapter as without the crash
    a, b = _lora(tmp_path / "a"), _lora(tmp_path / "b")
    assert a.keys() == b.keys()
    for k in a:
        assert (a[k] - b[k]).abs().max() < 1e-6, k
    assert resumed.metrics["history"][-1]["loss"] == pytest.approx(
        full.metrics["history"][-1]["loss"], rel=1e-5)


def test_resume_refuses_other_config(tiny_dir, settings, tmp_path) -> None:
    examples = _examples(2)
    cfg = _config(tmp_path / "c", tiny_dir, epochs=2, grad_accum=1, save_every=1)

    def stop(step: int, loss: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_retriever(examples, cfg, settings, on_step=stop)
    with pytest.raises(ResumeMismatch, match="different configuration"):
        train_retriever(examples, cfg.model_copy(update={"lam": 0.5}), settings)
    with pytest.raises(ResumeMismatch, match="earlier run"):
        train_retriever(examples, cfg, settings, resume=False)


def test_generator_trains_on_retriever_selections(tiny_dir, settings, tmp_path) -> None:
    examples = _examples(2)
    train_retriever(examples, _config(tmp_path / "r", tiny_dir, max_steps=1), settings)
    cfg = _config(tmp_path / "g", tiny_dir, max_steps=2, grad_accum=1)
    meta = train_generator(examples, cfg, tmp_path / "r", settings=settings,
                           retriever_max_new_tokens=8)
    assert meta.kind == "generator" and meta.retriever == str(tmp_path / "r")
    assert meta.metrics["steps"] == 2
    assert all(math.isfinite(h["loss"]) for h in meta.metrics["history"])
    cache = tmp_path / "g" / "retriever_selections.jsonl"
    assert len(cache.read_text().splitlines()) == 2
    with pytest.raises(ValueError, match="TRAINED retriever"):
        train_generator(examples, cfg, None, settings=settings)


def test_generator_no_retriever_ablation(tiny_dir, settings, tmp_path) -> None:
    meta = train_generator(_examples(2), _config(tmp_path / "g", tiny_dir, max_steps=1), None,
                           source="none", settings=settings)
    assert meta.retriever == "none" and meta.metrics["steps"] == 1


def test_examples_jsonl_round_trip_and_errors(tmp_path) -> None:
    path = tmp_path / "ex.jsonl"
    write_examples(path, _examples(2))
    back = read_examples(path)
    assert [e.answers for e in back] == [["James Cameron"], ["Leonardo DiCaprio"]]
    assert back[0].candidate.nodes[1].name == "James Cameron"
    path.write_text(path.read_text() + '{"question": "q", "candidate": {"question": "q"}, '
                    '"answers": "not a list"}\n')
    with pytest.raises(ValueError, match=r"ex\.jsonl:3: answers"):
        read_examples(path)
