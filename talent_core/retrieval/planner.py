"""Relation-path planning: which relation path from its anchors does the question ask for?

A KGQA question names a path of relations from its topic entity to its answers ("who
directed the films starring [X]": starred_actors, directed_by). RoG (Luo et al. 2024,
"Reasoning on Graphs") plans such paths with a fine-tuned LLM and answers from the nodes they
reach. Here the planner is a softmax classifier over the question's sentence embedding, and
its plan re-weights the LLM generator's ranked answers; it is beyond the TaLenT paper (the
paper's free decoding never reads it) and is off with ``--planner none``.

Definitions:

* A *path type* T = (r_1, .., r_L), L <= ``max_len``: relation names followed from the
  anchors, direction ignored, never passing through or ending at an anchor (as
  `paths.expand_paths`). ends(T): the nodes it reaches.
* Training label of a question (`label_types`): the path types whose ends, in the anchors'
  ``max_len``-hop neighbourhood (store caps), have the highest Jaccard similarity with the
  gold answers; of tied types the shortest ones share the target mass (a film's year is
  reached by (release_year) and again by (release_year, release_year, release_year)).
  Questions no type reaches are skipped.
* Model: p(T | q) = softmax(W x + b) over the path types seen in training, x = the unit
  sentence embedding of the question with the anchors' mentions removed (`plan_text`).
  Trained by cross-entropy against the soft labels (Adam, weight decay, full batch).
* Plan of a question (`planning.plan_paths`), over the paths its anchors really have: of
  the trained types whose first relation an anchor has (`trained_types`, the likeliest
  ``consider``), those whose walk reaches a node, p renormalised over them; then the most
  probable, in order, until their mass reaches ``mass`` (at most ``top``; `top_plan`).
  (`PlannerModel.plan`, the same without the anchors, serves training's path accuracy.)
* Zero-shot planner (`zero_shot_planner`; a KG no trained planner fits, or anchors where no
  trained type starts): the anchors' own types up to ``anchor_hops`` (one capped expansion,
  plus every relation at an anchor), scored s(T) = lambda cos(x, e(words(T))) with words(T)
  the relations made readable (`readable_relation`) and lambda = 20 (a softmax
  temperature of 0.05, not tuned); the likeliest 10 are walked, types reaching only Freebase
  CVT nodes dropped, then the plan as above. A trained planner's file may set a
  ``similarity_weight`` lambda to add the same term to its log p (0 in the shipped ones).
* Planned ends join S (`planning.join_plan`): the planned types' ends with the hops that
  reach them, likeliest type first, at most ``plan_join`` new nodes (a retrieval setting).
* Node prior (`node_prior`): pi(c) = sum over planned T of p(T | q) [c in ends(T)], with
  ends(T) walked in the store (`walk`: one `GraphReader.follow` call per distinct prefix,
  at most ``limit`` neighbours per node).
* Candidate answers: the generator's context nodes as before, joined by the planned paths'
  ends outside it (likeliest first, at most ``join_limit``; `answer.join_planned`):
  RoG answers from the ends of its planned paths, and the retriever's V̂ or S may have left
  the answer out.
* Ranked answers (`rescore`): score(c) = log p_LM(c) + w log(pi(c) + eps), w and eps from
  the planner's file (w tuned on validation questions); the answer set is then chosen by
  the generator's margin as before.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from talent_core.errors import PlannerError
from talent_core.models import Edge, PlannedPath
from talent_core.retrieval.relations import strip_mentions

log = logging.getLogger(__name__)

PathT = tuple[str, ...]
Follow = Callable[[Sequence[str], str, int], list[tuple[str, str]]]

FORMAT = "talent-path-planner/1"
WEIGHTS_FILE = "planner.npz"
META_FILE = "planner.json"


def plan_text(question: str, anchor_names: Iterable[str]) -> str:
    """What the planner embeds: the question without its anchors' mentions (the path a
    question asks for does not depend on which film it names)."""
    return strip_mentions(question, anchor_names)


# --- pure graph functions -----------------------------------------------------------------


def type_ends(edges: Sequence[Edge], anchors: Iterable[str], max_len: int) -> dict[PathT, set[str]]:
    """ends(T) for every path type of length 1..``max_len`` over ``edges`` (direction
    ignored) from ``anchors``; walks never pass through or end at an anchor."""
    anchor_set = set(anchors)
    adj: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for e in edges:
        adj[e.src].append((e.rel, e.dst))
        adj[e.dst].append((e.rel, e.src))
    out: dict[PathT, set[str]] = {}
    layer: dict[PathT, set[str]] = {(): anchor_set}
    for _ in range(max_len):
        nxt: dict[PathT, set[str]] = defaultdict(set)
        for t, nodes in layer.items():
            for n in nodes:
                for rel, m in adj.get(n, ()):
                    if m not in anchor_set:
                        nxt[(*t, rel)].add(m)
        out.update(nxt)
        layer = nxt
    return out


def anchor_types(edges: Sequence[Edge], anchors: Iterable[str], max_len: int,
                 skip: set[str]) -> dict[PathT, set[str]]:
    """The anchors' own path types that reach an answerable node: `type_ends` with the
    ``skip`` nodes (Freebase CVTs) walked through but removed from the ends, a type left
    with no end dropped."""
    out: dict[PathT, set[str]] = {}
    for t, e in type_ends(edges, anchors, max_len).items():
        if e - skip:
            out[t] = e - skip
    return out


def trained_types(model: PlannerModel, p: np.ndarray, first: Iterable[str],
                  known: set[str]) -> list[PathT]:
    """The trained types that can start at the anchors, likeliest first: those of ``known``
    relations whose first relation the anchors have (``first``)."""
    first = set(first)
    return [t for t in (model.paths[i] for i in np.argsort(-p, kind="stable").tolist())
            if t[0] in first and set(t) <= known]


def label_types(ends: Mapping[PathT, set[str]], answers: set[str]) -> dict[PathT, float]:
    """Soft target over path types: the best-Jaccard types with ``answers`` share mass 1
    ({} when no type reaches an answer)."""
    best: list[PathT] = []
    best_j = 0.0
    for t, e in ends.items():
        inter = len(e & answers)
        if not inter:
            continue
        j = inter / len(e | answers)
        if j > best_j + 1e-12:
            best, best_j = [t], j
        elif abs(j - best_j) <= 1e-12:
            best.append(t)
    if best:  # (r) and (r, r, r) both reach a film's year: the shortest explanation wins
        shortest = min(len(t) for t in best)
        best = [t for t in best if len(t) == shortest]
    return {t: 1.0 / len(best) for t in best}


def walk(follow: Follow, anchors: Sequence[str], paths: Iterable[PathT], limit: int,
         max_frontier: int = 5000) -> tuple[dict[PathT, set[str]], bool]:
    """(ends of each path, whether a cap cut a walk): one ``follow`` call per distinct
    prefix; a frontier past ``max_frontier`` nodes is cut (in id order)."""
    anchor_set = set(anchors)
    reached: dict[PathT, set[str]] = {(): set(anchors)}
    truncated = False
    for path in paths:
        for d in range(1, len(path) + 1):
            prefix = path[:d]
            if prefix in reached:
                continue
            frontier = sorted(reached[path[: d - 1]])
            if len(frontier) > max_frontier:
                frontier, truncated = frontier[:max_frontier], True
            got: set[str] = set()
            per_node: dict[str, int] = defaultdict(int)
            for src, dst in follow(frontier, path[d - 1], limit + 1) if frontier else []:
                per_node[src] += 1
                if per_node[src] > limit:
                    truncated = True
                    continue
                if dst not in anchor_set:
                    got.add(dst)
            reached[prefix] = got
    return {p: reached[p] for p in paths}, truncated


def node_prior(plan: Sequence[tuple[PathT, float]], ends: Mapping[PathT, set[str]]
               ) -> dict[str, float]:
    """pi(c) = sum of p(T) over the planned types T whose ends hold c."""
    prior: dict[str, float] = defaultdict(float)
    for path, p in plan:
        for node in ends.get(path, ()):
            prior[node] += p
    return dict(prior)


def node_paths(plan: Sequence[tuple[PathT, float]], ends: Mapping[PathT, set[str]]
               ) -> dict[str, PathT]:
    """The likeliest planned type reaching each node (the answer's evidence)."""
    out: dict[str, PathT] = {}
    for path, _ in sorted(plan, key=lambda x: -x[1]):
        for node in ends.get(path, ()):
            out.setdefault(node, path)
    return out


def readable_relation(rel: str) -> str:
    """A relation name as words for the zero-shot planner: a Freebase name keeps its type
    and property (`people.person.place_of_birth` -> "person place of birth"), another name
    its words (`directed_by` -> "directed by")."""
    return " ".join(p.replace("_", " ") for p in rel.split(".")[-2:]).strip()


def path_words(path: PathT) -> str:
    """A path type as words: its relations made readable, in order."""
    return ", ".join(readable_relation(r) for r in path)


def plan_scores(log_prior: Mapping[PathT, float], similarity: Mapping[PathT, float],
                weight: float) -> dict[PathT, float]:
    """score(T) = log p(T | q) + ``weight`` * cos(q, words(T)) over the types in
    ``similarity`` (the anchors' own types); a type the trained planner does not know, or
    no trained planner, has log p = 0 (so the zero-shot planner is the similarity alone)."""
    return {t: log_prior.get(t, 0.0) + weight * s for t, s in similarity.items()}


def top_plan(scores: Mapping[PathT, float], mass: float = 0.95, top: int = 5
             ) -> list[tuple[PathT, float]]:
    """softmax(scores) truncated like `PlannerModel.plan`: the likeliest types until their
    mass reaches ``mass`` (at most ``top``), renormalised; ties in type order."""
    if not scores:
        return []
    types = sorted(scores, key=lambda t: (-scores[t], len(t), t))
    z = np.array([scores[t] for t in types], dtype=np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    keep: list[tuple[PathT, float]] = []
    total = 0.0
    for t, q in zip(types, p.tolist()):
        keep.append((t, q))
        total += q
        if total >= mass or len(keep) >= top:
            break
    return [(t, q / total) for t, q in keep]


def rescore(score: float, prior: float, weight: float, eps: float) -> float:
    """The ranked answer score with the plan: log p_LM + w log(pi + eps)."""
    return score + weight * math.log(prior + eps)


# --- the model ----------------------------------------------------------------------------


@dataclass
class PlannerModel:
    paths: list[PathT]
    weight: np.ndarray  # (C, d)
    bias: np.ndarray  # (C,)
    meta: dict[str, Any] = field(default_factory=dict)
    # other bundled planners the store also fits, with their known relations
    # (`resolve_planner`); `choose_planner` picks among them per question
    alternatives: list[tuple[PlannerModel, set[str]]] = field(default_factory=list, repr=False)

    @property
    def relations(self) -> set[str]:
        return {r for p in self.paths for r in p}

    @cached_property
    def path_index(self) -> dict[PathT, int]:
        """Each trained path type's row in `probabilities` (built once, not per question)."""
        return {t: i for i, t in enumerate(self.paths)}

    @property
    def answer_weight(self) -> float:
        return float(self.meta.get("answer_weight", 5.0))

    @property
    def eps(self) -> float:
        return float(self.meta.get("eps", 1e-3))

    @property
    def walk_limit(self) -> int:
        return int(self.meta.get("walk_limit", 2000))

    @property
    def zero_shot(self) -> bool:
        """No trained types: plans from the anchors' own relation paths by similarity."""
        return not self.paths

    @property
    def kind(self) -> str:
        """How it plans, as the UI and `talent ask` say it: "trained (name)" / "zero-shot"."""
        return "zero-shot" if self.zero_shot else f"trained ({self.meta.get('name', '?')})"

    @property
    def similarity_weight(self) -> float:
        """Weight of cos(question, path words) in `plan_scores` (zero-shot: its inverse
        temperature; trained: 0 unless its file sets it)."""
        return float(self.meta.get("similarity_weight", 20.0 if self.zero_shot else 0.0))

    @property
    def anchor_hops(self) -> int:
        """Depth of the anchors' own path types the zero-shot planner enumerates."""
        return int(self.meta.get("anchor_hops", 2))

    @property
    def consider(self) -> int:
        """Trained types walked per question: the likeliest that start at an anchor (none
        reaching a node: twice as many more)."""
        return int(self.meta.get("consider", 20))

    @property
    def join_limit(self) -> int:
        """Planned-path ends that join the candidate answers (0: none)."""
        return int(self.meta.get("join_limit", 50))

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """p(T | q) for one vector ``x`` (d,) or a batch (n, d) (rows made unit length)."""
        x = np.asarray(x, dtype=np.float32)
        x = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
        z = x @ self.weight.T + self.bias
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)

    def plan(self, x: np.ndarray, mass: float = 0.95, top: int = 5,
             known: set[str] | None = None) -> list[tuple[PathT, float]]:
        """The planned types with their probabilities (see the module doc); ``known``: the
        store's relations (types with another relation are dropped)."""
        p = self.probabilities(x)
        order = np.argsort(-p, kind="stable")
        keep: list[tuple[PathT, float]] = []
        total = 0.0
        for i in order.tolist():
            path = self.paths[i]
            if known is not None and not set(path) <= known:
                continue
            keep.append((path, float(p[i])))
            total += float(p[i])
            if total >= mass or len(keep) >= top:
                break
        norm = sum(q for _, q in keep)
        return [(t, q / norm) for t, q in keep] if norm > 0 else []

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / (WEIGHTS_FILE + ".tmp.npz")
        np.savez(tmp, weight=self.weight.astype(np.float32), bias=self.bias.astype(np.float32))
        tmp.replace(directory / WEIGHTS_FILE)
        meta = {**self.meta, "format": FORMAT, "paths": [list(p) for p in self.paths]}
        tmp_meta = directory / (META_FILE + ".tmp")
        tmp_meta.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        tmp_meta.replace(directory / META_FILE)

    @classmethod
    def load(cls, directory: Path) -> PlannerModel:
        meta_path, w_path = directory / META_FILE, directory / WEIGHTS_FILE
        if not meta_path.is_file() or not w_path.is_file():
            raise PlannerError(f"{directory}: not a planner directory (needs {META_FILE} and "
                               f"{WEIGHTS_FILE}; train one with `talent train planner`)")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            with np.load(w_path) as z:
                weight, bias = z["weight"], z["bias"]
        except (ValueError, KeyError, OSError) as e:
            raise PlannerError(f"{directory}: unreadable planner: {e}") from None
        if meta.get("format") != FORMAT:
            raise PlannerError(f"{meta_path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        paths = [tuple(p) for p in meta.pop("paths", [])]
        if weight.shape[0] != len(paths) or bias.shape != (len(paths),):
            raise PlannerError(f"{directory}: {len(paths)} paths but weights {weight.shape}")
        return cls(paths=paths, weight=weight, bias=bias, meta=meta)


def fit(x: np.ndarray, targets: np.ndarray, epochs: int = 300, lr: float = 0.01,
        weight_decay: float = 1e-5, seed: int = 0, scale: float = 10.0
        ) -> tuple[np.ndarray, np.ndarray, float]:
    """Softmax regression by full-batch Adam on soft targets: (W, b, final loss). The unit
    inputs are multiplied by ``scale`` while training (folded into the returned W)."""
    import torch

    torch.manual_seed(seed)
    xt = torch.tensor(np.asarray(x, dtype=np.float32) * scale)
    yt = torch.tensor(np.asarray(targets, dtype=np.float32))
    layer = torch.nn.Linear(xt.shape[1], yt.shape[1])
    opt = torch.optim.Adam(layer.parameters(), lr=lr, weight_decay=weight_decay)
    loss = torch.tensor(0.0)
    for _ in range(epochs):
        opt.zero_grad()
        loss = -(yt * torch.log_softmax(layer(xt), dim=-1)).sum(dim=-1).mean()
        loss.backward()
        opt.step()
    return (layer.weight.detach().numpy() * scale, layer.bias.detach().numpy().copy(),
            float(loss.item()))


def planned(plan: Sequence[tuple[PathT, float]], ends: Mapping[PathT, set[str]]
            ) -> list[PlannedPath]:
    """The plan as the Answer reports it."""
    return [PlannedPath(rels=list(t), prob=round(p, 4), ends=len(ends.get(t, ())))
            for t, p in plan]


def zero_shot_planner(embedding_model: str) -> PlannerModel:
    """The planner of a KG no trained planner fits: the anchors' relation paths ranked by
    their words' similarity to the question (`plan_scores`)."""
    return PlannerModel(paths=[], weight=np.zeros((0, 0), np.float32),
                        bias=np.zeros(0, np.float32),
                        meta={"name": "zero-shot", "embedding_model": embedding_model,
                              "answer_weight": 5.0})


BUNDLED = Path(__file__).resolve().parents[1] / "adapters" / "planner"


def resolve_planner(spec: str, store: Any, embedding_model: str
                    ) -> tuple[PlannerModel | None, set[str]]:
    """(planner, the store's relations among its paths') for a --planner choice: "none";
    "zero-shot" (`zero_shot_planner`); "bundled" (the shipped planner for this embedding
    model whose relations the store holds most of, the other fitting ones as its
    `alternatives`; none fits: the zero-shot planner); or a directory (raises
    `PlannerError` when unusable; none of its paths in the store: off, logged)."""
    if spec == "none":
        return None, set()
    if spec == "zero-shot":
        return zero_shot_planner(embedding_model), set()
    if spec == "bundled":
        dirs = sorted(d for d in BUNDLED.glob("*") if (d / META_FILE).is_file())
        models = [m for m in (PlannerModel.load(d) for d in dirs)
                  if m.meta.get("embedding_model") == embedding_model]
    else:
        model = PlannerModel.load(Path(spec))
        if model.meta.get("embedding_model") != embedding_model:
            raise PlannerError(f"{spec}: trained on embeddings of "
                               f"{model.meta.get('embedding_model')!r}, the store uses "
                               f"{embedding_model!r}")
        models = [model]
    fitting: list[tuple[PlannerModel, set[str]]] = []
    for m in models:
        known = set(store.existing_relations(sorted(m.relations)))
        if any(set(p) <= known for p in m.paths):
            fitting.append((m, known))
        else:
            log.info("planner %s: the store holds none of its relation paths; not used",
                     m.meta.get("name", "?"))
    if not fitting:
        return (zero_shot_planner(embedding_model), set()) if spec == "bundled" else (None, set())
    fitting.sort(key=lambda x: -len(x[1]))  # stable: the first of equals stays first
    best, known = fitting[0]
    best.alternatives = fitting[1:]
    return best, known


def choose_planner(planner: PlannerModel, known: set[str], anchor_relations: set[str]
                   ) -> tuple[PlannerModel, set[str]]:
    """Per question, on a store several planners fit (a MetaQA and a Freebase KG loaded
    together): the one whose known relations the anchors' edges use most (ties and no
    anchor edges: ``planner``, the store's best fit)."""
    best, best_n = (planner, known), len(known & anchor_relations)
    for alt, alt_known in planner.alternatives:
        n = len(alt_known & anchor_relations)
        if n > best_n:
            best, best_n = (alt, alt_known), n
    return best
