"""ExplaGraphs (label task): training records and pseudo-gold node annotation (App. A.2).

ExplaGraphs gives only a stance label (support / counter). Following the paper, an LLM is
shown (i) the explanation graph, (ii) both arguments and (iii) the gold label, and asked for
the nodes on the critical reasoning path; those nodes become V* for the retriever's weighted
objective. The generator is still trained on the label. The whole (small) graph is S.

The 135M base model gives almost no usable annotation, so the shipped retriever is trained on
a rule instead (`path_gold`): the nodes on the graph's shortest paths linking a concept of
argument 1 to a concept of argument 2 (concepts matched by content-word overlap).

Annotations are cached in JSONL, one line per example keyed by a hash of the example and the
annotator; re-running annotates only what is missing. Names the annotator gives that are not
nodes of the graph are dropped (pseudo-gold must lie in S); ``raw`` keeps its output.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import re
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from tqdm.auto import tqdm

from talent_core.errors import DataError
from talent_core.llm.context import candidate_view
from talent_core.llm.data import TrainingExample
from talent_core.llm.parsing import parse_selection
from talent_core.llm.prompts import annotator_prompt, explagraphs_question
from talent_core.models import Candidate, CandidateEdge, CandidateNode
from talent_core.questions import LABELS, parse_graph

log = logging.getLogger(__name__)


def example_id(arg1: str, arg2: str) -> str:
    """An example's id everywhere (store, training examples, reports): ``eg-`` + 12 hex digits
    of SHA-1 over the stripped ``arg1 TAB arg2`` (an identical argument pair is one example)."""
    return "eg-" + hashlib.sha1(f"{arg1.strip()}\t{arg2.strip()}".encode()).hexdigest()[:12]


class ExplaGraphsRecord(BaseModel):
    arg1: str
    arg2: str
    label: str
    triples: list[tuple[str, str, str]]
    source: str = ""  # file:line

    @property
    def question(self) -> str:
        return explagraphs_question(self.arg1, self.arg2)

    @property
    def id(self) -> str:
        return example_id(self.arg1, self.arg2)

    def key(self) -> str:
        """A hash of the example's content (the annotation cache's key)."""
        text = json.dumps([self.arg1, self.arg2, self.label, self.triples])
        return hashlib.sha1(text.encode()).hexdigest()


def read_explagraphs(path: Path | str) -> list[ExplaGraphsRecord]:
    """The GraphQA TSV (columns arg1, arg2, label, graph; some rows CSV-quoted)."""
    path = Path(path)
    out = []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        missing = {"arg1", "arg2", "label", "graph"} - set(reader.fieldnames or [])
        if missing:
            raise DataError(f"{path}:1: missing columns {sorted(missing)}")
        for row in reader:
            line = reader.line_num
            label = (row.get("label") or "").strip().lower()
            if label not in LABELS:
                raise DataError(f"{path}:{line}: label {row.get('label')!r} is not "
                                "support/counter")
            try:
                triples = parse_graph(row.get("graph") or "")
            except ValueError as e:
                raise DataError(f"{path}:{line}: {e}") from e
            out.append(ExplaGraphsRecord(arg1=row["arg1"], arg2=row["arg2"], label=label,
                                         triples=triples, source=f"{path}:{line}"))
    return out


def to_candidate(record: ExplaGraphsRecord) -> Candidate:
    """The whole explanation graph as S (concept text is the node id within the graph)."""
    return graph_candidate(record.question, record.triples)


def graph_candidate(question: str, triples: Sequence[tuple[str, str, str]]) -> Candidate:
    """An explanation graph's triples as S for ``question`` (a concept is one node, matched
    without case; its first spelling is its name)."""
    names: dict[str, str] = {}
    for a, _, b in triples:
        for c in (a, b):
            names.setdefault(c.lower(), c)
    nodes = [CandidateNode(id=f"c{i}:{k}", name=v) for i, (k, v) in enumerate(names.items())]
    ids = {n.id.split(":", 1)[1]: n.id for n in nodes}
    edges = [CandidateEdge(src=ids[a.lower()], rel=r, dst=ids[b.lower()])
             for a, r, b in triples]
    return Candidate(question=question, nodes=nodes, edges=edges)


def to_example(record: ExplaGraphsRecord, gold_nodes: Sequence[str] | None) -> TrainingExample:
    return TrainingExample(question=record.question, candidate=to_candidate(record),
                           answers=[record.label],
                           gold_nodes=list(gold_nodes) if gold_nodes is not None else None,
                           id=record.id)


class Annotation(BaseModel):
    key: str
    annotator: str
    nodes: list[str]  # pseudo-gold node names (nodes of the graph), lowercase
    raw: str


def _read_cache(path: Path) -> dict[str, Annotation]:
    out: dict[str, Annotation] = {}
    if not path.is_file():
        return out
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                a = Annotation.model_validate_json(line)
            except ValueError:
                log.warning("%s:%d: unreadable annotation ignored (re-annotated)", path, lineno)
                continue
            out[a.key] = a
    return out


def annotate(
    records: Sequence[ExplaGraphsRecord],
    lm: Any,
    cache_path: Path,
    adapter: str | None = None,
    max_new_tokens: int = 64,
    progress: bool = True,
) -> list[Annotation]:
    """Pseudo-gold nodes for every record, with ``lm`` (a `LoadedLM`) as the annotator."""
    cache_path = Path(cache_path)
    annotator = f"{lm.base_name}" + (f"+{adapter}" if adapter else "")
    cached = _read_cache(cache_path)
    out: list[Annotation] = []
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    fresh = 0
    with cache_path.open("a", encoding="utf-8") as sink:
        for rec in tqdm(records, desc="pseudo-gold annotation", unit="ex", disable=not progress):
            key = hashlib.sha1(f"{annotator}\x00{rec.key()}".encode()).hexdigest()
            ann = cached.get(key)
            if ann is None:
                candidate = to_candidate(rec)
                rendered = annotator_prompt(lm.tokenizer, rec.arg1, rec.arg2, rec.label,
                                            candidate_view(candidate).csv(), lm.base_name)
                gen = lm.generate(rendered.prompt, adapter, max_new_tokens)
                sel = parse_selection(gen.text, candidate, truncated=gen.truncated)
                names = list(dict.fromkeys(n.name.lower() for n in sel.selected))
                ann = Annotation(key=key, annotator=annotator, nodes=names, raw=gen.text)
                sink.write(ann.model_dump_json() + "\n")
                sink.flush()
                cached[key] = ann
                fresh += 1
            out.append(ann)
    empty = sum(1 for a in out if not a.nodes)
    log.info("annotations: %d new, %d cached, %d with no node of the graph", fresh,
             len(out) - fresh, empty)
    return out


_STOP = frozenset("""a an the of to in on for and or but is are was were be been being it its
this that these those as at by with from not no do does did can could should would will may
might must have has had they them their he she his her we our you your i me my so than then
there if into about more most very all any some such only also just""".split())


def content_words(text: str) -> set[str]:
    """Lowercase word stems (a crude suffix cut) of ``text`` without stopwords: what
    `path_gold` matches concepts to arguments by."""
    out = set()
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if w in _STOP or len(w) < 3:
            continue
        for suf in ("ing", "ies", "es", "ed", "s"):
            if w.endswith(suf) and len(w) - len(suf) >= 3:
                w = w[: -len(suf)]
                break
        out.add(w)
    return out


class PathGold(BaseModel):
    nodes: list[str]  # pseudo-gold node names (lowercase), in graph order
    rule: str  # "path" (arg1 -> arg2 paths), "overlap" (one side matched) or "all"


def path_gold(record: ExplaGraphsRecord) -> PathGold:
    """Pseudo-gold V* by rule (the annotator the paper uses does not run here): every node on
    a shortest undirected path from a concept sharing a content word with argument 1 to one
    sharing a content word with argument 2 ("path"; concepts matching both count as matched
    and link what only one argument names); when one side matches no concept, the
    matched concepts and their neighbours ("overlap"); when neither does, the whole graph
    ("all", the paper's S)."""
    order: list[str] = []
    adj: dict[str, set[str]] = {}
    for a, _, b in record.triples:
        a, b = a.lower(), b.lower()
        for c in (a, b):
            if c not in adj:
                adj[c] = set()
                order.append(c)
        adj[a].add(b)
        adj[b].add(a)
    w1, w2 = content_words(record.arg1), content_words(record.arg2)
    m1 = [c for c in order if content_words(c) & w1]
    m2 = [c for c in order if content_words(c) & w2]
    if m1 and m2:
        # a concept matching both arguments would be a path of length 0: link what only
        # one argument names, where there is such, and keep the shared concepts too
        src_set = [c for c in m1 if c not in m2] or m1
        dst_set = [c for c in m2 if c not in m1] or m2
        on_path: set[str] = set(m1) & set(m2)
        for src in src_set:
            dist, parents = {src: 0}, {src: set()}  # BFS keeping every shortest parent
            queue = deque([src])
            while queue:
                u = queue.popleft()
                for v in adj[u]:
                    if v not in dist:
                        dist[v] = dist[u] + 1
                        parents[v] = {u}
                        queue.append(v)
                    elif dist[v] == dist[u] + 1:
                        parents[v].add(u)
            reach = [t for t in dst_set if t in dist]
            if not reach:
                continue
            best = min(dist[t] for t in reach)
            stack = [t for t in reach if dist[t] == best]
            walked: set[str] = set()
            while stack:  # walk every shortest path back to src
                v = stack.pop()
                if v not in walked:
                    walked.add(v)
                    stack.extend(parents[v])
            on_path |= walked
        if on_path:
            return PathGold(nodes=[c for c in order if c in on_path], rule="path")
    matched = set(m1) | set(m2)
    if matched:
        near = matched | {v for c in matched for v in adj[c]}
        return PathGold(nodes=[c for c in order if c in near], rule="overlap")
    return PathGold(nodes=list(order), rule="all")
