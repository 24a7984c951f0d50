"""Embedders for bulk loading.

`make_embedder(settings)` returns the sentence-transformers model of
`TALENT_EMBEDDING_MODEL` (talent_core.embedding) wrapped for short texts (entity and
relation names).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np

from talent_core.config import Settings
from talent_core.embedding_common import available_cores

log = logging.getLogger(__name__)

class BulkEmbedder:
    """The project's sentence-transformers Embedder, set up for embedding many names.

    * precision "fp32": the model as is (bit-identical to query-time embeddings);
      "bf16": bfloat16 autocast on CPUs with native bf16 (AVX512-BF16 / AMX), faster at a
      cosine to the fp32 vector close to 1; falls back to fp32 without native bf16.
    * batch_size: names are short and the model sorts each call's texts by length, so
      small batches carry no padding and run faster than large ones.
    * threads: torch intra-op threads while embedding; by default, while batches are
      embedded and written at the same time (`overlapped`, set by the loader per batch),
      `default_threads()`: one core fewer than available, so that the store's server (and
      the loader's writer thread) keep a core (OpenMP threads that share a core with
      another busy process wait on each other); when batches are written in turn
      (--no-overlap) or by the bulk path (whose GRAPH.BULK runs in turn and only the short
      vector conversion beside the next batch) every core.
    Measured rates and precision: bench/bench_load.py -> bench/results/load_metaqa.json.
    The loader passes all new names of a batch in one call."""

    def __init__(
        self,
        base,
        precision: str = "fp32",
        batch_size: int | None = 128,
        threads: int | None = None,
    ):
        if precision not in ("fp32", "bf16"):
            raise ValueError("precision must be 'fp32' or 'bf16'")
        self.base = base
        self.dimension = base.dimension
        self.model_name = getattr(base, "model_name", "?")
        self.batch_size = batch_size or getattr(base, "batch_size", None)
        self.threads = threads  # None: see `overlapped`
        self.overlapped = True
        self.precision = precision
        if precision == "bf16" and not _cpu_bf16():
            log.warning("this CPU has no native bf16: embedding in fp32")
            self.precision = "fp32"
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        import torch

        with self._lock:
            saved_bs, saved_threads = self.base.batch_size, torch.get_num_threads()
            try:
                if self.batch_size:
                    self.base.batch_size = self.batch_size
                torch.set_num_threads(self.threads or (
                    default_threads() if self.overlapped else available_cores()))
                if self.precision == "bf16":
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        return self.base.encode(texts, progress=progress)
                return self.base.encode(texts, progress=progress)
            finally:
                self.base.batch_size = saved_bs
                torch.set_num_threads(saved_threads)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def default_threads() -> int:
    """Cores available to this process minus one (at least 1): see BulkEmbedder."""
    return max(1, available_cores() - 1)


def _cpu_bf16() -> bool:
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def make_embedder(
    settings: Settings,
    precision: str = "fp32",
    batch_size: int | None = 128,
    threads: int | None = None,
):  # -> TextEmbedder
    """The embedder a load uses: the project model wrapped for names (BulkEmbedder)."""
    from talent_core.embedding import get_embedder

    base = get_embedder(settings.embedding_model, settings.device, settings.embed_batch_size)
    return BulkEmbedder(base, precision, batch_size=batch_size, threads=threads)
