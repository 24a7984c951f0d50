"""SubgraphRAG's retriever (Li, Miao & Li 2024, "Simple is Effective: The Roles of Graphs and
Large Language Models in Knowledge-Graph-Based Retrieval-Augmented Generation", §3.1):
a lightweight MLP scores every candidate triple in parallel from text embeddings plus a
directional distance encoding (DDE) of the topic entities; the top-K triples are the
evidence subgraph.

    question -> seeds -> n-hop neighbourhood (Cypher) -> features -> MLP -> top-K triples

Definitions, as in the paper and the authors' code (github.com/Graph-COM/SubgraphRAG,
retrieve/src/model/retriever.py and retrieve/src/dataset/retriever.py):

* Candidate triples: every triple (h, r, t) of the question's neighbourhood, kept directed.
* Topic indicator: a one-hot (not-topic, topic) per entity; topic entities = the anchors.
* DDE (`dde`): rounds of MEAN aggregation over in-neighbours starting from the one-hot,
  x_{k+1}[v] = mean over triples (u -> v) of x_k[u] (0 without in-edges; each of several
  parallel triples counts, as in PyG's mean aggregation), `rounds` times forward on
  (h -> t) and, again from the one-hot, `reverse_rounds` times on the reversed triples
  (t -> h). Defaults 2 + 2 (their WebQSP / CWQ configuration). Entity structure =
  [one-hot, fwd_1, .., fwd_R, rev_1, .., rev_R', und_1, .., und_U] (U = 0 unless a
  checkpoint asks for undirected rounds: deviation 11).
* Entity feature = [text embedding, structure]; entities without meaningful text (Freebase
  CVT/mid names `m.0xx`/`g.1xx`, and entities without a stored vector) share ONE learned
  embedding (`non_text`) in place of the text embedding.
* Triple feature = [q, h_e, r, t_e] (question vector, head feature, relation vector, tail
  feature) -> Linear(4d + 2 S, hidden = d) -> ReLU -> Linear(hidden, 1): one logit per
  triple; the score is its sigmoid.
* Loss (training/subgraphrag.py): binary cross-entropy with logits over all triples of one
  question per step, Adam (lr 1e-3).
* Pseudo-labels (`pseudo_labels`): a triple is positive when it lies on a shortest path
  between a topic entity and an answer entity: for each (topic q, answer a) pair, the
  directed shortest paths q -> a and a -> q; when both directions have paths only those of
  the smaller length are kept. Questions without any positive triple are not trained on
  (their `skip_no_path`).

Deviations (all deliberate, and small):

1. Candidate triples come from the store's n-hop neighbourhood of the anchors
   (`neighbourhood.neighbourhood`, `RetrievalConfig.hops` and fan-out caps) instead of
   the RoG per-question subgraphs; a capped neighbourhood is flagged `truncated`.
2. Pseudo-labels, no directed path: when neither direction has a path for ANY (topic,
   answer) pair of the question, the undirected shortest paths are used instead (the
   paper would skip the question). MetaQA stores each fact once (film -> person), so
   its 2- and 3-hop answers are reachable only over mixed-direction paths and would
   otherwise never be trained on.
3. Pseudo-labels, parallel triples: every triple between two consecutive path entities is
   labelled (the authors' networkx DiGraph keeps one arbitrary triple per entity pair).
   The union of all shortest paths is computed from BFS distances (scipy) instead of
   enumerating the paths; same set, without the exponential enumeration.
4. Answers are matched to neighbourhood entities by normalised name (`text.answer_key`),
   from the question file's answers plus RoG `a_entity`.
5. The first Linear is applied factored, W [q; h; r; t] = W_q q + W_h h + W_r r + W_t t,
   with the entity and relation projections computed once per entity / relation and then
   gathered per triple: the same function, fewer FLOPs on 10k-triple neighbourhoods.
6. Checkpoint selection: best validation ANSWER recall at K = 100 (`select_k`; ties:
   triple recall) where the authors select by triple recall at 100; training stops after
   `patience` epochs without improvement (default 5; theirs 10), at `epochs`, or before an
   epoch that would overrun `max_minutes` (CPU budget). Without a validation file a
   seeded 10 % of the training questions is held out.
7. Text embeddings: the store's vectors of the loaded embedder (default all-MiniLM-L6-v2,
   384-d; the paper: gte-large-en-v1.5, 1024-d); relations are embedded as the store
   embedded them.
8. Output nodes: the endpoints of the kept triples (the anchors when no triple is kept);
   a node's prize is the best score of its kept triples, an edge's prize its score.
   Equal scores keep the neighbourhood's order.
9. Topic entities are the pipeline's anchors: the given topics (MetaQA brackets, RoG
   q_entity) or, for a typed question without any, its name / fulltext / vector anchors
   (`seeds.py`). Text-less entities are recognised by the Freebase id pattern (the authors
   ship a list of such ids per dataset).
10. Validation metrics cover every validation question (answer recall over those with an
   answer in the neighbourhood); the authors drop validation questions without a path.
11. Optional undirected DDE rounds (`undirected_rounds`, a checkpoint setting, 0 = the
   paper's features exactly): the same mean aggregation over the triples taken both ways.
   Directed rounds carry nothing past one hop on a KG that stores each fact once from one
   side (MetaQA: film -> person / value, so a topic film's second-hop films have no
   in-edges to follow); undirected rounds reach 2- and 3-hop entities, and the mean
   divides by degree, so a film reached through a hub (a year, a genre) scores far below
   one reached through a director (deviation 2 is the same fix for the pseudo-labels).

Training: `talent_core.training.subgraphrag` (`talent train subgraphrag`). The shipped
scorer for the default embedder: `talent_core/adapters/subgraphrag/all-minilm-l6-v2/` (its
README: data, metrics, cost).

Timings: `neighbourhood` (the expansion and the store's entity / relation vectors),
`score` (DDE, the MLP, top-K). No Cypher here: every store access is a `GraphReader` call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import sparse
from torch import nn

from talent_core.embedding_common import MINILM_ALIASES
from talent_core.errors import ScorerError
from talent_core.models import Candidate, CandidateEdge, CandidateNode
from talent_core.retrieval.neighbourhood import (
    Region,
    entity_vectors,
    ms_since,
    region,
    vector_rows,
)
from talent_core.retrieval.plugin import RetrievalContext
from talent_core.store.base import GraphReader

log = logging.getLogger(__name__)

FORMAT = "talent-subgraphrag/1"
WEIGHTS_FILE = "scorer.safetensors"
META_FILE = "scorer.json"
BUNDLED_ROOT = Path(__file__).resolve().parents[1] / "adapters" / "subgraphrag"
NON_TEXT = re.compile(r"^[mg]\.[0-9a-z_]+$")  # Freebase mids / CVT nodes: no usable text


# --- one question's triples ----------------------------------------------------------------


# --- directional distance encoding ---------------------------------------------------------


def _mean_step(adj: sparse.csr_matrix, deg: np.ndarray, x: np.ndarray) -> np.ndarray:
    out = np.asarray(adj @ x, dtype=np.float32)
    nz = deg > 0
    out[nz] /= deg[nz, None]
    return out


def dde(
    head: np.ndarray, tail: np.ndarray, topic: np.ndarray, rounds: int = 2,
    reverse_rounds: int = 2, undirected_rounds: int = 0,
) -> list[np.ndarray]:
    """The DDE rounds: `rounds` forward mean-aggregations (over triples h -> t) of the
    (not-topic, topic) one-hot, then `reverse_rounds` over the reversed triples, as the
    authors' PEConv layers produce them, then `undirected_rounds` over both (deviation 11);
    a list of (N, 2) arrays in that order."""
    n = len(topic)
    x0 = np.stack([~topic, topic], axis=1).astype(np.float32)
    ones = np.ones(len(head), dtype=np.float32)
    fwd = sparse.csr_matrix((ones, (tail, head)), shape=(n, n))  # row v sums its in-edges u->v
    rev = sparse.csr_matrix((ones, (head, tail)), shape=(n, n))
    out = []
    both = (fwd + rev).tocsr() if undirected_rounds else fwd
    for adj, k in ((fwd, rounds), (rev, reverse_rounds), (both, undirected_rounds)):
        deg = np.asarray(adj.sum(axis=1), dtype=np.float32).ravel()
        x = x0
        for _ in range(k):
            x = _mean_step(adj, deg, x)
            out.append(x)
    return out


def structure_features(
    graph: Region, rounds: int = 2, reverse_rounds: int = 2, topic_pe: bool = True,
    undirected_rounds: int = 0,
) -> np.ndarray:
    """(N, S) per entity: [topic one-hot (if topic_pe), DDE rounds]."""
    parts = dde(graph.head, graph.tail, graph.topic, rounds, reverse_rounds, undirected_rounds)
    if topic_pe:
        parts.insert(0, np.stack([~graph.topic, graph.topic], axis=1).astype(np.float32))
    if not parts:
        return np.zeros((graph.n, 0), dtype=np.float32)
    return np.concatenate(parts, axis=1).astype(np.float32)


def structure_size(rounds: int, reverse_rounds: int, topic_pe: bool,
                   undirected_rounds: int = 0) -> int:
    return 2 * (rounds + reverse_rounds + undirected_rounds) + (2 if topic_pe else 0)


# --- pseudo-labels -------------------------------------------------------------------------


def _bfs(adj: sparse.csr_matrix, sources: Sequence[int]) -> np.ndarray:
    """(len(sources), N) unweighted shortest-path lengths (inf: unreachable)."""
    from scipy.sparse.csgraph import shortest_path

    if not len(sources):
        return np.zeros((0, adj.shape[0]))
    return np.atleast_2d(shortest_path(adj, directed=True, unweighted=True, indices=list(sources)))


def pseudo_labels(
    head: np.ndarray, tail: np.ndarray, n: int, topics: Sequence[int], answers: Sequence[int]
) -> tuple[np.ndarray, str]:
    """(labels (E,) bool, kind): the triples on shortest topic-answer paths.

    Per (topic q, answer a != q): the directed shortest paths q -> a and a -> q, the
    shorter direction only when both exist (the authors' rule); kind "directed". When no
    pair has a directed path: the undirected shortest paths (deviation 2), kind
    "undirected". "none": no path at all (the question is not trained on)."""
    e = len(head)
    labels = np.zeros(e, dtype=bool)
    topics = sorted(set(int(t) for t in topics))
    answers = sorted(set(int(a) for a in answers))
    if not e or not topics or not answers:
        return labels, "none"
    ones = np.ones(e)
    g = sparse.csr_matrix((ones, (head, tail)), shape=(n, n))
    gt = g.T.tocsr()
    from_q, to_q = _bfs(g, topics), _bfs(gt, topics)  # d(q, v), d(v, q)
    from_a, to_a = _bfs(g, answers), _bfs(gt, answers)  # d(a, v), d(v, a)
    found = False
    for i, q in enumerate(topics):
        for j, a in enumerate(answers):
            if q == a:
                continue
            lf, lb = from_q[i, a], from_a[j, q]
            best = min(lf, lb)
            if not np.isfinite(best):
                continue
            found = True
            if lf == best:  # edges h->t on a shortest q -> a path
                labels |= from_q[i, head] + 1 + to_a[j, tail] == lf
            if lb == best:  # edges on a shortest a -> q path
                labels |= from_a[j, head] + 1 + to_q[i, tail] == lb
    if found:
        return labels, "directed"
    u = (g + gt).tocsr()
    du_q, du_a = _bfs(u, topics), _bfs(u, answers)
    for i, q in enumerate(topics):
        for j, a in enumerate(answers):
            length = du_q[i, a]
            if q == a or not np.isfinite(length):
                continue
            found = True
            labels |= du_q[i, head] + 1 + du_a[j, tail] == length
            labels |= du_q[i, tail] + 1 + du_a[j, head] == length
    return labels, ("undirected" if found else "none")


# --- features from the store ---------------------------------------------------------------


@dataclass
class Features:
    """Model inputs of one question (numpy; `TripleScorer.tensors` converts)."""

    question: np.ndarray  # (d,)
    entity: np.ndarray  # (N, d) text vectors (zeros where non_text)
    non_text: np.ndarray  # (N,) bool
    structure: np.ndarray  # (N, S)
    relation: np.ndarray  # (R, d)
    head: np.ndarray
    rel: np.ndarray
    tail: np.ndarray


def _check_dimensions(question: int, stored: int | None, meta: dict[str, Any] | None) -> None:
    """The scorer's, the embedder's and the store's dimensions must agree."""
    want = int(meta["dimension"]) if meta is not None else question
    source = f"the SubgraphRAG scorer ({meta.get('embedder')})" if meta else "the embedder"
    for what, got in (("the embedder's question vectors", question),
                      ("the store's entity/relation vectors", stored)):
        if got is not None and got != want:
            raise ScorerError(
                f"{source} works on {want}-d embeddings, but {what} are {got}-d: use the "
                "embedder the KG was loaded with, or train a scorer for it (`talent train "
                "subgraphrag ... -o DIR`) and pass --scorer DIR"
            )


def store_features(
    store: GraphReader,
    graph: Region,
    question_vector: np.ndarray,
    rounds: int = 2,
    reverse_rounds: int = 2,
    topic_pe: bool = True,
    meta: dict[str, Any] | None = None,
    undirected_rounds: int = 0,
    embedder: Any = None,
) -> Features:
    """Features of `graph` from the store's entity / relation vectors (one call each; an
    entity stored without one embedded by ``embedder``, `neighbourhood.entity_vectors`);
    `meta` (a scorer's) is checked against the dimensions (ScorerError)."""
    q = np.asarray(question_vector, dtype=np.float32).ravel()
    d = q.size
    evec = entity_vectors(store, embedder, graph.ids, graph.names)
    rvec = store.relation_vectors(graph.relations) if graph.relations else {}
    stored = next((v.size for v in (*evec.values(), *rvec.values())), None)
    _check_dimensions(d, stored, meta)
    entity, found = vector_rows(graph.ids, evec, d)
    non_text = ~found | np.array([bool(NON_TEXT.match(n)) for n in graph.names], dtype=bool)
    entity[non_text] = 0.0
    relation, rfound = vector_rows(graph.relations, rvec, d)
    missing = int((~rfound).sum())
    if missing:
        log.debug("%d relations without a stored vector (zeros)", missing)
    return Features(q, entity, non_text,
                    structure_features(graph, rounds, reverse_rounds, topic_pe,
                                       undirected_rounds),
                    relation, graph.head, graph.rel, graph.tail)


# --- the scorer ----------------------------------------------------------------------------


class TripleScorer(nn.Module):
    """SubgraphRAG's MLP over [q, h_e, r, t_e]; `forward` returns one logit a triple."""

    def __init__(self, dim: int, rounds: int = 2, reverse_rounds: int = 2,
                 topic_pe: bool = True, hidden: int | None = None, undirected_rounds: int = 0):
        super().__init__()
        self.dim = int(dim)
        self.rounds, self.reverse_rounds, self.topic_pe = rounds, reverse_rounds, topic_pe
        self.undirected_rounds = int(undirected_rounds)
        self.struct = structure_size(rounds, reverse_rounds, topic_pe, self.undirected_rounds)
        self.hidden = int(hidden or dim)
        self.non_text = nn.Embedding(1, self.dim)  # the one embedding of text-less entities
        ent = self.dim + self.struct
        self.pred = nn.Sequential(
            nn.Linear(2 * self.dim + 2 * ent, self.hidden), nn.ReLU(), nn.Linear(self.hidden, 1)
        )

    def forward(self, question, entity, non_text, structure, relation, head, rel, tail):
        d, ent, hid = self.dim, self.dim + self.struct, self.hidden
        h_e = torch.where(non_text[:, None], self.non_text.weight[0].expand_as(entity), entity)
        h_e = torch.cat([h_e, structure], dim=1)
        w, b = self.pred[0].weight, self.pred[0].bias  # columns: [q | h_e | r | t_e]
        w_q, w_h = w[:, :d], w[:, d:d + ent]
        w_r, w_t = w[:, d + ent:2 * d + ent], w[:, 2 * d + ent:]
        ends = h_e @ torch.cat([w_h, w_t], dim=0).T  # (N, 2H): as head | as tail
        z = ((question @ w_q.T + b)[None, :] + ends[head, :hid]
             + (relation @ w_r.T)[rel] + ends[tail, hid:])
        return self.pred[2](torch.relu(z)).squeeze(-1)

    @staticmethod
    def tensors(f: Features) -> tuple:
        t = torch.from_numpy
        return (t(f.question), t(f.entity), t(f.non_text), t(f.structure), t(f.relation),
                t(f.head), t(f.rel), t(f.tail))

    def scores(self, f: Features) -> np.ndarray:
        """Sigmoid scores (E,) for one question, no gradient."""
        if not len(f.head):
            return np.zeros(0, dtype=np.float32)
        with torch.inference_mode():
            return torch.sigmoid(self(*self.tensors(f))).numpy().astype(np.float32)


# --- checkpoints ---------------------------------------------------------------------------


def canonical_embedder(name: str) -> str:
    """A filesystem-safe name of an embedder (the default's aliases -> all-minilm-l6-v2)."""
    n = name.strip().lower()
    if n in MINILM_ALIASES or n.rstrip("/").endswith("all-minilm-l6-v2"):
        return "all-minilm-l6-v2"
    return re.sub(r"[^a-z0-9._-]+", "-", n).strip("-.") or "embedder"


def bundled_scorer_dir(embedder_name: str) -> Path:
    """Where the shipped scorer for `embedder_name` lives in the package."""
    return BUNDLED_ROOT / canonical_embedder(embedder_name)


def save_scorer(model: TripleScorer, meta: dict[str, Any], out_dir: Path | str) -> Path:
    """`scorer.safetensors` + `scorer.json` in `out_dir` (written atomically)."""
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    full = {"format": FORMAT, "dimension": model.dim, "rounds": model.rounds,
            "reverse_rounds": model.reverse_rounds, "topic_pe": model.topic_pe,
            "undirected_rounds": model.undirected_rounds, "hidden": model.hidden, **meta}
    tmp = out / (WEIGHTS_FILE + ".tmp")
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(tmp))
    tmp.replace(out / WEIGHTS_FILE)
    tmp = out / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(full, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out / META_FILE)
    return out


@dataclass
class LoadedScorer:
    model: TripleScorer
    meta: dict[str, Any]
    path: Path
    digest: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def scores(self, f: Features) -> np.ndarray:
        with self._lock:  # torch modules are not re-entrant under inference_mode + threads
            return self.model.scores(f)


_CACHE: dict[tuple[str, float], LoadedScorer] = {}
_CACHE_LOCK = threading.Lock()


def resolve_scorer(spec: str | Path | None, embedder_name: str) -> Path:
    """The checkpoint directory: `spec` (a directory or its scorer.safetensors / scorer.json)
    or, for None, the bundled one for the embedder."""
    if spec is None or str(spec) in ("", "bundled"):
        d = bundled_scorer_dir(embedder_name)
        if not (d / META_FILE).is_file():
            shipped = sorted(p.name for p in BUNDLED_ROOT.glob("*") if p.is_dir())
            raise ScorerError(
                f"no bundled SubgraphRAG scorer for the embedder {embedder_name!r} (shipped: "
                f"{', '.join(shipped) or 'none'}): train one with `talent train subgraphrag "
                "QUESTIONS -o DIR` and pass --scorer DIR"
            )
        return d
    p = Path(spec).expanduser()
    if p.is_file() and p.name in (WEIGHTS_FILE, META_FILE):
        p = p.parent
    if not (p / META_FILE).is_file() or not (p / WEIGHTS_FILE).is_file():
        raise ScorerError(f"{p}: not a SubgraphRAG scorer (needs {WEIGHTS_FILE} and {META_FILE})")
    return p


def load_scorer(path: Path | str) -> LoadedScorer:
    """The scorer in `path`, loaded once per process (reloaded if its weights change)."""
    from safetensors.torch import load_file

    p = Path(path).resolve()
    key = (str(p), (p / WEIGHTS_FILE).stat().st_mtime)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        try:
            meta = json.loads((p / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ScorerError(f"{p / META_FILE}: unreadable ({e})") from None
        if meta.get("format") != FORMAT:
            raise ScorerError(f"{p / META_FILE}: format {meta.get('format')!r}, expected "
                              f"{FORMAT!r}")
        model = TripleScorer(int(meta["dimension"]), int(meta["rounds"]),
                            int(meta["reverse_rounds"]), bool(meta["topic_pe"]),
                            int(meta["hidden"]), int(meta.get("undirected_rounds", 0)))
        try:
            model.load_state_dict(load_file(str(p / WEIGHTS_FILE)))
        except (RuntimeError, OSError) as e:
            raise ScorerError(f"{p / WEIGHTS_FILE}: does not fit {p / META_FILE} ({e})") from None
        model.eval()
        digest = hashlib.sha256((p / WEIGHTS_FILE).read_bytes()).hexdigest()[:12]
        loaded = LoadedScorer(model, meta, p, digest)
        _CACHE[key] = loaded
        log.info("SubgraphRAG scorer %s loaded (%s, %d-d)", p, meta.get("embedder"),
                 meta["dimension"])
        return loaded


# --- retrieval -----------------------------------------------------------------------------


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best scores, best first (ties: lower index first)."""
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.lexsort((part, -scores[part]))]


def subgraphrag_candidate(ctx: RetrievalContext) -> Candidate:
    """The top `cfg.top_triples` triples of the anchors' neighbourhood by the scorer
    `cfg.scorer` (None: the bundled one for the embedder) as a Candidate."""
    question, store, enc, seeds, cfg, timings = (
        ctx.question, ctx.store, ctx.encoding, ctx.seeds, ctx.cfg, ctx.timings)
    scorer = load_scorer(resolve_scorer(cfg.scorer, ctx.embedder.model_name))
    meta = scorer.meta

    t = time.perf_counter()
    anchors = seeds.anchors()
    graph = region(store, anchors, cfg.hops, cfg.caps())
    feats = store_features(store, graph, enc.vector, meta["rounds"], meta["reverse_rounds"],
                           meta["topic_pe"], meta, int(meta.get("undirected_rounds", 0)),
                           ctx.embedder)
    timings["neighbourhood"] = ms_since(t)

    t = time.perf_counter()
    scores = scorer.scores(feats)
    keep = top_k(scores, cfg.top_triples)
    seed_ids = seeds.ids()
    best: dict[int, float] = {}
    edges = []
    for k in keep.tolist():
        s = float(scores[k])
        h, r, tl = int(graph.head[k]), int(graph.rel[k]), int(graph.tail[k])
        edges.append(CandidateEdge(src=graph.ids[h], rel=graph.relations[r],
                                   dst=graph.ids[tl], prize=s))
        for j in (h, tl):
            best[j] = max(best.get(j, s), s)
    if not edges:
        best = {int(j): 0.0 for j in np.flatnonzero(graph.topic)}
    nodes = [CandidateNode(id=graph.ids[j], name=graph.names[j], prize=p,
                           seed=graph.ids[j] in seed_ids) for j, p in best.items()]
    timings["score"] = ms_since(t)
    return Candidate(question=question, seeds=seeds.seeds, nodes=nodes, edges=edges,
                     truncated=graph.truncated)
