"""The anchors' own relation paths, grown hop by hop under a score (a beam over prefixes).

Definitions (direction ignored, as `paths.walk`):

* Depth 1: every relation on an anchor's edges (`GraphReader.relations_at`). Depth d + 1:
  each kept prefix P extended by the relations at its ends (at most ``frontier`` ends, in
  id order): the ``extend`` best of them by a score of the relation alone, when one is
  given; a prefix reaching nothing is not extended.
* All candidates of a depth are scored at once (``score``: path -> value; the matcher's
  cosine of the question with the path's words); the best ``width`` are kept, each
  followed from a sample of its prefix's ends (one `follow` per prefix).
* A relation at most ``max_repeat`` (2) times in a row: (r, r) is the anchor's co-members
  (films sharing its director), (r, r, r) walks back out again, a reading no question in
  the training data asks for and one the matcher favours for its extra words.
* Up to ``max_rels`` relations; one more where the path passes a CVT node (Freebase's
  mediator nodes: `film.actor.film` > `film.performance.character` is one step of meaning).
  Ends that are CVT nodes are walked through, never answers: a path whose ends are all CVTs
  is extended but not returned.

Returns the score of every kept path whose sampled ends are not all CVT nodes; `complete`
walks the paths a plan uses in full (`paths.walk`), CVT nodes removed from their ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from talent_core.explore import is_cvt
from talent_core.planning.paths import PathT, walk
from talent_core.store import GraphReader


@dataclass(frozen=True)
class BeamSettings:
    width: int = 8  # prefixes kept per depth
    max_rels: int = 3  # relations per path (one more through a CVT node)
    frontier: int = 200  # sampled end nodes a prefix is followed and extended from
    step_limit: int = 20  # neighbours per node followed while sampling
    extend: int = 4  # relations per prefix scored as its extensions (by `quick`)
    max_repeat: int = 2  # the same relation at most this many times in a row
    walk_limit: int = 2000  # neighbours per node followed for a path's complete ends


@dataclass
class Grown:
    """The paths a beam kept (the score of each that reaches an answerable node), the
    sample of ends each prefix was followed from, the CVT nodes met, and the complete ends
    of the paths `complete` walked."""

    scores: dict[PathT, float] = field(default_factory=dict)
    sample: dict[PathT, list[str]] = field(default_factory=dict)
    cvt: set[str] = field(default_factory=set)
    ends: dict[PathT, set[str]] = field(default_factory=dict)


def grow(store: GraphReader, anchors: Sequence[str],
         score: Callable[[list[PathT]], list[float]], settings: BeamSettings,
         quick: Callable[[list[str]], list[float]] | None = None) -> Grown:
    """The anchors' paths kept by the beam (see the module doc). Prefixes are followed from
    a sample of their ends (the first ``frontier`` in id order, ``step_limit`` neighbours
    each): enough to extend them and to tell CVT ends; `complete` walks the paths a plan
    uses in full. ``quick``: a score of one relation alone; a prefix is then extended by
    its ``extend`` best relations only (a new path text costs an encoder pass, a
    relation's is cached)."""
    out = Grown()
    if not anchors:
        return out
    anchor_set = set(anchors)
    all_cvt: dict[PathT, bool] = {(): False}  # every sampled end of the path is a CVT node
    via_cvt: dict[PathT, bool] = {(): False}  # the path passed a CVT node
    sample = out.sample
    sample[()] = sorted(anchor_set)
    candidates: list[PathT] = [(r,) for r in sorted(store.relations_at(list(anchors)))]
    depth = 1
    while candidates:
        scored = dict(zip(candidates, score(candidates)))
        keep = sorted(scored, key=lambda t: (-scored[t], len(t), t))[: settings.width]
        for t in keep:
            got = store.follow(sample[t[:-1]], t[-1], settings.step_limit)
            sample[t] = sorted({m for _, m in got} - anchor_set)[: settings.frontier]
        ids = sorted({n for t in keep for n in sample[t]} - out.cvt)
        out.cvt |= {e.id for e in store.entities_by_id(ids) if is_cvt(e.name)} if ids else set()
        nxt: list[PathT] = []
        for t in keep:
            if not sample[t]:
                continue
            all_cvt[t] = set(sample[t]) <= out.cvt
            via_cvt[t] = via_cvt[t[:-1]] or all_cvt[t[:-1]]
            if not all_cvt[t]:
                out.scores[t] = scored[t]
            if depth < settings.max_rels + (1 if via_cvt[t] or all_cvt[t] else 0):
                rels = sorted(r for r in store.relations_at(sample[t])
                              if t[-settings.max_repeat:] != (r,) * settings.max_repeat)
                if quick is not None and len(rels) > settings.extend:
                    value = dict(zip(rels, quick(rels)))
                    rels = sorted(rels, key=lambda r: (-value[r], r))[: settings.extend]
                nxt.extend((*t, r) for r in rels)
        candidates = list(dict.fromkeys(nxt))
        depth += 1
    return out


def complete(store: GraphReader, anchors: Sequence[str], grown: Grown,
             paths: Sequence[PathT], walk_limit: int) -> None:
    """Walk ``paths`` in full from the anchors (`paths.walk`) into ``grown.ends``, CVT nodes
    removed (their names looked up where the beam met any)."""
    todo = [t for t in paths if t not in grown.ends]
    if not todo:
        return
    walked, _ = walk(store.follow, anchors, todo, limit=walk_limit)
    if grown.cvt:
        ids = sorted({n for e in walked.values() for n in e} - grown.cvt)
        grown.cvt |= {e.id for e in store.entities_by_id(ids) if is_cvt(e.name)} if ids else set()
    for t in todo:
        grown.ends[t] = walked[t] - grown.cvt
