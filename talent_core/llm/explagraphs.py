"""ExplaGraphs (label task): training records and pseudo-gold node annotation (App. A.2).

ExplaGraphs gives only a stance label (support / counter). Following the paper, an LLM is
shown (i) the explanation graph, (ii) both arguments and (iii) the gold label, and asked for
the nodes on the critical reasoning path; those nodes become V* for the retriever's weighted
objective. The generator is still trained on the label. The whole (small) graph is S.

Annotations are cached in JSONL, one line per example keyed by a hash of the example and the
annotator; re-running annotates only what is missing. Names the annotator gives that are not
nodes of the graph are dropped (pseudo-gold must lie in S); ``raw`` keeps its output.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
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
