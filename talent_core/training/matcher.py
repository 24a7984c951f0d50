"""Training the question <-> relation-path matcher (`planning.matcher`): LoRA on the
sentence encoder, contrastive over (question, path in words) pairs.

Loss (the multiple-negatives ranking loss of sentence-transformers, with hard negatives):
for a batch of B questions, the candidates are each question's positive path and one hard
negative (another path its anchor has, or one of the same domain); question i's logits are
``scale`` cos(q_i, c_j) over the 2B candidates and the target is its own positive;
candidates that are also a gold path of question i (two questions of one path type in a
batch) are masked out of its row rather than counted as negatives. With ``mine`` (ANCE-style),
from the second epoch on each question also brings one of the training paths the model being
fitted ranks highest among its wrong ones (`mine_negatives`, re-ranked every epoch).

Pairs come from labelled relation paths: WebQSP training records (`webqsp_pairs`, RoG's
ground paths and the annotators' chain, as `training.path_labels.path_labels`), MetaQA
question files typed by `qa_dev_qtype.txt` (`metaqa_pairs`: the question type names the
path), or questions written from a loaded store's own paths (`planning.self_train`).
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from talent_core.errors import DataError, TrainingBusyError, TrainingDataError
from talent_core.planning.matcher import (
    META_FILE,
    Pair,
    path_words,
    save_matcher,
)
from talent_core.planning.paths import PathT
from talent_core.planning.reranker import RERANKER_DIR
from talent_core.questions import parse_question
from talent_core.retrieval.relations import strip_mentions
from talent_core.store._common import flocked
from talent_core.training.contrast import (
    Steps,
    by_domain,
    factors_of,
    lora_encoder,
    negative,
    start_factors,
    step_count,
    unit_vectors,
)

log = logging.getLogger(__name__)


# --- pairs from WebQSP label records ------------------------------------------------------


def webqsp_pairs(records: Sequence[Any], max_len: int = 3) -> list[Pair]:
    """One pair per record with a label (`training.path_labels.path_labels`, source "both"):
    negatives are its other ground paths (RoG's noisy ones)."""
    from talent_core.training.path_labels import path_labels

    out = []
    for rec in records:
        gold = list(path_labels(rec, "both", max_len))
        if not gold:
            continue
        others = [tuple(p) for p in rec.ground_paths if tuple(p) not in gold and p]
        out.append(Pair(strip_mentions(rec.question, rec.q_entity), gold,
                        list(dict.fromkeys(others)), "webqsp"))
    return out


# --- pairs from MetaQA question files ------------------------------------------------------

# the entity types of MetaQA's question types and the relation linking each to a movie
METAQA_RELATION = {"actor": "starred_actors", "director": "directed_by", "writer": "written_by",
                   "year": "release_year", "language": "in_language", "genre": "has_genre",
                   "tags": "has_tags", "tag": "has_tags", "imdbrating": "has_imdb_rating",
                   "imdbvotes": "has_imdb_votes"}


def metaqa_type_path(qtype: str) -> PathT:
    """`actor_to_movie_to_director` -> (starred_actors, directed_by): each hop's relation is
    the one between a movie and the other end's type."""
    parts = qtype.split("_to_")
    if len(parts) < 2 or any(p not in METAQA_RELATION and p != "movie" for p in parts):
        raise ValueError(f"not a MetaQA question type: {qtype!r}")
    return tuple(METAQA_RELATION[a if a != "movie" else b] for a, b in zip(parts, parts[1:]))


def metaqa_qtypes(metaqa: Path) -> dict[str, str]:
    """question line -> its question type, over every hop's qa_dev.txt / qa_dev_qtype.txt."""
    out: dict[str, str] = {}
    for hop in (1, 2, 3):
        qa = metaqa / f"{hop}-hop" / "qa_dev.txt"
        qt = metaqa / f"{hop}-hop" / "qa_dev_qtype.txt"
        lines = qa.read_text(encoding="utf-8").splitlines()
        types = qt.read_text(encoding="utf-8").splitlines()
        if len(lines) != len(types):
            raise DataError(f"{qt}: {len(types)} lines, {qa} has {len(lines)}: not aligned")
        out.update((q.strip(), t.strip()) for q, t in zip(lines, types) if q.strip())
    return out


def metaqa_pairs(files: Sequence[Path], qtypes: dict[str, str]) -> list[Pair]:
    """One pair per question line of ``files`` (MetaQA's `question<TAB>answers`): the gold
    path from its question type; negatives: every other MetaQA path type that starts from
    the same entity type (the anchor's other paths)."""
    typed: list[tuple[str, str]] = []
    for f in files:
        for lineno, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            qtype = qtypes.get(line.strip())
            if qtype is None:
                raise DataError(f"{f}:{lineno}: not a line of MetaQA's qa_dev.txt (no type)")
            typed.append((line.split("\t")[0], qtype))
    by_start: dict[str, set[PathT]] = defaultdict(set)
    for qtype in set(qtypes.values()):
        by_start[qtype.split("_to_")[0]].add(metaqa_type_path(qtype))
    out = []
    for question, qtype in typed:
        text, topics = parse_question(question)
        gold = metaqa_type_path(qtype)
        negatives = sorted(by_start[qtype.split("_to_")[0]] - {gold})
        out.append(Pair(strip_mentions(text, topics), [gold], negatives, "metaqa"))
    return out


# --- the fit --------------------------------------------------------------------------------



@dataclass
class FitSettings:
    epochs: int = 2
    batch: int = 32
    lr: float = 3e-4
    rank: int = 16
    alpha: float = 32.0
    scale: float = 20.0
    max_length: int = 48
    seed: int = 0
    threads: int = 0  # 0: torch's default
    # hard negatives mined by the matcher itself (ANCE-style): from the epoch `mine_from`
    # on, each question also meets one of the `mine` training paths the model being fitted
    # ranks highest among those not gold for it (re-ranked at each epoch's start); 0: none
    mine: int = 0
    mine_from: int = 1


def path_accuracy(encode: Callable[[list[str]], np.ndarray], pairs: Sequence[Pair],
                  vocab: Sequence[PathT]) -> dict[str, float]:
    """Top-1 / top-5 path accuracy: the likeliest of ``vocab`` by cosine is a gold path."""
    if not pairs or not vocab:
        return {"questions": 0, "path_acc": 0.0, "path_acc5": 0.0}
    q = encode([p.text for p in pairs])
    v = encode([path_words(t) for t in vocab])
    order = np.argsort(-(q @ v.T), axis=1)[:, :5]
    top1 = [vocab[o[0]] in set(p.gold) for o, p in zip(order, pairs)]
    top5 = [any(vocab[i] in set(p.gold) for i in o) for o, p in zip(order, pairs)]
    return {"questions": len(pairs), "path_acc": round(float(np.mean(top1)), 4),
            "path_acc5": round(float(np.mean(top5)), 4)}


def mine_negatives(encode: Callable[[list[str]], np.ndarray], pairs: Sequence[Pair],
                   vocab: Sequence[PathT], k: int) -> list[list[PathT]]:
    """Each pair's ``k`` paths of ``vocab`` the encoder now ranks highest that are not gold
    for it: the confusions a fit should work on (ANCE's negatives, over the training paths
    rather than a corpus)."""
    q = encode([p.text for p in pairs])
    v = encode([path_words(t) for t in vocab])
    sims = q @ v.T
    top = np.argsort(-sims, axis=1)[:, : k + 8]
    out = []
    for row, p in zip(top, pairs):
        gold = set(p.gold)
        out.append([vocab[j] for j in row if vocab[j] not in gold][:k])
    return out


def fit_matcher(pairs: Sequence[Pair], output: Path, *, name: str, base_model: str,
                settings: FitSettings | None = None, val: Sequence[Pair] = (),
                trained_on: dict[str, Any] | None = None, init: Path | None = None,
                progress: Callable[[int, int, float], None] | None = None,
                timings: dict[str, float] | None = None) -> dict[str, Any]:
    """Fit LoRA factors on ``pairs``, validate on ``val`` (path accuracy over the gold
    paths of both), write the matcher to ``output``; returns its meta. ``init``: a matcher
    directory whose factors training starts from (its rank and alpha are kept).
    ``progress(step, steps, loss)`` is called after every step; ``timings``: more of the
    work's timings (seconds) kept in the meta's ``training``."""
    import torch

    s = settings or FitSettings()
    start = start_factors(init, s)
    if not pairs:
        raise TrainingDataError("no training pair (question with a labelled relation path)")
    rng = random.Random(s.seed)
    tok, model = lora_encoder(base_model, s, start)

    def embed(texts: list[str]) -> Any:
        return unit_vectors(tok, model, texts, s.max_length)

    def encode(texts: list[str]) -> np.ndarray:
        model.eval()
        with torch.no_grad():
            vecs = [embed(texts[i:i + 256]).numpy() for i in range(0, len(texts), 256)]
        return np.concatenate(vecs) if vecs else np.zeros((0, 384), np.float32)

    domains = by_domain(pairs)
    vocab = sorted({g for p in [*pairs, *val] for g in p.gold})
    train_vocab = sorted({g for p in pairs for g in p.gold})
    mined: list[list[PathT]] = []
    steps = step_count(len(pairs), s.batch, s.epochs)
    fit = Steps([p for p in model.parameters() if p.requires_grad], s.lr, steps, progress)
    order = list(range(len(pairs)))
    for epoch in range(s.epochs):
        if s.mine and epoch >= s.mine_from:
            mined = mine_negatives(encode, pairs, train_vocab, s.mine)
        rng.shuffle(order)
        model.train()
        for b in range(0, len(order), s.batch):
            idx = order[b:b + s.batch]
            batch = [pairs[i] for i in idx]
            pos = [rng.choice(p.gold) for p in batch]
            neg = [negative(p, rng, domains) for p in batch]
            cands = pos + neg + ([rng.choice(mined[i]) for i in idx if mined[i]]
                                 if mined else [])
            q = embed([p.text for p in batch])
            c = embed([path_words(t) for t in cands])
            logits = s.scale * q @ c.T
            mask = torch.zeros_like(logits, dtype=torch.bool)
            for i, p in enumerate(batch):
                gold = set(p.gold)
                for j, t in enumerate(cands):
                    if j != i and t in gold:
                        mask[i, j] = True
            logits = logits.masked_fill(mask, -1e4)
            fit.take(torch.nn.functional.cross_entropy(logits, torch.arange(len(batch))))
    training = {**(timings or {}), **fit.record()}
    factors = factors_of(model)
    meta: dict[str, Any] = {
        "name": name, "base_model": base_model, "lora_rank": s.rank, "lora_alpha": s.alpha,
        "scale": s.scale, "settings": s.__dict__,
        "trained_on": {**(trained_on or {}), "pairs": len(pairs),
                       "started_from": str(init) if init is not None else None,
                       "sources": sorted({p.source for p in pairs})},
        "training": training,
    }
    if val:
        meta["validation"] = path_accuracy(encode, val, vocab)
    save_matcher(output, meta, factors)
    log.info("matcher %s: %d pairs, %d steps in %.0f s -> %s", name, len(pairs), steps,
             training["fit_s"], output)
    return meta


# --- the commands' entry points -------------------------------------------------------------


def log_progress(step: int, steps: int, loss: float) -> None:
    """Progress of a fit in the log, every 20 steps and at the end."""
    if step % 20 == 0 or step == steps:
        log.info("step %d/%d, loss %.3f", step, steps, loss)


def read_pairs(files: Sequence[Path], metaqa: Path | None, val_files: Sequence[Path]
               ) -> tuple[list[Pair], list[Pair]]:
    """(training, validation) pairs of the question files: label records (`.jsonl`: their
    split "validation" validates) or MetaQA question files typed by ``metaqa``'s
    `qa_dev_qtype.txt` files (`.txt`; ``val_files`` validate)."""
    from talent_core.training.path_labels import read_path_labels

    train: list[Pair] = []
    val: list[Pair] = []
    qtypes: dict[str, str] | None = None
    for f in [*files, *val_files]:
        if f.suffix != ".jsonl" and metaqa is None:
            raise DataError(f"{f}: a MetaQA question file needs --metaqa-types DIR (label "
                            "records are .jsonl)")
    for f in files:
        if f.suffix == ".jsonl":
            recs = read_path_labels(f)
            train += webqsp_pairs([r for r in recs if r.split == "train"])
            val += webqsp_pairs([r for r in recs if r.split == "validation"])
        else:
            qtypes = qtypes or metaqa_qtypes(metaqa)  # type: ignore[arg-type]
            train += metaqa_pairs([f], qtypes)
    if val_files:
        qtypes = qtypes or metaqa_qtypes(metaqa)  # type: ignore[arg-type]
        val += metaqa_pairs(list(val_files), qtypes)
    # the same question line (its topic included: MetaQA's templates repeat once the topic
    # is removed) in a training and a validation file
    def lines(fs: Sequence[Path]) -> set[str]:
        return {ln.strip() for f in fs if f.suffix != ".jsonl"
                for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()}

    overlap = lines(files) & lines(val_files)
    if overlap:
        raise DataError(f"{len(overlap)} validation questions also occur in the training "
                        f"files, e.g. {sorted(overlap)[0]!r}")
    return train, val


def fit_self(settings: Any, output: Path, *, start: Path | None = None,
             anchors: int | None = None, epochs: int | None = None, lr: float | None = None,
             name: str = "self", seed: int = 0,
             progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """`talent train planner --self`: questions written from the store of ``settings``
    (`planning.self_train.store_pairs`; a tenth of the anchors validate), fitted on top of
    ``start`` (default: the shipped matcher) and written to ``output`` (``anchors``,
    ``epochs``, ``lr``: `self_train.SELF`'s where None), holding
    ``output``'s lock: a second adaptation of the same matcher at once is refused
    (`TrainingBusyError`). ``progress(stage, done, total)``: stage "questions" (anchors)
    then "fit" (steps), then "rerank" (steps; where ``start`` has a re-ranker)."""
    from talent_core.embedding_common import vocabulary_words
    from talent_core.planning.matcher import BUNDLED, bundled_base
    from talent_core.planning.self_train import SELF, store_pairs
    from talent_core.store import open_store

    anchors, epochs, lr = anchors or SELF.anchors, epochs or SELF.epochs, lr or SELF.lr

    def step(k: int, n: int, loss: float) -> None:
        log_progress(k, n, loss)
        if progress:
            progress("fit", k, n)

    def asked(k: int, n: int) -> None:
        if k % 100 == 0:
            log.info("self-training questions: anchor %d/%d", k, n)
        if progress:
            progress("questions", k, n)

    with exclusive(output):
        t0 = time.perf_counter()
        if start is None and bundled_base() == settings.embedding_model:
            start = BUNDLED
        store = open_store(settings)
        try:
            pairs = store_pairs(store, anchors, seed, progress=asked,
                                words=vocabulary_words(settings.embedding_model))
        finally:
            store.close()
        if not pairs:
            raise TrainingDataError("the store has no relation path to write a question "
                                    "from: is a KG loaded (talent stats)?")
        cut = len(pairs) - max(1, len(pairs) // 10)
        meta = fit_matcher(pairs[:cut], output, name=name, base_model=settings.embedding_model,
                           settings=FitSettings(epochs=epochs, lr=lr, seed=seed),
                           val=pairs[cut:], init=start, progress=step,
                           trained_on={"self": True, "anchors": anchors, "seed": seed,
                                       "store": str(settings.data_dir)},
                           timings={"questions_s": round(time.perf_counter() - t0, 1)})
        if start is None or not (start / RERANKER_DIR / META_FILE).is_file():
            shutil.rmtree(output / RERANKER_DIR, ignore_errors=True)  # a start without one
        else:
            from talent_core.training.reranker import fit_rerank_after

            fit_rerank_after(pairs[:cut], output, settings.embedding_model,
                             init=start / RERANKER_DIR, epochs=SELF.rerank_epochs,
                             lr=SELF.rerank_lr, seed=seed, progress=progress)
        return meta


LOCK_FILE = ".matcher.lock"


@contextlib.contextmanager
def exclusive(output: Path) -> Iterator[None]:
    """Hold ``output``'s training lock (a file beside it, flock()ed: released when the
    process ends, however it ends); `TrainingBusyError` when another holds it."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with flocked(output.parent / f"{LOCK_FILE}.{output.name}", "training", TrainingBusyError,
                 wait=False, busy=lambda _: f"{output}: another `talent train planner "
                 "--self` is adapting this matcher now; wait for it to end"):
        yield
