"""Questions written from a loaded store's own paths, to adapt the matcher to a KG nobody
labelled (`talent train planner --self`).

For ``anchors`` entities sampled from the store (seeded, over its id pages): the anchor's
own paths of 1..3 relations (`beam.grow` under a random score: a random sample of what the
anchor really has, CVT nodes walked through), one of each length where it has one; each
path written as a question from templates over its relations' words (`paths`'
`readable_relation`), the anchor's name removed as the planner removes it. The anchor's
other sampled paths are the pair's hard negatives. No answer and no label of any question is
read: only the store.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from talent_core.explore import is_cvt
from talent_core.planning.beam import BeamSettings, grow
from talent_core.planning.matcher import Pair, readable_relation
from talent_core.planning.paths import PathT
from talent_core.retrieval.relations import strip_mentions
from talent_core.store import GraphReader

log = logging.getLogger(__name__)

ONE_HOP = ("what is the {0} of {x}", "which {0} does {x} have", "{x} {0}",
           "tell me the {0} of {x}")
CHAIN = ("what is the {rev} of {x}", "{x} {fwd}", "which {last} belongs to the {rev_rest} of {x}")


def write_question(path: PathT, name: str, rng: random.Random) -> str:
    """One templated question asking for ``path`` from the entity called ``name``."""
    words = [readable_relation(r) for r in path]
    if len(words) == 1:
        return rng.choice(ONE_HOP).format(words[0], x=name)
    rev = " of the ".join(reversed(words))
    template = rng.choice(CHAIN)
    return template.format(rev=rev, fwd=" ".join(words), last=words[-1],
                           rev_rest=" of the ".join(reversed(words[:-1])), x=name)


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


def store_pairs(store: GraphReader, anchors: int = 600, seed: int = 0,
                progress: Callable[[int, int], None] | None = None) -> list[Pair]:
    """Synthetic (question, path) pairs from the store's paths (see the module doc)."""
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
                text = strip_mentions(write_question(t, name, rng), [name])
                out.append(Pair(text, [t], [o for o in paths if o != t], "self"))
        if progress:
            progress(k + 1, len(chosen))
    log.info("self-training: %d questions from %d anchors", len(out), len(chosen))
    return out
