"""Evaluation reports: every retrieval method and LLM ablation side by side in one
reproducible run (`talent eval FILE... --report DIR`).

A report is a grid of rows: question x method x mode x sweep point.

* Methods (`METHODS`, joined by name; a new retriever joins by adding one entry):
  ``vector`` (question-to-name vector top-k at equal size: as many nodes as pcst-default's S
  for that question), ``pcst-paper`` / ``pcst-default`` (candidate S with that prize rule),
  ``graph`` (ExplaGraphs: the whole explanation graph is S), ``llm-ranked`` / ``llm-free``
  (the LLM retriever's V-hat in ranked / free decoding on pcst-default's S, or the graph for
  ExplaGraphs, then the generator in the same decoding).
* Modes: retrieval-only methods run once (mode ``retrieval``, no language model); LLM
  methods run in each of ``--modes``: ``full`` (trained retriever + generator),
  ``no-retriever`` (S straight to the generator), ``frozen`` (the base model without adapter
  selects, the trained generator answers).
* Sweeps: ``k=3,5,10`` sets k_nodes = k_edges = beam = k; ``lambda=0.001:DIR,...`` runs the
  retriever adapter trained with that lambda (mode full only); ``FIELD=v1,v2`` any other
  `RetrievalConfig` field. A row only varies with the sweeps it depends on (a retrieval
  method has no lambda; the frozen and no-retriever modes neither).

Candidates are retrieved once per question and retrieval config and shared by the methods
that read them. Rows are appended to ``rows.jsonl`` as they are computed; a rerun skips
the rows already there (same question, method, mode, point and configuration hash), so an
interrupted run resumes. Metrics: `DEFINITIONS` (also written into report.md).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import platform
import random
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from talent_core.evaluate import latency, score_answer, summarise
from talent_core.metrics import (
    hallucinated,
    hit_at_1,
    hit_at_any,
    macro_average,
    name_set,
    retrieval_scores,
    substring_hit,
)
from talent_core.models import Answer, Candidate, CandidateNode
from talent_core.pipeline import retrieval_timings
from talent_core.questions import QARecord, read_questions
from talent_core.retrieval.config import (
    SIZE_FIELD,
    RetrievalConfig,
    RetrievalSettingsError,
    apply_overrides,
    foreign_fields,
)

if TYPE_CHECKING:
    from talent_core.llm.retriever import RetrieverModel
    from talent_core.pipeline import Pipeline

log = logging.getLogger(__name__)

REPORT_FORMATS = ("metaqa", "rog", "explagraphs")
LLM_MODES = ("full", "no-retriever", "frozen")
MODE_ORDER = ("retrieval", *LLM_MODES)
PACKAGES = ("torch", "transformers", "peft", "sentence-transformers", "pcst-fast2",
            "pcst_fast", "numpy", "matplotlib")
STAGES = ("retrieve_seeds", "retrieve_embed", "retrieve_neighbourhood", "retrieve_pcst",
          "retrieve_total", "vector", "retriever", "generator", "total")

DEFINITIONS = """\
Names are matched after normalisation (`talent_core.text.answer_key`: Unicode NFKC,
lowercase, whitespace collapsed). Macro averages: plain means over questions.

Retrieval, for a predicted node set V (the method's nodes) and the gold answers V*:
- **Hit**: 1 if V and V* share a name. **Recall**: |V ∩ V*| / |V*|.
  **Precision**: |V ∩ V*| / |V|. **F1**: 2PR / (P + R). **mean nodes**: |V| (distinct names).
- **S**: the candidate subgraph (PCST); **V̂**: the LLM retriever's output (names of S plus
  out-of-candidate names); **V̂ ∩ S** / **V̂ \\ S**: its names inside / outside S
  (TaLenT Table 2). The node set of a method: S for retrieval methods and the no-retriever
  mode, the vector top-k for `vector`, V̂ for the LLM retriever (full, frozen).
- ExplaGraphs: V* is the pseudo-gold node set from `talent annotate-explagraphs`
  (`--annotations`); without it no retrieval metric is reported.

Answers (generated list A):
- **Hit@1**: the first non-empty answer of A is gold. **Hit@any**: some answer of A is gold.
- **substring hit** (G-Retriever's hit): some gold answer, lowercased with punctuation and
  the articles a/an/the removed, occurs in the generated text normalised alike (the raw
  output in free decoding; the answers joined by spaces in ranked decoding).
- **answer F1**: set F1 of A against the gold answers. **Accuracy** (ExplaGraphs, the
  label task): Hit@1 with the gold label (support / counter).

Out-of-candidate names (V̂ \\ S), TaLenT Appendix F:
- **per question**: mean number of out-of-candidate names; **grounded**: the share of them
  that name a KG entity (exact normalised match in the whole store).
- **hallucination rate** (eqs. 16-17): H = {} when Hit@1 = 1, else the names of V̂ \\ S that
  are not gold; rate = Σ|H| / Σ|V̂| over questions.

Latency: p50 / p95 / mean in ms per stage over the rows of a group (`retrieve_*`: candidate
retrieval, shared between the methods reading the same S; `vector`: question embedding
+ vector top-k; `retriever` / `generator`: the LLM stages; `total`: the row's path end to
end). Timings vary between runs; every other number is deterministic.
"""


class ReportError(ValueError):
    """A bad report option (the CLI exits with code 2 and this message)."""


# --- methods ------------------------------------------------------------------------------

Point = dict[str, Any]  # sweep parameter -> value, e.g. {"k": 5, "lambda": 0.001}


@dataclass(frozen=True)
class Method:
    """One way of choosing nodes (and, for LLM methods, answers) for a question.

    ``compute(runner, item, point, mode)`` returns the row's metrics (`Runner.score`);
    ``llm``: needs the language models (runs in the LLM modes); ``formats``: the question
    formats it applies to; ``retriever``: the retriever whose candidate it reads (a sweep
    of another retriever's own setting does not multiply its rows; None: no retriever)."""

    name: str
    description: str
    compute: Callable[[Runner, Item, Point, str], dict[str, Any]]
    llm: bool = False
    formats: tuple[str, ...] = ("metaqa", "rog")
    decode: str | None = None
    retriever: str | None = "pcst"  # the RetrievalConfig.method whose settings it reads


def _retrieved(**overrides: Any) -> Callable[..., dict[str, Any]]:
    """A retrieval-only method: the candidate of ``overrides`` (a retriever and its rule)."""
    def compute(run: Runner, item: Item, point: Point, mode: str) -> dict[str, Any]:
        cand = run.candidate(item, point, **overrides)
        return run.score(item, Answer(question=cand.question, candidate=cand,
                                      timings_ms=_retrieve_timings(cand)))
    return compute


def _vector(run: Runner, item: Item, point: Point, mode: str) -> dict[str, Any]:
    """Vector top-k entities (question-to-name cosine) with k = |S| of pcst-default."""
    s = run.candidate(item, point, prizes="default")
    size = len(name_set(n.name for n in s.nodes))
    vec, embed_ms = run.question_vector(item)
    t = time.perf_counter()
    hits = run.pipe.store.top_entities(vec, size) if size else []
    ms = embed_ms + (time.perf_counter() - t) * 1000
    cand = Candidate(question=item.rec.question,
                     nodes=[CandidateNode(id=h.entity.id, name=h.entity.name) for h in hits])
    return run.score(item, Answer(question=cand.question, candidate=cand,
                                  timings_ms={"vector": ms, "total": ms}))


def _graph(run: Runner, item: Item, point: Point, mode: str) -> dict[str, Any]:
    assert item.graph is not None
    return run.score(item, Answer(question=item.rec.question, candidate=item.graph,
                                  timings_ms={"total": 0.0}))


def _llm(decode: str, **retrieval: Any) -> Callable[..., dict[str, Any]]:
    """An LLM method on the candidate of ``retrieval`` (default: pcst-default's S)."""
    retrieval = retrieval or {"prizes": "default"}

    def compute(run: Runner, item: Item, point: Point, mode: str) -> dict[str, Any]:
        cand = item.graph if item.graph is not None else run.candidate(item, point, **retrieval)
        ans = run.pipe.answer(cand, "no-retriever" if mode == "no-retriever" else "full",
                              decode,  # type: ignore[arg-type]
                              retriever=run.retriever(mode, point))
        # ans.timings_ms has S's retrieve_* stages already; total = retrieval + LLM stages
        timings = {**ans.timings_ms, "total": cand.timings_ms.get("total", 0.0)
                   + ans.timings_ms["total"]}
        return run.score(item, ans.model_copy(update={"timings_ms": timings}), qa=True)
    return compute


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("vector", "vector top-k entities by question-to-name cosine, k = |S| of "
           "pcst-default for the same question (equal size)", _vector),
    Method("pcst-paper", "candidate S, G-Retriever's prizes (prizes=paper)",
           _retrieved(method="pcst", prizes="paper")),
    Method("pcst-default", "candidate S, relation-path prizes (prizes=default)",
           _retrieved(method="pcst", prizes="default")),
    Method("subgraphrag", "SubgraphRAG: top-K triples by the MLP scorer with directional "
           "distance encoding (K = top_triples)", _retrieved(method="subgraphrag"),
           retriever="subgraphrag"),
    Method("grag", "GRAG: top-N ego-graphs by question similarity, merged and soft-pruned "
           "(N = top_egos)", _retrieved(method="grag"), retriever="grag"),
    Method("graph", "the whole explanation graph as S (ExplaGraphs)", _graph,
           formats=("explagraphs",), retriever=None),
    Method("llm-ranked", "LLM retriever V-hat, ranked decoding (on pcst-default's S; "
           "ExplaGraphs: the graph), generator ranked", _llm("ranked"), llm=True,
           formats=REPORT_FORMATS, decode="ranked"),
    Method("llm-free", "LLM retriever V-hat, free (greedy) decoding, generator free",
           _llm("free"), llm=True, formats=REPORT_FORMATS, decode="free"),
    *(Method(f"llm-{decode}@{r}", f"as llm-{decode}, on the {r} retriever's candidate",
             _llm(decode, method=r), llm=True, decode=decode, retriever=r)
      for r in ("subgraphrag", "grag") for decode in ("ranked", "free")),
)}
DEFAULT_METHODS = {"metaqa": ["vector", "pcst-paper", "pcst-default"],
                   "rog": ["vector", "pcst-paper", "pcst-default"],
                   "explagraphs": ["graph", "llm-ranked"]}


def _retrieve_timings(cand: Candidate) -> dict[str, float]:
    """S's stage timings as `Pipeline.answer` reports them, total = retrieval's."""
    return {**retrieval_timings(cand), "total": cand.timings_ms.get("total", 0.0)}


def method_modes(method: Method, modes: Sequence[str]) -> list[str]:
    return list(modes) if method.llm else ["retrieval"]


def project(point: Point, method: Method, mode: str) -> Point:
    """The part of ``point`` a (method, mode) row depends on: lambda only for an LLM
    method in mode full; no other retriever's own setting (k: pcst's k_nodes)."""
    foreign = foreign_fields(method.retriever) if method.retriever else frozenset()
    return {k: v for k, v in point.items()
            if (k != "lambda" or (method.llm and mode == "full"))
            and ("k_nodes" if k == "k" else k) not in foreign}


def point_label(point: Point) -> str:
    return ",".join(f"{k}={v}" for k, v in point.items()) or "-"


# --- options ------------------------------------------------------------------------------


@dataclass
class Sweep:
    name: str  # "k", "lambda" or a RetrievalConfig field
    values: list[Any]
    dirs: dict[str, str] = field(default_factory=dict)  # lambda -> retriever adapter dir


def parse_list(spec: str | None, what: str) -> list[str]:
    items = [x.strip() for x in (spec or "").split(",") if x.strip()]
    if spec is not None and not items:
        raise ReportError(f"{what}: empty list")
    return list(dict.fromkeys(items))


def parse_methods(spec: str | None, fmt: str) -> list[str]:
    names = parse_list(spec, "--methods") or DEFAULT_METHODS[fmt]
    for n in names:
        if n not in METHODS:
            raise ReportError(f"--methods: unknown method {n!r} (known: {', '.join(METHODS)})")
        if fmt not in METHODS[n].formats:
            ok = [m for m, x in METHODS.items() if fmt in x.formats]
            raise ReportError(f"--methods: {n!r} does not apply to --format {fmt} "
                              f"(methods for {fmt}: {', '.join(ok)})")
    return names


def parse_modes(spec: str | None, methods: Sequence[str]) -> list[str]:
    modes = parse_list(spec, "--modes") or ["full"]
    for m in modes:
        if m not in LLM_MODES:
            raise ReportError(f"--modes: unknown mode {m!r} (known: {', '.join(LLM_MODES)})")
    if spec is not None and not any(METHODS[m].llm for m in methods):
        raise ReportError("--modes applies to the LLM methods (llm-ranked, llm-free); "
                          "--methods has none")
    return modes


def _number(text: str, what: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise ReportError(f"{what}: {text!r} is not a number") from None


def parse_sweep(spec: str, base: RetrievalConfig) -> Sweep:
    """``k=3,5,10`` | ``lambda=0.001:DIR,0.01:DIR`` | ``FIELD=v1,v2`` (a RetrievalConfig
    field, each value validated as that field)."""
    name, eq, rest = spec.partition("=")
    name = name.strip().replace("-", "_")
    where = f"--sweep {spec!r}"
    if not eq or not name or not rest.strip():
        raise ReportError(f"{where}: expected NAME=v1,v2,... (k=3,5,10; lambda=0.001:DIR,...;"
                          " or a retrieval setting such as edge_cost=0.25,0.5)")
    parts = [p.strip() for p in rest.split(",") if p.strip()]
    if name == "k":
        values = [_number(p, where) for p in parts]
        if any(not isinstance(v, int) or v < 1 for v in values):
            raise ReportError(f"{where}: k must be whole numbers >= 1")
        return Sweep("k", list(dict.fromkeys(values)))
    if name in ("lambda", "lam"):
        sweep = Sweep("lambda", [])
        for p in parts:
            value, colon, d = p.partition(":")
            if not colon or not d.strip():
                raise ReportError(f"{where}: each lambda needs its retriever adapter: "
                                  "lambda=0.001:DIR1,0.01:DIR2")
            lam = float(_number(value.strip(), where))
            path = Path(d.strip())
            if not (path / "talent_meta.json").is_file():
                raise ReportError(f"{where}: {path} is not a retriever adapter directory "
                                  "(no talent_meta.json)")
            sweep.values.append(lam)
            sweep.dirs[str(lam)] = str(path)
        return sweep
    if name not in RetrievalConfig.model_fields or name == "stopwords":
        known = ", ".join(f for f in RetrievalConfig.model_fields if f != "stopwords")
        raise ReportError(f"{where}: unknown sweep {name!r} (k, lambda or a retrieval "
                          f"setting: {known})")
    kind = type(getattr(base, name))
    values: list[Any] = []
    for p in parts:
        v: Any = p if kind is str else (p.lower() in ("1", "true", "yes") if kind is bool
                                        else _number(p, where))
        try:
            values.append(getattr(apply_overrides(base, **{name: v}), name))
        except RetrievalSettingsError as e:
            raise ReportError(f"{where}: {e.problems[0][1]}") from None
    return Sweep(name, list(dict.fromkeys(values)))


def sweep_points(sweeps: Sequence[Sweep]) -> list[Point]:
    """The cartesian product of the sweeps, in the order given ([{}] without sweeps)."""
    return [dict(zip([s.name for s in sweeps], combo, strict=True))
            for combo in itertools.product(*[s.values for s in sweeps])]


def retrieval_overrides(point: Point) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in point.items():
        if k == "k":
            out.update(k_nodes=v, k_edges=v, beam=v)
        elif k != "lambda":
            out[k] = v
    return out


@dataclass
class ReportOptions:
    files: list[Path]
    fmt: str
    methods: list[str]
    modes: list[str]
    sweeps: list[Sweep]
    limit: int | None = None
    offset: int = 0
    sample_seed: int | None = None
    annotations: Path | None = None

    @property
    def llm(self) -> bool:
        return any(METHODS[m].llm for m in self.methods)

    @classmethod
    def parse(cls, files: Sequence[Path], fmt: str, methods: str | None, modes: str | None,
              sweeps: Sequence[str] | None, base: RetrievalConfig, limit: int | None = None,
              offset: int = 0, sample_seed: int | None = None,
              annotations: Path | None = None) -> ReportOptions:
        """Validated options; a bad value raises ReportError naming the option."""
        if fmt not in REPORT_FORMATS:
            raise ReportError(f"--format must be {' | '.join(REPORT_FORMATS)}, not {fmt!r}")
        for f in files:
            if not Path(f).is_file():
                raise ReportError(f"{f}: no such file")
        names = parse_methods(methods, fmt)
        mode_list = parse_modes(modes, names)
        parsed = [parse_sweep(s, base) for s in sweeps or []]
        seen = [s.name for s in parsed]
        if len(set(seen)) != len(seen):
            twice = sorted({n for n in seen if seen.count(n) > 1})
            raise ReportError(f"--sweep: {', '.join(twice)} swept twice")
        if "k" in seen and {"k_nodes", "k_edges", "beam"} & set(seen):
            raise ReportError("--sweep k sets k_nodes, k_edges and beam together: "
                              "do not sweep them separately as well")
        if "lambda" in seen and not (any(METHODS[m].llm for m in names) and "full" in mode_list):
            raise ReportError("--sweep lambda needs an LLM method (llm-ranked, llm-free) "
                              "in mode full")
        if fmt == "explagraphs" and any(s.name != "lambda" for s in parsed):
            raise ReportError("--format explagraphs: the whole graph is S; only a lambda "
                              "sweep applies")
        if annotations is not None and not Path(annotations).is_file():
            raise ReportError(f"--annotations: {annotations}: no such file")
        return cls([Path(f) for f in files], fmt, names, mode_list, parsed, limit, offset,
                   sample_seed, Path(annotations) if annotations else None)


# --- questions ----------------------------------------------------------------------------


@dataclass
class Item:
    """One question of the report: its record, hop / type (None: not derivable), the
    retrieval gold (None: none known) and, for ExplaGraphs, its graph (S)."""

    id: str
    rec: QARecord
    hop: int | None = None
    qtype: str | None = None
    retrieval_gold: list[str] | None = None
    graph: Candidate | None = None


_HOP = re.compile(r"(\d+)[-_]?hop", re.IGNORECASE)


def hop_from_path(path: Path) -> int | None:
    """``1-hop/qa_dev.txt`` or ``qa_1hop.txt`` -> 1 (None when the path says nothing)."""
    for part in reversed(path.parts):
        m = _HOP.search(part)
        if m:
            return int(m.group(1))
    return None


def qtype_file(path: Path) -> Path:
    """MetaQA's question types beside the questions: ``qa_dev.txt`` -> ``qa_dev_qtype.txt``."""
    return path.with_name(f"{path.stem}_qtype{path.suffix}")


def _metaqa_types(path: Path) -> dict[int, str]:
    """Line number -> question type (e.g. actor_to_movie_to_director), when the file exists."""
    qt = qtype_file(path)
    if not qt.is_file():
        return {}
    return {i: line.strip() for i, line in enumerate(qt.read_text(encoding="utf-8")
                                                     .splitlines(), 1) if line.strip()}


def _rog_fields(path: Path) -> dict[str, tuple[int | None, str | None]]:
    """id -> (hop, type) from optional ``hop`` / ``type`` fields of RoG records."""
    out: dict[str, tuple[int | None, str | None]] = {}
    if path.suffix.lower() != ".jsonl":
        return out
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and "id" in obj and ("hop" in obj or "type" in obj):
                hop = obj.get("hop")
                out[str(obj["id"])] = (int(hop) if isinstance(hop, int) else None,
                                       str(obj["type"]) if obj.get("type") else None)
    return out


def read_items(files: Sequence[Path], fmt: str, annotations: Path | None = None) -> list[Item]:
    """Every question of ``files`` as report items (ids prefixed with the file's folder
    when several files are read)."""
    items: list[Item] = []
    for path in files:
        prefix = f"{path.parent.name}/" if len(files) > 1 else ""
        if fmt == "explagraphs":
            items += _explagraphs_items(path, prefix, annotations)
            continue
        types = _metaqa_types(path) if fmt == "metaqa" else {}
        fields = _rog_fields(path) if fmt == "rog" else {}
        path_hop = hop_from_path(path)
        for rec in read_questions(path, fmt):  # type: ignore[arg-type]
            hop, qtype = fields.get(rec.id, (None, None))
            if fmt == "metaqa":  # movie_to_director_to_movie: 2 hops
                qtype = types.get(int(rec.id.rsplit(":", 1)[1]))
                hop = qtype.count("_to_") if qtype else None
            items.append(Item(id=prefix + rec.id, rec=rec, hop=path_hop or hop, qtype=qtype,
                              retrieval_gold=rec.answers))
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise ReportError("question ids repeat across the files (give files in different "
                          "folders)")
    return items


def _explagraphs_items(path: Path, prefix: str, annotations: Path | None) -> list[Item]:
    from talent_core.llm.data import DataError
    from talent_core.llm.explagraphs import read_explagraphs, to_candidate

    gold: dict[str, list[str]] = {}
    if annotations is not None:  # TrainingExample JSONL (annotate-explagraphs --examples-out)
        for line in annotations.read_text(encoding="utf-8").splitlines():
            if line.strip():
                obj = json.loads(line)
                if obj.get("gold_nodes"):  # an empty annotation is no retrieval gold
                    gold[str(obj.get("id"))] = list(obj["gold_nodes"])
    try:
        records = read_explagraphs(path)
    except DataError as e:
        raise ReportError(str(e)) from None
    out = []
    for r in records:
        rec = QARecord(id=f"{path.stem}:{r.source.rsplit(':', 1)[1]}", question=r.question,
                       answers=[r.label])
        out.append(Item(id=prefix + rec.id, rec=rec, retrieval_gold=gold.get(r.key()),
                        graph=to_candidate(r)))
    if annotations is not None:
        log.info("pseudo-gold nodes for %d of %d examples", sum(1 for i in out
                                                                if i.retrieval_gold), len(out))
    return out


def select_items(items: Sequence[Item], limit: int | None, seed: int | None,
                 offset: int = 0) -> list[Item]:
    """The questions a report runs on. Without ``seed``: items[offset : offset + limit] (as
    `talent eval`). With ``seed`` and ``limit``: a seeded sample of ``limit`` questions,
    balanced over hops (each hop's questions shuffled with the seed, then taken in turn,
    hop by hop), in file order."""
    pool = list(items)[offset:]
    if limit is None or limit >= len(pool):
        return pool
    if seed is None:
        return pool[:limit]
    rng = random.Random(seed)
    groups: dict[Any, list[int]] = {}
    for i, it in enumerate(pool):
        groups.setdefault(it.hop if it.hop is not None else -1, []).append(i)
    queues = []
    for hop in sorted(groups):
        idx = groups[hop][:]
        rng.shuffle(idx)
        queues.append(idx)
    chosen: list[int] = []
    while len(chosen) < limit:
        for q in queues:
            if q and len(chosen) < limit:
                chosen.append(q.pop(0))
    return [pool[i] for i in sorted(chosen)]


# --- running ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    item: Item
    method: str
    mode: str
    point: Point

    @property
    def key(self) -> str:
        return "\t".join((self.item.id, self.method, self.mode, point_label(self.point)))


def plan(items: Sequence[Item], methods: Sequence[str], modes: Sequence[str],
         points: Sequence[Point]) -> list[Spec]:
    """Every row to compute, question by question (so that a question's candidates are
    retrieved once and shared), duplicates (a row that does not depend on a sweep) once."""
    specs: list[Spec] = []
    seen: set[str] = set()
    for item in items:
        for point in points:
            for name in methods:
                m = METHODS[name]
                for mode in method_modes(m, modes):
                    spec = Spec(item, name, mode, project(point, m, mode))
                    if spec.key not in seen:
                        seen.add(spec.key)
                        specs.append(spec)
    return specs


class Runner:
    """Computes rows on one Pipeline, caching a question's candidates per retrieval config
    (and its question vector) while that question is being run."""

    def __init__(self, pipe: Pipeline, options: ReportOptions):
        self.pipe = pipe
        self.options = options
        self._item: str | None = None
        self._cands: dict[str, Candidate] = {}
        self._vector: tuple[Any, float] | None = None
        self._retrievers: dict[str, RetrieverModel] = {}
        self.retrievals = 0  # candidate retrievals run (the cache's misses)

    def _for(self, item: Item) -> None:
        if item.id != self._item:
            self._item, self._cands, self._vector = item.id, {}, None

    def candidate(self, item: Item, point: Point, **retrieval: Any) -> Candidate:
        """The candidate of ``retrieval`` (RetrievalConfig overrides) at ``point``."""
        self._for(item)
        overrides = {"method": "pcst", **retrieval_overrides(point), **retrieval}
        key = json.dumps(overrides, sort_keys=True)
        if key not in self._cands:
            self.retrievals += 1
            self._cands[key] = self.pipe.retrieve(item.rec.question,
                                                  item.rec.topic_entities or None, **overrides)
        return self._cands[key]

    def question_vector(self, item: Item) -> tuple[Any, float]:
        self._for(item)
        if self._vector is None:
            t = time.perf_counter()
            vec = self.pipe.embedder.encode([item.rec.question])[0]
            self._vector = (vec, (time.perf_counter() - t) * 1000)
        return self._vector

    def retriever(self, mode: str, point: Point) -> RetrieverModel | None:
        """The retriever a mode runs: the pipeline's own (None), the frozen base model, or
        the adapter of the point's lambda (loaded once onto the same base model)."""
        if mode == "no-retriever":
            return None
        from talent_core.llm.retriever import RetrieverModel

        own, _ = self.pipe.models
        if mode == "frozen":
            key = "frozen"
            if key not in self._retrievers:
                self._retrievers[key] = (own if own.frozen else RetrieverModel(
                    own.lm, None, own.task, own.max_new_tokens))
            return self._retrievers[key]
        if "lambda" not in point:
            return None
        path = next(s.dirs[str(point["lambda"])] for s in self.options.sweeps
                    if s.name == "lambda")
        if path not in self._retrievers:
            name = f"retriever-lambda-{len(self._retrievers)}"
            own.lm.add_adapter(name, Path(path))
            self._retrievers[path] = RetrieverModel(own.lm, name, own.task, own.max_new_tokens)
        return self._retrievers[path]

    def score(self, item: Item, ans: Answer, qa: bool = False) -> dict[str, Any]:
        """The metrics of one row (`score_row`; ``qa``: a generator answered)."""
        return score_row(item, ans, qa)

    def row(self, spec: Spec, config_hash: str) -> dict[str, Any]:
        m = METHODS[spec.method]
        metrics = m.compute(self, spec.item, spec.point, spec.mode)
        return {"key": spec.key, "config": config_hash, "id": spec.item.id,
                "hop": spec.item.hop, "qtype": spec.item.qtype, "method": spec.method,
                "mode": spec.mode, "point": spec.point, **metrics}


def score_row(item: Item, ans: Answer, qa: bool) -> dict[str, Any]:
    """One row's metrics (pure): `evaluate.score_answer` against the retrieval gold, then
    V̂ \\ S, the method's node set (``nodes``), and with ``qa`` the answer metrics against
    the gold answers. Retrieval metrics are dropped when no retrieval gold is known."""
    gold = item.rec.answers
    rgold = item.retrieval_gold
    row = score_answer(item.rec.model_copy(update={"answers": rgold or []}), ans)
    row["gold"] = gold
    sel = ans.selection
    s_names = [n.name for n in ans.candidate.nodes]
    v_hat: list[str] = []
    if sel is not None:
        outside = [o.name for o in sel.out_of_candidate]
        v_hat = [n.name for n in sel.selected] + outside
        row["selected_out_s"] = retrieval_scores(outside, rgold or []).as_dict()
        row["v_hat_size"] = len(name_set(v_hat))
    row["nodes"] = row["selected"] if sel is not None else row["candidate"]
    if rgold is None:
        for k in ("candidate", "selected", "selected_in_s", "selected_out_s", "nodes"):
            row.pop(k, None)
    row.pop("hit@1", None)
    if qa:
        text = ans.raw or " ".join(ans.answer)
        row["hit@1"] = hit_at_1(ans.answer, gold)
        row["hit@any"] = hit_at_any(ans.answer, gold)
        row["substring_hit"] = substring_hit(text, gold)
        row["answer_f1"] = retrieval_scores(ans.answer, gold).f1
        row["answer"] = ans.answer
        if sel is not None:
            row["hallucinated"] = hallucinated(v_hat, s_names, rgold or gold, row["hit@1"])
    return row


# --- rows file ----------------------------------------------------------------------------


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows already written; an unfinished last line (an interrupted write) is cut off
    the file so that appending continues cleanly."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        log.warning("%s: unfinished last line dropped (an interrupted run)", path)
        with path.open("r+b") as f:
            f.truncate(end)
    rows = []
    for n, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            log.warning("%s:%d: unreadable row ignored (recomputed)", path, n)
    return rows


# --- summaries ----------------------------------------------------------------------------


def _mean(vals: Sequence[float]) -> float:
    return sum(vals) / len(vals) if vals else 0.0


def _r(x: Any) -> Any:
    """Numbers rounded to 6 places (recursively), so reports compare exactly."""
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: _r(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_r(v) for v in x]
    return x


def summarise_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Macro averages of one group of rows (pure): `evaluate.summarise` plus the node set,
    V̂ \\ S, the answer metrics, the hallucination rate and every stage's latency."""
    rows = list(rows)
    base = summarise(rows)
    out: dict[str, Any] = {"n": len(rows)}
    retrieval: dict[str, Any] = {}
    llm = any(r["mode"] != "retrieval" for r in rows)  # S is a part only beside V̂
    for key, label in (("nodes", "nodes"), ("candidate", "S"), ("selected", "V̂"),
                       ("selected_in_s", "V̂∩S"), ("selected_out_s", "V̂\\S")):
        scored = [r[key] for r in rows if key in r and (llm or key != "candidate")]
        if scored:
            retrieval[label] = macro_average(scored)
    if retrieval:
        out["retrieval"] = retrieval
    qa_rows = [r for r in rows if "hit@1" in r]
    if qa_rows:
        out["qa"] = {k: _mean([r[k] for r in qa_rows])
                     for k in ("hit@1", "hit@any", "substring_hit", "answer_f1")}
    if "out_of_candidate_per_question" in base:
        sel = [r for r in rows if "hallucinated" in r]
        out["out_of_candidate"] = {
            "per_question": base["out_of_candidate_per_question"],
            "grounded": base["out_of_candidate_grounded"],
            "hallucination_rate": (sum(r["hallucinated"] for r in sel)
                                   / max(1, sum(r.get("v_hat_size", 0) for r in sel))),
        }
    stages = [s for s in STAGES if any(s in r.get("timings_ms", {}) for r in rows)]
    out["latency"] = {s: latency(rows, s) for s in stages}
    out["truncated"] = base["truncated"]
    if "selection_truncated" in base:
        out["selection_truncated"] = base["selection_truncated"]
    return _r(out)


def _brief(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    s = summarise_rows(rows)
    out: dict[str, Any] = {"n": s["n"]}
    if "retrieval" in s:
        nodes = s["retrieval"]["nodes"]
        out.update(hit=nodes["hit"], recall=nodes["recall"], size=nodes["size"])
    if "qa" in s:
        out["hit@1"] = s["qa"]["hit@1"]
    return out


def group_rows(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict]]:
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["mode"], point_label(r["point"])), []).append(r)
    return groups


def results(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (method, mode, sweep point), with per-hop and per-type breakdowns."""
    out = []
    for (method, mode, label), grp in group_rows(rows).items():
        entry: dict[str, Any] = {"method": method, "mode": mode, "point": grp[0]["point"],
                                 "label": label, **summarise_rows(grp)}
        for key, name in (("hop", "by_hop"), ("qtype", "by_type")):
            values = sorted({r[key] for r in grp if r.get(key) is not None}, key=str)
            if values:
                entry[name] = {str(v): _brief([r for r in grp if r.get(key) == v])
                               for v in values}
        out.append(entry)
    return out


def strip_timings(x: Any) -> Any:
    """``x`` without latency / timings (what the determinism comparison reads)."""
    if isinstance(x, dict):
        return {k: strip_timings(v) for k, v in x.items() if k not in ("latency", "timings_ms")}
    if isinstance(x, list):
        return [strip_timings(v) for v in x]
    return x


# --- provenance ---------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def code_commit() -> dict[str, Any]:
    """{commit, dirty} of the checkout the package runs from (`llm.models.git_commit`, the
    adapters' provenance; None when not a checkout)."""
    from talent_core.llm.models import git_commit

    commit = git_commit()
    if commit is None:
        return {"commit": None, "dirty": None}
    try:
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=Path(__file__).resolve().parent, capture_output=True,
                               text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": commit, "dirty": None}
    return {"commit": commit, "dirty": bool(dirty)}


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = None
    return out


def machine() -> dict[str, Any]:
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"platform": platform.platform(), "python": platform.python_version(),
            "processor": platform.machine(), "cpu_count": os.cpu_count(), "load_average": load}


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()
                          ).hexdigest()[:16]


def run_config(pipe: Pipeline, options: ReportOptions) -> dict[str, Any]:
    """What every row's numbers depend on besides its question, method, mode and point
    (its hash keys the rows: a rerun with another configuration recomputes them)."""
    cfg: dict[str, Any] = {"format": options.fmt}
    if options.fmt != "explagraphs":
        cfg["retrieval"] = pipe.retrieval_config().model_dump()
        if any(METHODS[m].retriever == "subgraphrag" for m in options.methods):
            from talent_core.retrieval.subgraphrag import WEIGHTS_FILE, resolve_scorer

            scorer = resolve_scorer(cfg["retrieval"]["scorer"], pipe.settings.embedding_model)
            cfg["scorer_sha256"] = sha256_file(scorer / WEIGHTS_FILE)
    if options.llm:
        cfg.update(base_model=pipe.base_model or pipe.settings.base_model,
                   retriever_dir=str(pipe.retriever_dir) if pipe.retriever_dir else None,
                   generator_dir=str(pipe.generator_dir) if pipe.generator_dir else None,
                   lambda_dirs={k: v for s in options.sweeps for k, v in s.dirs.items()},
                   retriever_max_new_tokens=pipe.settings.retriever_max_new_tokens,
                   generator_max_new_tokens=pipe.settings.generator_max_new_tokens)
    if options.annotations is not None:
        cfg["annotations_sha256"] = sha256_file(options.annotations)
    return cfg


# --- the report ---------------------------------------------------------------------------


def run_report(pipe: Pipeline, options: ReportOptions, out_dir: Path,
               command: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Compute the missing rows (appended to ``out_dir/rows.jsonl``), then write
    report.json, report.md and the plots; returns the report."""
    t_start = time.time()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    items = select_items(read_items(options.files, options.fmt, options.annotations),
                         options.limit, options.sample_seed, options.offset)
    if not items:
        raise ReportError("no questions to evaluate")
    if options.llm and options.fmt == "explagraphs":
        r, g = pipe.models
        if r.task != "label" or g.task != "label":
            log.warning("ExplaGraphs: the adapters were not trained on the label task; "
                        "the models are prompted for it anyway")
            r.task = g.task = "label"
    config = run_config(pipe, options)
    chash = config_hash(config)
    rows_path = out_dir / "rows.jsonl"
    done: dict[str, dict[str, Any]] = {}
    stale = 0
    for row in read_rows(rows_path):
        if row.get("config") == chash:
            done[row["key"]] = row
        else:
            stale += 1
    if stale:
        log.warning("%d rows of %s were computed with another configuration: ignored",
                    stale, rows_path)
    points = sweep_points(options.sweeps)
    specs = plan(items, options.methods, options.modes, points)
    todo = [s for s in specs if s.key not in done]
    log.info("%d rows: %d already in %s, %d to compute", len(specs), len(specs) - len(todo),
             rows_path, len(todo))
    runner = Runner(pipe, options)
    t_rows = time.perf_counter()
    with rows_path.open("a", encoding="utf-8") as sink:
        for spec in tqdm(todo, desc="report", unit="row", disable=not progress):
            row = runner.row(spec, chash)
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
            sink.flush()
            done[spec.key] = row
    rows = [done[s.key] for s in specs]
    stats = pipe.stats().model_dump() if options.fmt != "explagraphs" else None
    hops: dict[str, int] = {}
    for it in items:
        hops[str(it.hop)] = hops.get(str(it.hop), 0) + 1
    report: dict[str, Any] = {
        "command": command,
        "config": {**config, "files": [str(f) for f in options.files],
                   "methods": options.methods, "modes": options.modes,
                   "sweeps": [{"name": s.name, "values": s.values, **({"dirs": s.dirs}
                               if s.dirs else {})} for s in options.sweeps],
                   "limit": options.limit, "offset": options.offset,
                   "sample_seed": options.sample_seed, "config_hash": chash},
        "dataset": {
            "files": [{"path": str(f), "sha256": sha256_file(f)} for f in options.files],
            "questions": len(items), "questions_by_hop": hops,
            "with_type": sum(1 for it in items if it.qtype),
            "store": stats,
            "annotations": str(options.annotations) if options.annotations else None,
        },
        "code": code_commit(),
        "packages": package_versions(),
        "machine": machine(),
        "methods": {n: {"description": METHODS[n].description, "llm": METHODS[n].llm,
                        "modes": method_modes(METHODS[n], options.modes)}
                    for n in options.methods},
        "definitions": DEFINITIONS,
        "results": sorted(results(rows), key=lambda g: (
            options.methods.index(g["method"]), MODE_ORDER.index(g["mode"]),
            [points.index(p) for p in points if project(p, METHODS[g["method"]], g["mode"])
             == g["point"]][0])),
        "run": {"rows": len(rows), "computed": len(todo), "resumed": len(specs) - len(todo),
                "retrievals": runner.retrievals,
                "seconds_computing": round(time.perf_counter() - t_rows, 3),
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "wall_s": round(time.time() - t_start, 3)},
    }
    report["reference_point"] = reference_point(options, pipe)
    report["plots"] = write_plots(report, out_dir, report["reference_point"])
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False)
                                         + "\n", encoding="utf-8")
    (out_dir / "report.md").write_text(markdown(report), encoding="utf-8")
    return report


def reference_point(options: ReportOptions, pipe: Pipeline) -> Point:
    """The sweep point the bar charts show: each swept setting at the run's configured
    value when it is swept (k: k_nodes), else its first value."""
    base = pipe.retrieval if options.fmt != "explagraphs" else RetrievalConfig()
    ref: Point = {}
    for s in options.sweeps:
        current = base.k_nodes if s.name == "k" else getattr(base, s.name, None)
        ref[s.name] = current if current in s.values else s.values[0]
    return ref


# --- markdown -----------------------------------------------------------------------------


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and math.isnan(x):
        return "–"
    if pct:
        return f"{100 * x:.1f}"
    return f"{x:.2f}" if isinstance(x, float) else str(x)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~$!&:])")


def _md(text: Any) -> str:
    """Text from the user's files and command (question types, hops, paths, sweep values)
    as literal Markdown on one line: the characters that make an image, a link, emphasis,
    HTML, math or a table cell are backslash-escaped (a type `![t](http://…)` must not
    become an image fetch where report.md is rendered)."""
    text = "".join(c if c.isprintable() else " " for c in str(text))
    return _MD_SPECIAL.sub(r"\\\1", text)


def _code(text: Any) -> str:
    """``text`` on one line as a Markdown code span (literal), fenced by more backticks than
    any run inside it."""
    text = "".join(c if c.isprintable() else " " for c in str(text))
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table, every cell through `_md` (categories come from the user's files)."""
    lines = ["| " + " | ".join(map(_md, head)) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def markdown(report: dict[str, Any], plots: bool = True) -> str:
    """report.md: the tables (readable on their own) and, with ``plots``, the plots (pure).
    Text from the user's files and command goes through `_md`/`_code` (literal)."""
    res = report["results"]
    cfg = report["config"]
    ds = report["dataset"]
    out = ["# Evaluation report\n",
           f"{_code(report['command'])}\n" if report.get("command") else "",
           f"- questions: {ds['questions']} from "
           + ", ".join(f"{_code(f['path'])} (sha256 {_md(f['sha256'][:12])})"
                       for f in ds["files"])
           + f"; by hop: {_md(ds['questions_by_hop'])}; format {_md(cfg['format'])}",
           f"- store: {_md(ds['store'])}" if ds.get("store") else "- store: not used",
           f"- methods: {_md(', '.join(cfg['methods']))}; LLM modes: "
           f"{_md(', '.join(cfg['modes']))}; sweeps: "
           + (_md(", ".join(s["name"] + "=" + ",".join(map(str, s["values"]))
                            for s in cfg["sweeps"])) or "none"),
           f"- limit {cfg['limit']}, offset {cfg['offset']}, sample seed {cfg['sample_seed']}",
           f"- code: {_md(report['code']['commit'])}"
           + (" (uncommitted changes)" if report["code"].get("dirty") else ""),
           f"- machine: {_md(report['machine']['platform'])}, "
           f"{report['machine']['cpu_count']} CPUs, load {report['machine']['load_average']}",
           f"- rows: {report['run']['rows']} ({report['run']['resumed']} resumed from rows.jsonl)"
           "\n",
           "Percentages (×100) except mean nodes and latencies (ms). Rows are per method, "
           "LLM mode (`retrieval`: no language model) and sweep point.\n"]
    out.append("## Methods\n")
    out.append(_table(["method", "what", "modes"], [
        (n, m["description"], ", ".join(m["modes"])) for n, m in report["methods"].items()]))
    ret = [g for g in res if "retrieval" in g]
    if ret:
        out.append("## Retrieval: the node set of each method\n")
        out.append(_table(["method", "mode", "point", "n", "Hit", "Recall", "Precision", "F1",
                           "mean nodes"], [
            (g["method"], g["mode"], g["label"], g["n"], _f(g["retrieval"]["nodes"]["hit"], True),
             _f(g["retrieval"]["nodes"]["recall"], True),
             _f(g["retrieval"]["nodes"]["precision"], True),
             _f(g["retrieval"]["nodes"]["f1"], True), _f(g["retrieval"]["nodes"]["size"]))
            for g in ret]))
    t2 = [g for g in ret if "V̂" in g["retrieval"]]
    if t2:
        out.append("## S, V̂, V̂ ∩ S and V̂ \\ S (TaLenT Table 2)\n")
        rows = []
        for g in t2:
            for part in ("S", "V̂", "V̂∩S", "V̂\\S"):
                s = g["retrieval"].get(part)
                if s:
                    rows.append((g["method"], g["mode"], g["label"], part, _f(s["hit"], True),
                                 _f(s["recall"], True), _f(s["precision"], True),
                                 _f(s["f1"], True), _f(s["size"])))
        out.append(_table(["method", "mode", "point", "set", "Hit", "Recall", "Precision", "F1",
                           "mean nodes"], rows))
    qa = [g for g in res if "qa" in g]
    if qa:
        expla = cfg["format"] == "explagraphs"
        out.append("## Answers\n")
        head = ["method", "mode", "point", "n"] + (["Accuracy"] if expla else
                                                     ["Hit@1", "Hit@any", "substring hit",
                                                      "answer F1"])
        out.append(_table(head, [
            (g["method"], g["mode"], g["label"], g["n"],
             *([_f(g["qa"]["hit@1"], True)] if expla else
               [_f(g["qa"][k], True) for k in ("hit@1", "hit@any", "substring_hit",
                                                "answer_f1")]))
            for g in qa]))
    ooc = [g for g in res if "out_of_candidate" in g]
    if ooc:
        out.append("## Out-of-candidate names (Appendix F)\n")
        out.append(_table(["method", "mode", "point", "per question", "grounded %",
                           "hallucination rate %"], [
            (g["method"], g["mode"], g["label"], _f(g["out_of_candidate"]["per_question"]),
             _f(g["out_of_candidate"]["grounded"], True),
             _f(g["out_of_candidate"]["hallucination_rate"], True)) for g in ooc]))
    ref = report.get("reference_point", {})
    at_ref = [g for g in res if all(ref.get(k) == v for k, v in g["point"].items())]
    for key, title in (("by_hop", "hop"), ("by_type", "question type")):
        grp = [g for g in at_ref if key in g]
        if not grp:
            out.append(f"## Per {title}\n\nNot derivable for these questions"
                       + (" (MetaQA: a `*_qtype` file beside the questions gives the types)"
                          if key == "by_type" else " (no `N-hop` in the path, no qtype file, "
                          "no `hop` field)") + ".\n")
            continue
        what = "Hit@1 % where a generator answered, else retrieval Hit % (mean nodes)"
        out.append(f"## Per {title}\n\n{what}"
                   + (f", at {_md(point_label(ref))}" if ref else "") + ".\n")
        cats = sorted({c for g in grp for c in g[key]}, key=str)

        def cell(b: dict[str, Any] | None) -> str:
            if not b:
                return "–"
            if "hit@1" in b:
                return _f(b["hit@1"], True)
            return f"{_f(b.get('hit'), True)} ({_f(b.get('size'))})" if "hit" in b else "–"

        out.append(_table([title, "n"] + [_series_name(g, ref) for g in grp], [
            (c, max(g[key].get(c, {}).get("n", 0) for g in grp),
             *[cell(g[key].get(c)) for g in grp]) for c in cats]))
    out.append("## Latency (ms)\n")
    out.append(_table(["method", "mode", "point", "stage", "p50", "p95", "mean"], [
        (g["method"], g["mode"], g["label"], stage, v["p50_ms"], v["p95_ms"], v["mean_ms"])
        for g in res for stage, v in g["latency"].items() if v]))
    if plots and report.get("plots"):
        out.append("## Plots\n")
        out += [f"![{p}]({p})\n" for p in report["plots"]]
    out.append("## Metric definitions\n")
    out.append(report["definitions"])
    return "\n".join(out)


# --- plots --------------------------------------------------------------------------------


def _series_name(g: dict[str, Any], skip: Iterable[str] = ()) -> str:
    """"method (mode) [the point's settings but ``skip``]"."""
    skip = set(skip)
    rest = {k: v for k, v in g["point"].items() if k not in skip}
    name = g["method"] if g["mode"] == "retrieval" else f"{g['method']} ({g['mode']})"
    return name + (f" [{point_label(rest)}]" if rest else "")


def _series(res: Sequence[dict[str, Any]], param: str) -> dict[str, list[dict[str, Any]]]:
    """Groups that vary ``param``, by curve (method, mode and the other settings), each
    sorted by the parameter's value."""
    out: dict[str, list[dict[str, Any]]] = {}
    for g in res:
        if param in g["point"]:
            out.setdefault(_series_name(g, [param]), []).append(g)
    return {k: sorted(v, key=lambda g: g["point"][param]) for k, v in out.items()}


def _size_series(res: Sequence[dict[str, Any]]) -> dict[str, tuple[str | None,
                                                                 list[dict[str, Any]]]]:
    """Coverage-vs-size curves: per method (and mode and other settings), its groups along
    its retriever's size setting (k for pcst, top_triples, top_egos: `SIZE_FIELD`) when swept,
    sorted by it; a method without one is a single point."""
    out: dict[str, tuple[str | None, list[dict[str, Any]]]] = {}
    for g in res:
        m = METHODS.get(g["method"])
        size = SIZE_FIELD.get(m.retriever or "") if m else None
        param = next((p for p in ("k", size) if p and p in g["point"]
                      and (p != "k" or size == "k_nodes")), None)
        name = _series_name(g, [param] if param else [])
        out.setdefault(name, (param, []))[1].append(g)
    return {k: (p, sorted(v, key=lambda g: g["point"][p]) if p else v)
            for k, (p, v) in out.items()}


def _at(res: Sequence[dict[str, Any]], ref: Point) -> list[dict[str, Any]]:
    """The groups at the reference point (each group's own parameters)."""
    return [g for g in res if all(ref.get(k) == v for k, v in g["point"].items())]


def write_plots(report: dict[str, Any], out_dir: Path, ref: Point) -> list[str]:
    """PNG plots (matplotlib, Agg) into ``out_dir``; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = report["results"]
    written: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=120)
        plt.close(fig)
        written.append(name)

    ret = [g for g in res if "retrieval" in g]
    # coverage vs size (TaLenT Figure 3): one curve per method across k (or one point each)
    if ret:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
        for (name, (param, grp)), marker in zip(_size_series(ret).items(),
                                                itertools.cycle("osD^vP*X"), strict=False):
            xs = [g["retrieval"]["nodes"]["size"] for g in grp]
            for ax, metric in zip(axes, ("hit", "recall"), strict=True):
                ys = [100 * g["retrieval"]["nodes"][metric] for g in grp]
                ax.plot(xs, ys, marker=marker, label=name)
                for g, x, y in zip(grp, xs, ys, strict=True):
                    if param:
                        ax.annotate(f"{param}={g['point'][param]}", (x, y), fontsize=7,
                                    textcoords="offset points", xytext=(3, 3))
        for ax, metric in zip(axes, ("Hit", "Recall"), strict=True):
            ax.set_xlabel("mean number of nodes retrieved")
            ax.set_ylabel(f"{metric} of the gold answers (%)")
            ax.set_title(f"Coverage ({metric}) vs size")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        save(fig, "coverage_vs_size.png")
    # per hop / per type bars: Hit@1 where a generator answered, else retrieval Hit
    ref_groups = _at(res, ref)
    for key, title in (("by_hop", "hop"), ("by_type", "question type")):
        grp = [g for g in ref_groups if key in g]
        if not grp:
            continue
        qa = any("hit@1" in b for g in grp for b in g[key].values())
        metric, ylabel = ("hit@1", "Hit@1 (%)") if qa else ("hit", "retrieval Hit (%)")
        grp = [g for g in grp if any(metric in b for b in g[key].values())]
        cats = sorted({c for g in grp for c in g[key]}, key=str)
        width = 0.8 / max(1, len(grp))
        fig, ax = plt.subplots(figsize=(min(16, max(6, 0.6 * len(cats) * max(1, len(grp)))), 5))
        for i, g in enumerate(grp):
            xs = [j + i * width for j in range(len(cats))]
            ys = [100 * g[key].get(c, {}).get(metric, 0.0) for c in cats]
            ax.bar(xs, ys, width, label=_series_name(g, ref))
        ax.set_xticks([j + width * (len(grp) - 1) / 2 for j in range(len(cats))])
        ax.set_xticklabels(cats, rotation=30 if key == "by_type" else 0, ha="right"
                           if key == "by_type" else "center", fontsize=8)
        ax.set_xlabel(title)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 105)
        ax.set_xlim(-0.6, len(cats))
        ax.set_title(f"{ylabel.split(' (')[0]} per {title}"
                     + (f" at {point_label(ref)}" if ref else ""))
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1))
        ax.grid(axis="y", alpha=0.3)
        save(fig, f"{key}.png")
    # latency per stage: one bar per method / mode, stacked by stage (p50), total p95 marked
    lat = [g for g in ref_groups if g["latency"]]
    if lat:
        parts = [st for st in STAGES if st not in ("retrieve_total", "total")
                 and any(g["latency"].get(st) for g in lat)]
        fig, ax = plt.subplots(figsize=(12, 1.5 + 0.45 * len(lat)))
        ys = list(range(len(lat)))
        left = [0.0] * len(lat)
        for st in parts:
            widths = [(g["latency"].get(st) or {}).get("p50_ms", 0) for g in lat]
            ax.barh(ys, widths, 0.6, left=left, label=f"{st} (p50)")
            left = [a + b for a, b in zip(left, widths, strict=True)]
        p95 = [(g["latency"].get("total") or {}).get("p95_ms") for g in lat]
        ax.plot([x if x is not None else float("nan") for x in p95], ys, "k|",
                markersize=14, label="total p95")
        ax.set_yticks(ys)
        ax.set_yticklabels([_series_name(g, ref) for g in lat], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("latency per question (ms): stages stacked at their p50")
        ax.set_title("Latency per stage" + (f" at {point_label(ref)}" if ref else ""))
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.grid(axis="x", alpha=0.3)
        save(fig, "latency.png")
    # sweeps: node-set Hit / Recall, mean nodes and Hit@1 against each swept setting
    for param in dict.fromkeys(k for g in res for k in g["point"]):
        curves = _series(res, param)
        panels = [("Hit / Recall of the node set (%)", "retrieval"), ("mean nodes", "size")]
        if any("qa" in g for grp in curves.values() for g in grp):
            panels.append(("Hit@1 of the answers (%)", "qa"))
        fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.5))
        colours = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
        for (name, grp), marker, colour in zip(curves.items(), itertools.cycle("osD^vP*X"),
                                               colours, strict=False):
            xs = [g["point"][param] for g in grp]
            for ax, (_, what) in zip(axes, panels, strict=True):
                if what == "retrieval" and all("retrieval" in g for g in grp):
                    ax.plot(xs, [100 * g["retrieval"]["nodes"]["hit"] for g in grp],
                            marker=marker, color=colour, label=f"{name} Hit")
                    ax.plot(xs, [100 * g["retrieval"]["nodes"]["recall"] for g in grp],
                            marker=marker, color=colour, linestyle="--", label=f"{name} Recall")
                elif what == "size" and all("retrieval" in g for g in grp):
                    ax.plot(xs, [g["retrieval"]["nodes"]["size"] for g in grp], marker=marker,
                            color=colour, label=name)
                elif what == "qa" and all("qa" in g for g in grp):
                    ax.plot(xs, [100 * g["qa"]["hit@1"] for g in grp], marker=marker,
                            color=colour, label=name)
        for ax, (label, _) in zip(axes, panels, strict=True):
            ax.set_xlabel("lambda (retriever adapter)" if param == "lambda"
                          else "k (k_nodes = k_edges = beam)" if param == "k" else param)
            if param == "lambda" and all(v > 0 for g in res for v in
                                         [g["point"].get("lambda", 1)]):
                ax.set_xscale("log")
            ax.set_ylabel(label)
            ax.set_title(f"{label.split(' (')[0]} vs {param}")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
        save(fig, f"sweep_{param}.png")
    return written
