"""Questions written from a loaded store's own paths, to adapt the matcher to a KG nobody
labelled (`talent train planner --self`).

For ``anchors`` entities sampled from the store (seeded, over its id pages): the anchor's
own paths of 1..3 relations (`beam.grow` under a random score: a random sample of what the
anchor really has, CVT nodes walked through), one of each length where it has one; each
path written as a question: a noun phrase grown outward from the anchor's name, one
relation's words at a time (`phrase`: "the genre of X", "the ones directed by X", read
either way since paths ignore direction; a relation repeated in a row as sharing, "the
ones that share the written by with X", the reading of MetaQA-style co-member questions,
or as its two steps; a participle also by its agent noun where the encoder's vocabulary
has one: "the director of X", "the ones with the same writer as X"), in a question's frame,
or as keywords; the anchor's name removed as the planner removes it.
The anchor's other sampled paths are the pair's hard negatives (and, in `training.matcher`,
the gold's own relations reordered). No answer and no label of any question is read: only
the store.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from talent_core.explore import is_cvt
from talent_core.planning.beam import BeamSettings, grow
from talent_core.planning.matcher import Pair, readable_relation
from talent_core.planning.paths import PathT
from talent_core.retrieval.relations import strip_mentions
from talent_core.store import GraphReader

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SelfDefaults:
    """`--self`'s defaults, for the CLI, the API and the Load page alike (chosen on
    validation questions; bench/README.md, "--self, second round")."""

    anchors: int = 1500  # entities whose paths are written as questions
    epochs: int = 2
    lr: float = 1e-4
    rerank_epochs: int = 1  # the re-ranker's fit on the same questions
    rerank_lr: float = 1e-4


SELF = SelfDefaults()

AUX = frozenset({"has", "have", "is", "in", "was", "are"})
ASK = ("what is {np}", "who is {np}", "which are {np}", "{np}", "tell me {np}",
       "what are {np}", "list {np}")
HEADS = ("things", "ones", "entities")


def phrase(rel: str) -> str:
    """A relation as a noun or participle phrase: its words (`readable_relation`) without
    a leading auxiliary ("has genre" -> "genre", "in language" -> "language")."""
    words = readable_relation(rel).split()
    while len(words) > 1 and words[0].lower() in AUX:
        words = words[1:]
    return " ".join(words)


def agent_noun(participle: str, words: frozenset[str]) -> str | None:
    """The doer of a participle ("directed" -> "director", "written" -> "writer"): the
    first of its stems + "or" / "er" (+ "r" after an "e") that the encoder's vocabulary
    ``words`` holds as a word; None when none does (no guessed word is ever written)."""
    w = participle.lower()
    stems: list[str] = []
    for suffix in ("ed", "d", "en", "n"):
        if w.endswith(suffix) and len(w) > len(suffix) + 2:
            b = w[: -len(suffix)]
            stems += [b, b + "e", b[:-1], b[:-1] + "e"]
    for stem in stems:
        for tail in ("or", "er", "r") if stem.endswith("e") else ("or", "er"):
            if stem + tail in words and stem + tail != w:
                return stem + tail
    return None


def _agent(w: str, words: frozenset[str]) -> str | None:
    """The agent noun of a relation phrase "... X-ed by" (`agent_noun`), else None."""
    parts = w.split()
    return agent_noun(parts[-2], words) if len(parts) >= 2 and parts[-1] == "by" else None


def _step(np: str, rel: str, rng: random.Random, words: frozenset[str]) -> str:
    """The noun phrase one relation away from ``np``, read either way (paths ignore
    direction: an anchor may be the edge's subject or its object)."""
    w = phrase(rel)
    head = rng.choice(HEADS)
    forms = [f"the {w} of {np}", f"the {head} whose {w} is {np}", f"the {head} with {np} as {w}"]
    if w.endswith(" by"):  # a participle: "directed by" reads "the things directed by X"
        forms.append(f"the {head} {w} {np}")  # and its agent "the ones that directed X"
        forms.append(f"the {head} that {w[:-3]} {np}")
        agent = _agent(w, words)
        if agent:  # "the director of X", "the ones whose director is X"
            forms += [f"the {agent} of {np}", f"the {head} whose {agent} is {np}"]
    return rng.choice(forms)


def _share(np: str, rel: str, rng: random.Random, words: frozenset[str]) -> str:
    """The noun phrase of a repeated relation (r, r): what shares its r with ``np``."""
    w = phrase(rel)
    head = rng.choice(HEADS)
    def shared(noun: str) -> list[str]:
        return [f"the {head} with the same {noun} as {np}",
                f"the other {head} of the {noun} of {np}",
                f"the {head} whose {noun} is also the {noun} of {np}"]

    forms = [f"the {head} that share the {w} with {np}", *shared(w)]
    agent = _agent(w, words)
    if agent:  # "the co-directors of X", "the ones with the same director as X"
        forms += [f"the co-{agent}s of {np}", *shared(agent)]
    return rng.choice(forms)


def write_question(path: PathT, name: str, rng: random.Random,
                   words: frozenset[str] = frozenset()) -> str:
    """One question asking for ``path`` from the entity called ``name``: a noun phrase
    grown from the name one relation at a time (a relation repeated in a row read as
    sharing: "the ones that share the written by with [X]", or as two steps: "the ones
    directed by the ones that directed [X]"), in a question's frame. Every
    relation's words appear (a participle's agent without its "by", or its agent noun
    where ``words``, the encoder's vocabulary, holds one: `agent_noun`), in the path's
    order read outward from the name."""
    if rng.random() < 0.125:  # as keywords: "[X] starred actors directed by"
        return " ".join([name, *(phrase(r) for r in path)])
    np, i = name, 0
    while i < len(path):
        if i + 1 < len(path) and path[i + 1] == path[i] and rng.random() < 0.5:
            np, i = _share(np, path[i], rng, words), i + 2
        else:
            np, i = _step(np, path[i], rng, words), i + 1
    return rng.choice(ASK).format(np=np)


def sample_anchors(store: GraphReader, n: int, rng: random.Random, page: int = 5000,
                   max_ids: int = 200_000) -> list[str]:
    """``n`` entity ids drawn from the store's first ``max_ids`` ids (in id order)."""
    ids: list[str] = []
    after = ""
    while len(ids) < max_ids:
        got = store.entity_ids(after, page)
        if not got:
            break
        ids.extend(got)
        after = got[-1]
    return rng.sample(ids, min(n, len(ids)))


def store_pairs(store: GraphReader, anchors: int = SELF.anchors, seed: int = 0,
                progress: Callable[[int, int], None] | None = None,
                words: frozenset[str] = frozenset()) -> list[Pair]:
    """Synthetic (question, path) pairs from the store's paths (see the module doc;
    ``words``: the encoder's vocabulary, for `agent_noun`)."""
    rng = random.Random(seed)
    settings = BeamSettings(width=6, max_rels=3)
    out: list[Pair] = []
    chosen = sample_anchors(store, anchors, rng)
    names = {e.id: e.name for e in store.entities_by_id(chosen)}
    for k, anchor in enumerate(chosen):
        name = names.get(anchor, "")
        if name and not is_cvt(name):
            grown = grow(store, [anchor], lambda ts: [rng.random() for _ in ts], settings)
            by_len: dict[int, list[PathT]] = {}
            for t in sorted(grown.scores):
                by_len.setdefault(len(t), []).append(t)
            paths = sorted(grown.scores)
            for group in by_len.values():
                t = rng.choice(group)
                text = strip_mentions(write_question(t, name, rng, words), [name])
                out.append(Pair(text, [t], [o for o in paths if o != t], "self"))
        if progress:
            progress(k + 1, len(chosen))
    log.info("self-training: %d questions from %d anchors", len(out), len(chosen))
    return out
