"""The question <-> relation-path matcher: a sentence encoder that embeds a question (its
anchors' mentions removed) and a relation path written in words, and scores the pair by
their cosine.

After UniKGQA's retrieval stage (Jiang et al., ICLR 2023: a PLM matching the question with
relations, contrastively pre-trained on question / relation-path pairs) with a bi-encoder
in place of its cross-attention, so a store's path texts embed once and cache. The encoder
is all-MiniLM-L6-v2 (the store's embedder) with a LoRA delta on its linear layers
(`training.matcher` fits it); the frozen encoder (no delta) is the zero-shot matcher.

A matcher directory holds ``matcher.json`` (format, base model, LoRA rank / alpha, the
softmax scale, training metadata, ``lora``: its factors' file) and the factors
(``lora-<hash>.npz``, or ``lora.npz`` where ``lora`` is absent: per adapted weight
``<name>.A`` (r, in) and ``<name>.B`` (out, r)): the weight used is W + (alpha / r) B A (Hu
et al., 2021). A new matcher is written factors first, under a new name, then
``matcher.json`` atomically: a reader sees the old matcher or the new one, never half of
each, and a running process picks up the new one at its next question (`load_matcher`
keys its cache by ``matcher.json``'s identity). The query path runs it in numpy
(`embedding_numpy.NumpyBertEmbedder` with the deltas), without torch.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from talent_core.errors import PlannerError
from talent_core.planning.paths import PathT
from talent_core.private_files import write_atomic

log = logging.getLogger(__name__)

FORMAT = "talent-path-matcher/1"
META_FILE = "matcher.json"
LORA_FILE = "lora.npz"
BUNDLED = Path(__file__).resolve().parents[1] / "adapters" / "matcher"
DEFAULT_SCALE = 20.0  # the cosine's softmax scale (inverse temperature 0.05)


@dataclass
class Pair:
    """A question as the matcher reads it, its gold paths and paths to contrast it with
    (a training example of `training.matcher`)."""

    text: str
    gold: list[PathT]
    negatives: list[PathT] = field(default_factory=list)
    source: str = ""


def readable_relation(rel: str) -> str:
    """A relation name as words: a Freebase name keeps its type and property
    (`people.person.place_of_birth` -> "person place of birth"), another name its words
    (`directed_by` -> "directed by", `Daniel_OPARE`-style underscores as spaces)."""
    return " ".join(p.replace("_", " ") for p in rel.split(".")[-2:]).strip()


def path_words(path: Sequence[str]) -> str:
    """A relation path as words: its relations made readable, in order."""
    return ", ".join(readable_relation(r) for r in path)


def lora_deltas(arrays: dict[str, np.ndarray], alpha: float, rank: int
                ) -> dict[str, np.ndarray]:
    """Weight name -> the dense delta (alpha / r) B A of ``lora.npz``'s factors."""
    out: dict[str, np.ndarray] = {}
    for key in arrays:
        if key.endswith(".A"):
            name = key[:-2]
            b = arrays.get(name + ".B")
            if b is None:
                raise PlannerError(f"{LORA_FILE}: {name}.A without {name}.B")
            out[name] = (alpha / rank) * (b.astype(np.float32) @ arrays[key].astype(np.float32))
    return out


class PathMatcher:
    """Scores a question against relation paths: cos(e(question), e(words(path))), scaled
    by ``scale`` for the plan's softmax. Path texts are embedded once per process."""

    def __init__(self, meta: dict[str, Any], embedder: Any):
        self.meta = meta
        self.embedder = embedder
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return str(self.meta.get("name", "?"))

    @property
    def kind(self) -> str:
        """How it plans, as the UI and `talent ask` say it: "matcher (name)" / "zero-shot"."""
        return "zero-shot" if not self.meta.get("trained") else f"matcher ({self.name})"

    @property
    def scale(self) -> float:
        return float(self.meta.get("scale", DEFAULT_SCALE))

    def encode_question(self, text: str) -> np.ndarray:
        v = np.asarray(self.embedder.encode([text])[0], dtype=np.float32)
        return v / max(float(np.linalg.norm(v)), 1e-12)

    def path_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors (n, d) of path texts, embedded once per process (cache bounded)."""
        with self._lock:
            missing = sorted({t for t in texts if t not in self._cache})
        if missing:
            got = np.asarray(self.embedder.encode(missing), dtype=np.float32)
            got /= np.maximum(np.linalg.norm(got, axis=1, keepdims=True), 1e-12)
            with self._lock:
                if len(self._cache) > 100_000:
                    self._cache.clear()
                self._cache.update(zip(missing, got))
        with self._lock:
            return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 1))

    def similarity(self, q: np.ndarray, paths: Sequence[Sequence[str]]) -> np.ndarray:
        """cos(question vector ``q``, words(path)) per path."""
        if not paths:
            return np.zeros(0, dtype=np.float32)
        return self.path_vectors([path_words(p) for p in paths]) @ q


def lora_file(directory: Path, meta: dict[str, Any]) -> Path:
    """The factors' file a matcher's meta names (``lora.npz`` when it names none)."""
    name = str(meta.get("lora") or LORA_FILE)
    if Path(name).name != name:
        raise PlannerError(f"{directory / META_FILE}: 'lora' must be a file name, not {name!r}")
    return directory / name


def load_meta(directory: Path) -> dict[str, Any]:
    path = directory / META_FILE
    if not path.is_file():
        raise PlannerError(f"{directory}: not a matcher directory (needs {META_FILE} and its "
                           f"{LORA_FILE}; train one with `talent train planner`)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PlannerError(f"{path}: unreadable ({e})") from None
    found = meta.get("format") if isinstance(meta, dict) else None
    if found != FORMAT:
        raise PlannerError(f"{path}: format {found!r}, expected {FORMAT!r}")
    if not lora_file(directory, meta).is_file():
        raise PlannerError(f"{directory}: not a matcher directory ({META_FILE} names "
                           f"{lora_file(directory, meta).name}, which is missing)")
    return meta


def read_factors(directory: Path, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    path = lora_file(directory, meta)
    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise PlannerError(f"{path}: unreadable ({e})") from None


def read_deltas(directory: Path, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    arrays = read_factors(directory, meta)
    try:
        return lora_deltas(arrays, float(meta["lora_alpha"]), int(meta["lora_rank"]))
    except (KeyError, TypeError, ValueError) as e:
        raise PlannerError(f"{directory / META_FILE}: bad LoRA settings ({e})") from None


def save_matcher(directory: Path, meta: dict[str, Any], factors: dict[str, np.ndarray]) -> None:
    """Write the factors under a name of their own, then ``matcher.json``, each atomically
    (`private_files.write_atomic`: a unique temporary file, fsync, rename; module doc), then
    drop factors files no meta names but the one just replaced (a reader may still be
    opening it)."""
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {k: v.astype(np.float32) for k, v in sorted(factors.items())}
    digest = hashlib.sha256()
    for k, v in arrays.items():
        digest.update(k.encode())
        digest.update(v.tobytes())
    name = f"lora-{digest.hexdigest()[:16]}.npz"
    previous = None
    with contextlib.suppress(PlannerError):
        previous = lora_file(directory, load_meta(directory)).name
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_atomic(directory / name, buf.getvalue(), "matcher factors", PlannerError)
    body = json.dumps({**meta, "format": FORMAT, "lora": name}, indent=1) + "\n"
    write_atomic(directory / META_FILE, body.encode("utf-8"), "matcher", PlannerError)
    for old in directory.glob("lora-*.npz"):
        if old.name not in (name, previous):
            old.unlink(missing_ok=True)


def bundled_base() -> str | None:
    """The base model the shipped matcher tunes (None: none shipped)."""
    try:
        return str(load_meta(BUNDLED).get("base_model"))
    except PlannerError:
        return None


_LOADED: dict[tuple[str, str], tuple[tuple[int, int, int], Any]] = {}
_LOAD_LOCK = threading.Lock()


def _identity(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0, 0)
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def load_once(directory: Path, embedding_model: str, what: str,
              build: Callable[[dict[str, Any]], Any]) -> Any:
    """``build(meta)`` of the matcher directory ``directory`` (``what``: "matcher", "re-ranker"),
    once per process and again when its ``matcher.json`` is replaced (`talent train planner
    --self` while a server runs). `PlannerError` when the directory is unusable or was
    trained on another base model than ``embedding_model``."""
    key = (str(directory.resolve()), embedding_model)
    with _LOAD_LOCK:
        ident = _identity(directory / META_FILE)
        held = _LOADED.get(key)
        if held is not None and held[0] == ident:
            return held[1]
        meta = load_meta(directory)
        if meta.get("base_model") != embedding_model:
            raise PlannerError(f"{directory}: a {what} of {meta.get('base_model')!r}, the "
                               f"store embeds with {embedding_model!r}")
        out = build(meta)
        if held is not None:
            log.info("%s %s replaced on disk", what, directory)
        _LOADED[key] = (ident, out)
        return out


def encoder_of(directory: Path, meta: dict[str, Any], embedding_model: str) -> Any:
    """The numpy sentence encoder with the directory's LoRA delta applied."""
    from talent_core.embedding_numpy import NumpyBertEmbedder

    return NumpyBertEmbedder(embedding_model, deltas=read_deltas(directory, meta))


def matcher_directory(spec: str) -> Path:
    """The directory of a --planner choice other than "zero-shot": "bundled" is
    `adapters/matcher/`, anything else names one."""
    return BUNDLED if spec == "bundled" else Path(spec)


def load_matcher(spec: str, embedding_model: str, base: Any) -> PathMatcher:
    """The matcher of a --planner choice: "zero-shot" (the store's embedder ``base``, no
    delta), "bundled" (`adapters/matcher/`) or a matcher directory (`load_once`)."""
    if spec == "zero-shot":
        return PathMatcher({"name": "zero-shot", "trained": False}, base)
    directory = matcher_directory(spec)
    return load_once(directory, embedding_model, "matcher", lambda meta: PathMatcher(
        {**meta, "trained": True}, encoder_of(directory, meta, embedding_model)))
