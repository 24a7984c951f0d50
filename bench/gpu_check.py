"""GPU checks for the LLM stages (issue 4); writes one JSON report.

1. ``cuda_path``: the product's own code on CUDA in bf16 with a tiny random Llama
   (`tests/tiny_llm.py`): `train_retriever` (with gradient checkpointing and
   a checkpoint/resume file), `train_generator` on the trained retriever's selections, then
   `load_models` + `RetrieverModel.select` + `GeneratorModel.answer`.
2. ``lora_speed``: LoRA training step time and peak GPU memory for RANDOMLY INITIALISED
   models of real 7B/8B architectures (Llama-2-7B, Llama-3-8B) at the paper's settings
   (Appendix B: r=8, alpha=16, dropout 0.05, q_proj/v_proj, batch 1, gradient accumulation 8,
   lr 5e-5), through the same `run_training` loop and token-weighted loss as real runs.
   Step time does not depend on the weights' values. Plus greedy decoding speed.

    python bench/gpu_check.py --out bench/results/gpu_check.json          # on a GPU
    python bench/gpu_check.py --device cpu --small --out /tmp/gpu.json    # smoke test, CPU
    python bench/gpu_check.py --graph-prompt --out bench/results/gpu_graph_prompt.json
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_llm

import torch
from tiny_llm import sample_candidate, tiny_llama

from talent_core.llm.data import TrainingExample
from talent_core.llm.features import Features
from talent_core.llm.loading import load_models
from talent_core.llm.models import add_lora, lora_config
from talent_core.training.llm import train_generator, train_retriever
from talent_core.training.trainer import TrainConfig, run_training

log = logging.getLogger("gpu_check")

ARCHS: dict[str, dict[str, Any]] = {
    "llama-2-7b": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                       num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                       max_position_embeddings=4096, rms_norm_eps=1e-5),
    "llama-3-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                       num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                       max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0),
    # --small: same code path, CPU-sized
    "small": dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096),
}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def cuda_path(device: str, tmp: Path) -> dict[str, Any]:
    """The product's train -> save -> load -> select -> answer path on ``device``."""
    tiny = tiny_llama(tmp / "tiny", hidden=64, layers=2)
    cand = sample_candidate()
    qa = [("who directed [Titanic]", ["James Cameron"]),
          ("who starred in [Titanic]", ["Leonardo DiCaprio"]),
          ("when was [Titanic] released", ["1997"])]
    examples = [TrainingExample(question=q, candidate=cand.model_copy(update={"question": q}),
                                answers=a) for q, a in qa * 4]
    base = dict(base_model=str(tiny), device=device, epochs=2, grad_accum=4, lr=2e-3,
                warmup_ratio=0.0, lam=0.01, save_every=2, gradient_checkpointing=True,
                progress=False, dataset="synthetic")
    t0 = time.perf_counter()
    rmeta = train_retriever(examples, TrainConfig(output_dir=tmp / "retriever", **base),
                            val_examples=examples[:3])
    gmeta = train_generator(examples, TrainConfig(output_dir=tmp / "generator", **base),
                            tmp / "retriever", retriever_max_new_tokens=32)
    retriever, generator = load_models(None, tmp / "retriever", tmp / "generator",
                                       device=device, retriever_max_new_tokens=32,
                                       generator_max_new_tokens=16)
    params = list(retriever.lm.model.parameters())
    dtypes = sorted({str(p.dtype) for p in params})
    devices = sorted({str(p.device) for p in params})
    q = qa[0][0]
    c = cand.model_copy(update={"question": q})
    sel = retriever.select(q, c)
    ctx = generator.context(q, c, sel)
    answer, raw = generator.answer(q, ctx)
    return {
        "ok": True,
        "seconds": round(time.perf_counter() - t0, 2),
        "param_dtypes": dtypes,
        "param_devices": devices,
        "retriever": {k: rmeta.metrics.get(k) for k in
                      ("steps", "first_loss", "final_loss", "val_loss", "peak_gpu_mb")},
        "generator": {k: gmeta.metrics.get(k) for k in
                      ("steps", "first_loss", "final_loss", "peak_gpu_mb")},
        "selection": {"raw": sel.raw, "selected": [n.name for n in sel.selected],
                      "out_of_candidate": [o.name for o in sel.out_of_candidate]},
        "answer": answer,
        "answer_raw": raw,
    }


def _random_model(arch: str, device: str, gradient_checkpointing: bool) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**ARCHS[arch], tie_word_embeddings=False, use_cache=True)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(old)
    if gradient_checkpointing:  # as talent_core.llm.models.load_base does
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    return add_lora(model, lora_config(8, 16, 0.05, "q_proj,v_proj"))


def _features(vocab: int, length: int, n: int, seed: int) -> list[Features]:
    """Random token ids; the last 40 tokens weighted like a retriever target."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ids = [rng.randrange(3, vocab) for _ in range(length)]
        weights = [0.0] * (length - 40) + [rng.choice((1.0, 0.01)) for _ in range(40)]
        out.append(Features(ids, weights, length - 40, "synthetic"))
    return out


class _Pad:
    pad_token_id = 0


def lora_speed(arch: str, length: int, gc_on: bool, device: str, steps: int, tmp: Path
               ) -> dict[str, Any]:
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    model = _random_model(arch, device, gc_on)
    _sync(device)
    init_s = time.perf_counter() - t0
    weights_mb = (torch.cuda.memory_allocated() / 2**20) if device.startswith("cuda") else None
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    vocab = ARCHS[arch]["vocab_size"]
    base = dict(base_model=arch, device=device, epochs=1, lr=5e-5, warmup_ratio=0.03,
                batch_size=1, grad_accum=8, save_every=0, progress=False, lam=0.01)
    # warm-up (kernel selection, allocator) then the measured steps, same model
    run_training(model, _Pad(), device, _features(vocab, length, 8, 0),
                 TrainConfig(output_dir=tmp / f"warm-{arch}", max_steps=1, **base), "retriever")
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    _sync(device)
    m = run_training(model, _Pad(), device, _features(vocab, length, 8 * steps, 1),
                     TrainConfig(output_dir=tmp / f"run-{arch}", max_steps=steps, **base),
                     "retriever")
    row = {
        "arch": arch, "seq_len": length, "gradient_checkpointing": gc_on,
        "params_b": round(total / 1e9, 3), "trainable_lora_params": trainable,
        "init_seconds": round(init_s, 1), "weights_mb": weights_mb and round(weights_mb),
        "optimizer_steps": m["steps"], "micro_steps_per_step": 8,
        "seconds_per_optimizer_step": m["seconds_per_step"],
        "seconds_per_example": m["seconds_per_example"],
        "tokens_per_second": round(length / m["seconds_per_example"]),
        "peak_gpu_mb": m.get("peak_gpu_mb"),
        "final_loss": m["final_loss"],
    }
    log.info("%s", row)
    del model
    return row


def decode_speed(arch: str, prompt_len: int, new_tokens: int, device: str,
                 variant: str = "lora") -> dict[str, Any]:
    """Greedy decoding speed; variant "lora" (peft model, adapter unmerged: what
    `LoadedLM.generate` runs), "merged" (adapter merged into the weights) or "base"."""
    model = _random_model(arch, device, False).eval()
    if variant == "merged":
        model = model.merge_and_unload()
    elif variant == "base":
        model = model.get_base_model()
    ids = torch.randint(3, ARCHS[arch]["vocab_size"], (1, prompt_len), device=device)
    with torch.inference_mode():
        model.generate(input_ids=ids, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                       pad_token_id=0)
        _sync(device)
        t0 = time.perf_counter()
        out = model.generate(input_ids=ids, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        _sync(device)
    s = time.perf_counter() - t0
    n = out.shape[1] - prompt_len
    del model
    return {"arch": arch, "variant": variant, "prompt_tokens": prompt_len, "new_tokens": int(n),
            "seconds": round(s, 3), "new_tokens_per_second": round(n / s, 1)}


def _graphs(n: int, seed: int, dim: int = 384, nodes: int = 30, edges: int = 60) -> list:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(nodes, dim, generator=g),
             torch.randint(0, nodes, (2, edges), generator=g),
             torch.randn(edges, dim, generator=g)) for _ in range(n)]


def graph_prompt_path(device: str, tmp: Path) -> dict[str, Any]:
    """Issue 12's CUDA path with a tiny random Llama: `train_generator(graph_prompt=True)`
    (LoRA + GNN + projector, one checkpoint), `load_models` with the embedder, ranked and
    free answers with the soft prompt."""
    from hash_embedder import HashEmbedder

    from talent_core.config import Settings

    emb = HashEmbedder(32)
    settings = Settings(model_cache_dir=tmp / "cache", _env_file=None)
    base = tiny_llama(tmp / "tiny-gp")
    c = sample_candidate()
    ex = [TrainingExample(question="who directed [Titanic]", candidate=c,
                          answers=["James Cameron"])] * 4
    cfg = TrainConfig(output_dir=tmp / "gp", base_model=str(base), device=device,
                      graph_prompt=True, graph_hidden=32, graph_heads=2, max_steps=2,
                      grad_accum=2, save_every=1, progress=False)
    meta = train_generator(ex, cfg, None, source="none", settings=settings, embedder=emb)
    _, gen = load_models(None, None, tmp / "gp", settings, device=device, embed=emb.encode)
    ctx = gen.context("who directed titanic", c, None)
    ranked = gen.rank("who directed titanic", ctx)
    answer, raw = gen.answer("who directed titanic", ctx)
    module = gen.prompter.module
    return {"ok": True, "steps": meta.metrics["steps"],
            "peak_gpu_mb": meta.metrics.get("peak_gpu_mb"),
            "gnn_device": str(next(module.parameters()).device),
            "llm_dtype": str(next(gen.lm.model.parameters()).dtype),
            "ranked_top": ranked[0].name if ranked else None, "answer": answer}


def graph_prompt_speed(arch: str, length: int, gc_on: bool, device: str, steps: int,
                       tmp: Path) -> dict[str, Any]:
    """Graph-prompt training step time and peak memory on a RANDOMLY INITIALISED model of a
    real architecture (30-node graphs of 384-d features, one soft token)."""
    from talent_core.llm import graph_prompt as gp
    from talent_core.training.graph_trainer import run_graph_training

    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    model = _random_model(arch, device, gc_on)
    module = gp.build(gp.GraphPromptConfig(llm_hidden=ARCHS[arch]["hidden_size"]))
    vocab = ARCHS[arch]["vocab_size"]
    base = dict(base_model=arch, device=device, epochs=1, lr=5e-5, warmup_ratio=0.03,
                batch_size=1, grad_accum=8, save_every=0, progress=False, graph_prompt=True)
    run_graph_training(model, module, _Pad(), device, _features(vocab, length, 8, 0),
                       _graphs(8, 0), TrainConfig(output_dir=tmp / f"gw-{arch}", max_steps=1,
                                                  **base))
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    m = run_graph_training(model, module, _Pad(), device, _features(vocab, length, 8 * steps, 1),
                           _graphs(8 * steps, 1),
                           TrainConfig(output_dir=tmp / f"gr-{arch}", max_steps=steps, **base))
    row = {"arch": arch, "seq_len": length, "gradient_checkpointing": gc_on,
           "graph_parameters": sum(p.numel() for p in module.parameters()),
           "seconds_per_optimizer_step": m["seconds_per_step"],
           "seconds_per_example": m["seconds_per_example"], "peak_gpu_mb": m.get("peak_gpu_mb"),
           "final_loss": m["final_loss"]}
    log.info("%s", row)
    del model, module
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="CPU-sized architecture (smoke test)")
    ap.add_argument("--steps", type=int, default=3, help="measured optimizer steps per config")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--decode-only", action="store_true",
                    help="only the decoding variants (lora / merged / base)")
    ap.add_argument("--graph-prompt", action="store_true",
                    help="only issue 12's graph soft prompt: the CUDA path with a tiny model, "
                    "then step time / memory on random 7B/8B architectures")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    report: dict[str, Any] = {
        "python": platform.python_version(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    import peft
    import transformers
    report["transformers"], report["peft"] = transformers.__version__, peft.__version__

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))

    arch = "small" if args.small else "llama-2-7b"
    if args.graph_prompt:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            try:
                report["graph_prompt_path"] = graph_prompt_path(args.device, tmp)
            except Exception as e:  # noqa: BLE001
                log.exception("graph_prompt_path failed")
                report["graph_prompt_path"] = {"ok": False, "error": repr(e)}
            save()
            plan = ([("small", 256, False)] if args.small else
                    [("llama-2-7b", 2048, False), ("llama-2-7b", 2048, True),
                     ("llama-3-8b", 2048, True)])
            report["graph_prompt_speed"] = []
            for a, length, gc_on in plan:
                try:
                    report["graph_prompt_speed"].append(
                        graph_prompt_speed(a, length, gc_on, args.device, args.steps, tmp))
                except Exception as e:  # noqa: BLE001
                    log.exception("graph_prompt_speed %s failed", a)
                    report["graph_prompt_speed"].append({"arch": a, "error": repr(e)})
                save()
        print(json.dumps(report, indent=2))
        return 0 if report["graph_prompt_path"].get("ok") else 1
    if args.decode_only:
        report["decode"] = [decode_speed(arch, n, 64, args.device, v)
                            for v in ("lora", "merged", "base") for n in (512, 2048)]
        save()
        print(json.dumps(report, indent=2))
        return 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        try:
            report["cuda_path"] = cuda_path(args.device, tmp)
        except Exception as e:  # noqa: BLE001 - the report says what failed, then go on
            log.exception("cuda_path failed")
            report["cuda_path"] = {"ok": False, "error": repr(e)}
        save()
        plan = ([("small", 256, False), ("small", 256, True)] if args.small else
                [("llama-2-7b", 1024, False), ("llama-2-7b", 2048, False),
                 ("llama-2-7b", 2048, True), ("llama-2-7b", 4096, True),
                 ("llama-3-8b", 2048, False), ("llama-3-8b", 2048, True)])
        report["lora_speed"] = []
        for arch, length, gc_on in plan:
            try:
                report["lora_speed"].append(lora_speed(arch, length, gc_on, args.device,
                                                       args.steps, tmp))
            except Exception as e:  # noqa: BLE001
                log.exception("lora_speed %s %d failed", arch, length)
                report["lora_speed"].append({"arch": arch, "seq_len": length,
                                             "gradient_checkpointing": gc_on, "error": repr(e)})
            save()
        try:
            report["decode"] = decode_speed(arch, 2048, 64, args.device)
        except Exception as e:  # noqa: BLE001
            log.exception("decode failed")
            report["decode"] = {"error": repr(e)}
        save()
    print(json.dumps(report, indent=2))
    return 0 if report["cuda_path"].get("ok") else 1


if __name__ == "__main__":
    raise SystemExit(main())
