"""The default embedding model (all-MiniLM-L6-v2, a 6-layer BERT) run in numpy, for the
query path: the same weights, tokenizer and pooling as `embedding.SentenceEmbedder`
(sentence-transformers), without importing torch, transformers or sentence-transformers
(slow imports that a question should not wait for).

Same vectors: float32 like torch, the same layers (BertModel in eval mode: embeddings +
LayerNorm, 6 x [self-attention, LayerNorm, exact-erf GELU FFN, LayerNorm]), the model's own
`tokenizer.json` (the `tokenizers` library that transformers' fast tokenizer wraps) with
sentence-transformers' truncation (`max_seq_length` of sentence_bert_config.json), mean
pooling over the tokens, L2 normalisation. tests/retrieval/test_embedding_numpy.py checks
the vectors against sentence-transformers (max abs difference < 1e-5; the difference is
float32 rounding order, ~1e-7). Texts are batched by token count, so no padding is ever
attended to.

Only plain BERT sentence-transformers models with mean pooling qualify (`NumpyBertEmbedder`
raises `UnsupportedModel` for anything else; `embedding.get_embedder` then falls back to
sentence-transformers). Loading the store (`talent load`) keeps sentence-transformers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from talent_core.embedding_common import available_cores, encode_unique, resolve_model_path
from talent_core.errors import UnsupportedModel

log = logging.getLogger(__name__)


def _read_json(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UnsupportedModel(f"{path}: {e}") from None


def _check_model(root: Path) -> tuple[dict, int]:
    """(BERT config, max tokens) of a sentence-transformers BERT directory with
    modules Transformer -> Pooling(mean) [-> Normalize]; UnsupportedModel otherwise."""
    if not (root / "model.safetensors").is_file() or not (root / "tokenizer.json").is_file():
        raise UnsupportedModel(f"{root}: no model.safetensors / tokenizer.json")
    modules = _read_json(root / "modules.json")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]  # type: ignore[union-attr]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise UnsupportedModel(f"{root}: modules {kinds}")
    if modules[0].get("path", "") not in ("", "."):  # type: ignore[index, union-attr]
        raise UnsupportedModel(f"{root}: the transformer is in a sub-folder")
    pool = _read_json(root / modules[1]["path"] / "config.json")  # type: ignore[index]
    mean_only = {"pooling_mode_mean_tokens": True}
    flags = {k: v for k, v in pool.items() if k.startswith("pooling_mode") and v}  # type: ignore[union-attr]
    extra = {k: v for k, v in pool.items()  # type: ignore[union-attr]
             if k not in ("word_embedding_dimension", "include_prompt") and
             not k.startswith("pooling_mode")}
    if flags != mean_only or extra or pool.get("include_prompt", True) is not True:  # type: ignore[union-attr]
        raise UnsupportedModel(f"{root}: pooling {pool}")
    cfg = _read_json(root / "config.json")
    if (cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu"  # type: ignore[union-attr]
            or cfg.get("position_embedding_type", "absolute") != "absolute"):  # type: ignore[union-attr]
        raise UnsupportedModel(f"{root}: not a plain BERT ({cfg.get('model_type')})")  # type: ignore[union-attr]
    st_cfg = root / "sentence_bert_config.json"
    st = _read_json(st_cfg) if st_cfg.is_file() else {}
    if st.get("do_lower_case"):  # type: ignore[union-attr]
        raise UnsupportedModel(f"{root}: do_lower_case in sentence_bert_config.json")
    tok_cfg = root / "tokenizer_config.json"
    max_len = st.get("max_seq_length") or (  # type: ignore[union-attr]
        _read_json(tok_cfg).get("model_max_length") if tok_cfg.is_file() else None)  # type: ignore[union-attr]
    if not max_len:
        raise UnsupportedModel(f"{root}: no max_seq_length")
    max_len = min(int(max_len), int(cfg["max_position_embeddings"]))  # type: ignore[index]
    return cfg, max_len  # type: ignore[return-value]


_PARTNERS: set[int] = set()  # processes whose threads count as this process's own


def share_cores_with(pid: int) -> None:
    """Count the running threads of process ``pid`` as this process's own in `free_cores`:
    the model process of `talent serve` and its server are one application (its request
    threads run at a lower priority than the model work; they are not a busy neighbour)."""
    _PARTNERS.add(int(pid))


def _own_running() -> int:
    """This process's threads in state R (/proc/self/task/*/stat): the caller, and BLAS
    threads still spinning after the last call (and those of `share_cores_with`'s)."""
    n = 0
    for root in ("self", *map(str, _PARTNERS)):
        for stat in Path(f"/proc/{root}/task").glob("*/stat"):
            with contextlib.suppress(OSError):
                n += stat.read_text(encoding="ascii",
                                    errors="replace").rsplit(")", 1)[1][:3] == " R "
    return max(n, 1)


def free_cores() -> int:
    """Cores this process may use that no other task wants right now: the affinity set's
    size minus the runnable tasks of other processes (/proc/loadavg's instantaneous count
    less this process's running threads), at least 1. Where /proc is missing: all of them.

    Why: OpenBLAS threads spin while they wait: on an idle machine more threads are
    faster, beside busy processes they make the tail far slower (measured in
    bench/results/query_embed_threads.json)."""
    cores = available_cores()
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            runnable = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return cores
    return spare_cores(cores, runnable, _own_running())


def spare_cores(cores: int, runnable: int, own_running: int) -> int:
    """`cores` less the runnable tasks that are not this process's, within [1, cores]."""
    return max(1, min(cores, cores - (runnable - own_running)))


class _BlasThreads:
    """The BLAS thread count for one forward pass: `free_cores()` (threadpoolctl; without
    it, whatever the BLAS library was started with)."""

    def __init__(self) -> None:
        self._blas: Any = None
        self._lock = threading.Lock()

    def limit(self) -> contextlib.AbstractContextManager[Any]:
        with self._lock:
            if self._blas is None:
                try:
                    from threadpoolctl import ThreadpoolController
                except ImportError:
                    self._blas = False
                else:
                    self._blas = ThreadpoolController().select(user_api="blas")
        if self._blas is False:
            return contextlib.nullcontext()
        return self._blas.limit(limits=free_cores())


_BLAS_THREADS = _BlasThreads()


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + np.float32(eps)) * w + b


class NumpyBertEmbedder:
    """`embedding.Embedder` for a sentence-transformers BERT model with mean pooling."""

    def __init__(self, model: str = "minilm", batch_size: int = 256,
                 deltas: dict[str, np.ndarray] | None = None):
        """``deltas``: weight name -> an array added to that weight (a matcher's LoRA
        delta, `planning.matcher`); a name the model lacks raises `UnsupportedModel`."""
        from safetensors.numpy import load_file
        from scipy.special import erf
        from tokenizers import Tokenizer

        root = Path(resolve_model_path(model))
        if not root.is_dir():
            raise UnsupportedModel(f"{model}: not a local model directory")
        cfg, self.max_length = _check_model(root)
        log.info("loading embedding model %s (numpy)", root)
        self.model_name = model
        self.batch_size = batch_size
        self._erf = erf
        self._eps = float(cfg.get("layer_norm_eps", 1e-12))
        self._heads = int(cfg["num_attention_heads"])
        w = load_file(str(root / "model.safetensors"))
        w = {k.removeprefix("bert."): v for k, v in w.items()}
        f32 = np.float32

        deltas = dict(deltas or {})
        unknown = sorted(set(deltas) - set(w))
        if unknown:
            raise UnsupportedModel(f"{root}: no weight {unknown[0]} for its delta")

        def get(name: str) -> np.ndarray:
            try:
                out = np.ascontiguousarray(w[name], dtype=f32)
            except KeyError:
                raise UnsupportedModel(f"{root}: no weight {name}") from None
            return out + deltas[name] if name in deltas else out

        self._word = get("embeddings.word_embeddings.weight")
        self._pos = get("embeddings.position_embeddings.weight")
        self._type0 = get("embeddings.token_type_embeddings.weight")[0]
        self._ln0 = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.dimension = int(self._word.shape[1])
        self._layers = []
        for i in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([get(p + f"attention.self.{n}.weight")
                                    for n in ("query", "key", "value")])
            qkv_b = np.concatenate([get(p + f"attention.self.{n}.bias")
                                    for n in ("query", "key", "value")])
            self._layers.append((
                np.ascontiguousarray(qkv_w.T), qkv_b,
                np.ascontiguousarray(get(p + "attention.output.dense.weight").T),
                get(p + "attention.output.dense.bias"),
                get(p + "attention.output.LayerNorm.weight"),
                get(p + "attention.output.LayerNorm.bias"),
                np.ascontiguousarray(get(p + "intermediate.dense.weight").T),
                get(p + "intermediate.dense.bias"),
                np.ascontiguousarray(get(p + "output.dense.weight").T),
                get(p + "output.dense.bias"),
                get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias"),
            ))
        tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(self.max_length)  # sentence-transformers' max_seq_length
        self._tok = tok
        self._special = self._special_ids(root, tok)

    @staticmethod
    def _special_ids(root: Path, tok) -> set[int]:
        """The ids transformers lists as `all_special_ids` (special_tokens_map.json)."""
        path = root / "special_tokens_map.json"
        names: list[str] = []
        if path.is_file():
            for v in _read_json(path).values():  # type: ignore[union-attr]
                items = v if isinstance(v, list) else [v]
                names += [i["content"] if isinstance(i, dict) else str(i) for i in items]
        ids = {tok.token_to_id(n) for n in names}
        return {i for i in ids if i is not None}

    # --- the network ---------------------------------------------------------------------
    def _forward(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
        """Token vectors (B, T, d) of a batch of id rows (B, T) right-padded to T; row i's
        first ``lengths[i]`` tokens are real (default: all): no real token attends to a
        pad, so its vector is what the unpadded row gives (pads' own vectors are junk)."""
        b, t = ids.shape
        d, h = self.dimension, self._heads
        hd = d // h
        x = self._word[ids] + self._pos[:t] + self._type0
        x = _layer_norm(x, *self._ln0, self._eps).reshape(b * t, d)
        scale = np.float32(1.0 / np.sqrt(hd))
        mask = None
        if lengths is not None and int(lengths.min()) < t:
            mask = np.where(np.arange(t)[None, :] < lengths[:, None], np.float32(0),
                            np.float32(-1e9)).astype(np.float32)[:, None, None, :]
        for (qkv_w, qkv_b, ao_w, ao_b, ln1_w, ln1_b, in_w, in_b, out_w, out_b, ln2_w,
             ln2_b) in self._layers:
            qkv = (x @ qkv_w + qkv_b).reshape(b, t, 3, h, hd).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (B, H, T, hd)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale
            if mask is not None:
                scores += mask
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b * t, d)
            x = _layer_norm(ctx @ ao_w + ao_b + x, ln1_w, ln1_b, self._eps)
            inter = x @ in_w + in_b
            inter = inter * np.float32(0.5) * (np.float32(1.0) + self._erf(
                inter * np.float32(1.0 / np.sqrt(2.0))))  # exact GELU, as torch's "gelu"
            x = _layer_norm(inter @ out_w + out_b + x, ln2_w, ln2_b, self._eps)
        return x.reshape(b, t, d)

    def _run(self, texts: list[str]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per text: (token ids (T,), token vectors (T, d)); texts sorted by token count run
        together in batches of `batch_size`, padded to the longest with a key mask (a
        question and its relation text: one forward pass, not two)."""
        encs = self._tok.encode_batch(texts, add_special_tokens=True)
        ids = [np.asarray(e.ids, dtype=np.int64) for e in encs]
        out: list[np.ndarray] = [np.empty(0)] * len(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for s in range(0, len(order), self.batch_size):
            part = order[s:s + self.batch_size]
            lengths = np.array([len(ids[i]) for i in part])
            batch = np.zeros((len(part), int(lengths.max())), dtype=np.int64)
            for row, i in enumerate(part):
                batch[row, :lengths[row]] = ids[i]
            with _BLAS_THREADS.limit():
                vecs = self._forward(batch, lengths)
            for row, i in enumerate(part):
                out[i] = vecs[row, :lengths[row]]
        return ids, out

    @staticmethod
    def _unit(m: np.ndarray) -> np.ndarray:
        n = np.linalg.norm(m, axis=-1, keepdims=True)
        return (m / np.maximum(n, np.float32(1e-12))).astype(np.float32, copy=False)

    def _sentence(self, tokens: np.ndarray) -> np.ndarray:
        return self._unit(tokens.mean(axis=0))  # mean pooling (no padding), then normalise

    # --- the Embedder interface ----------------------------------------------------------
    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Normalised sentence vectors (n, d) float32; duplicates are embedded once."""
        return encode_unique(texts, self.dimension,
                             lambda uniq: np.stack([self._sentence(t)
                                                    for t in self._run(uniq)[1]]))

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_tokens(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text: (normalised sentence vector (d,), normalised contextual token vectors
        (T, d) without special tokens; T >= 1), as `SentenceEmbedder.encode_tokens`."""
        ids, toks = self._run(list(texts))
        result = []
        for row, emb in zip(ids, toks, strict=True):
            keep = np.array([int(i) not in self._special for i in row], dtype=bool)
            result.append((self._sentence(emb), self._unit(emb[keep] if keep.any() else emb)))
        return result
