"""Questions written from a loaded store's own paths, to adapt the matcher to a KG nobody
labelled (`talent train planner --self`).

For ``anchors`` entities sampled from the store (seeded, over its id pages): the anchor's
own paths of 1..3 relations (`beam.grow` under a random score: a random sample of what the
anchor really has, CVT nodes walked through), one of each length where it has one; each
path written as a question: a noun phrase grown outward from the anchor's name, one
relation's words at a time, each read the way its triple goes on one walk of the path
(`walk_directions`; `phrase`: "the genre of X" from a film, "the ones directed by X" from
a director; a relation repeated out and back as sharing, "the ones with the same writer as
X" from a film, "the co-writers of X" from a writer, the reading of MetaQA-style co-member
questions, or as its two steps; a participle also by its agent noun where the encoder's
vocabulary has one: "the director of X"), in a question's frame, or as keywords; the
anchor's name removed as the planner removes it. The plan ignores direction; the question
cannot: read against its triple, "the genre of X" asks for films, and a chain of such
phrases teaches the matcher no order.
The anchor's other sampled paths are the pair's hard negatives (and, in `training.matcher`,
the gold's own relations reordered). No answer and no label of any question is read: only
the store.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
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


def _choose(along: list[str], against: list[str], forward: bool | None,
            rng: random.Random) -> str:
    """One of the phrases that read the way the step goes (``forward`` True: ``along``;
    False: ``against``; None, direction unknown: any of both)."""
    return rng.choice(along if forward else against if forward is False else along + against)


def _step(np: str, rel: str, rng: random.Random, words: frozenset[str],
          forward: bool | None = None, first: bool = False) -> str:
    """The noun phrase one relation away from ``np``: along the triple (``forward``: ``np``
    is its subject, the phrase its object: "the genre of X", "the director of X"), against
    it ("the ones directed by X", "the things whose genre is X"), or either (None)."""
    w = phrase(rel)
    head = rng.choice(HEADS)
    along = [f"the {w} of {np}"]
    against = [f"the {head} whose {w} is {np}"]
    if first:  # "the ones with X as genre": only around a name (nested it does not parse)
        against.append(f"the {head} with {np} as {w}")
    if w.endswith(" by"):  # a participle: "directed by" reads "the things directed by X"
        against.append(f"the {head} {w} {np}")  # and its agent "the ones that directed X"
        along.append(f"the {head} that {w[:-3]} {np}")
        agent = _agent(w, words)
        if agent:  # "the director of X", "the ones whose director is X"
            along.append(f"the {agent} of {np}")
            against.append(f"the {head} whose {agent} is {np}")
    return _choose(along, against, forward, rng)


def _share(np: str, rel: str, rng: random.Random, words: frozenset[str],
           forward: bool | None = None) -> str:
    """The noun phrase of a repeated relation (r, r) out and back: what shares its r with
    ``np``; ``forward``: the first step's direction (True: "the films with the same director
    as X"; False: "the co-directors of X", "the other starred actors of the ones whose
    starred actors is X"; None: either)."""
    w = phrase(rel)
    head = rng.choice(HEADS)
    agent = _agent(w, words)

    def shared(noun: str) -> list[str]:
        return [f"the {head} with the same {noun} as {np}",
                f"the other {head} of the {noun} of {np}",
                f"the {head} whose {noun} is also the {noun} of {np}"]

    along = [f"the {head} that share the {w} with {np}", *shared(w)]
    against = [f"the other {w} of the {head} whose {w} is {np}"]
    if agent:  # "the co-directors of X", "the ones with the same director as X"
        along += shared(agent)
        against.append(f"the co-{agent}s of {np}")
    return _choose(along, against, forward, rng)


def write_question(path: PathT, name: str, rng: random.Random,
                   words: frozenset[str] = frozenset(),
                   forward: Sequence[bool] | None = None) -> str:
    """One question asking for ``path`` from the entity called ``name``: a noun phrase
    grown from the name one relation at a time (a relation repeated out and back read as
    sharing: "the ones that share the written by with [X]", or as two steps: "the ones
    directed by the ones that directed [X]"), in a question's frame. Every
    relation's words appear (a participle's agent without its "by", or its agent noun
    where ``words``, the encoder's vocabulary, holds one: `agent_noun`), in the path's
    order read outward from the name; ``forward``: each step's direction in the KG
    (`walk_directions`), so each phrase reads the way its triple does (None: either)."""
    if rng.random() < 0.125:  # as keywords: "[X] starred actors directed by"
        return " ".join([name, *(phrase(r) for r in path)])
    way: list[bool | None] = list(forward) if forward is not None else [None] * len(path)
    np, i = name, 0
    while i < len(path):
        back = i + 1 < len(path) and path[i + 1] == path[i] and (
            way[i] is None or way[i + 1] is None or way[i] != way[i + 1])
        if back and rng.random() < 0.5:
            np, i = _share(np, path[i], rng, words, way[i]), i + 2
        else:
            np, i = _step(np, path[i], rng, words, way[i], first=i == 0), i + 1
    return rng.choice(ASK).format(np=np)


def walk_directions(store: GraphReader, anchor: str, path: PathT, rng: random.Random,
                    limit: int = 20) -> tuple[bool, ...] | None:
    """Each step's direction on one walk of ``path`` from ``anchor`` (a neighbour drawn per
    step, never the node just left): True where the walk follows its triple from subject
    to object. None where the walk stops (its question is then written either way)."""
    prev, cur, out = "", anchor, []
    for rel in path:
        nxt = sorted({m for _, m in store.follow([cur], rel, limit)} - {cur, prev})
        if not nxt:
            return None
        m = rng.choice(nxt)
        out.append(any(e.src == cur and e.dst == m for e in store.triples_among([cur, m], [rel])))
        prev, cur = cur, m
    return tuple(out)


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
                way = walk_directions(store, anchor, t, rng)
                text = strip_mentions(write_question(t, name, rng, words, way), [name])
                out.append(Pair(text, [t], [o for o in paths if o != t], "self"))
        if progress:
            progress(k + 1, len(chosen))
    log.info("self-training: %d questions from %d anchors", len(out), len(chosen))
    return out
