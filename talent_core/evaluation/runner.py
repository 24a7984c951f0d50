"""The runner: computes evaluation rows on one Pipeline. `talent eval` (`evaluate`: the
pipeline's own retrieval settings and mode per question) and `talent eval --report`
(`Runner.row`: a method x mode x sweep point) take the same path: `Runner.answer` (the
candidate, cached per question and retrieval config, then `Pipeline.answer`) and
`score_answer` (the row's metrics against the gold answers).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from talent_core.errors import LLMServerError
from talent_core.evaluation.datasets import Item
from talent_core.evaluation.methods import (
    METHODS,
    Method,
    Point,
    method_modes,
    point_label,
    project,
)
from talent_core.evaluation.metrics import (
    hallucinated,
    hit_at_1,
    hit_at_any,
    name_set,
    retrieval_scores,
    substring_hit,
)
from talent_core.evaluation.summary import summarise
from talent_core.evaluation.sweep import Sweep, retrieval_overrides
from talent_core.models import Answer, Candidate, Decode
from talent_core.questions import QARecord
from talent_core.text import answer_key

if TYPE_CHECKING:
    from talent_core.llm.retriever import RetrieverModel
    from talent_core.pipeline import Mode, Pipeline
    from talent_core.planning import Plan

log = logging.getLogger(__name__)


def score_answer(rec: QARecord, ans: Answer) -> dict[str, Any]:
    """One row: what was retrieved/selected/answered and its scores (pure)."""
    cand_names = [n.name for n in ans.candidate.nodes]
    gold = name_set(rec.answers)
    row: dict[str, Any] = {
        "id": rec.id,
        "question": rec.question,
        "gold": rec.answers,
        "candidate": retrieval_scores(cand_names, rec.answers).as_dict(),
        "truncated": ans.candidate.truncated,
        "timings_ms": ans.timings_ms,
    }
    if ans.candidate.links:  # the entity linking: (mention, entity or none, score, how)
        row["links"] = [{"mention": lk.mention, "id": lk.id, "name": lk.name,
                         "score": lk.score, "how": lk.how} for lk in ans.candidate.links]
    if ans.not_in_kg:  # abstained: the answer is "not in the KG"
        row["not_in_kg"] = ans.not_in_kg
    if ans.selection is not None:
        sel = ans.selection
        in_s = [n.name for n in sel.selected]
        outside = [o.name for o in sel.out_of_candidate]
        row["selected"] = retrieval_scores(in_s + outside, rec.answers).as_dict()
        row["selected_in_s"] = retrieval_scores(in_s, rec.answers).as_dict()
        row["out_of_candidate"] = [o.model_dump() for o in sel.out_of_candidate]
        row["selection_truncated"] = sel.truncated  # ran to max_new_tokens without EOS
        if sel.ranked:  # ranked retriever: (score, is gold) per node name, for size/coverage
            row["retriever_ranked"] = [[r.score, int(answer_key(r.name) in gold)]
                                       for r in sel.ranked]
    row["decode"] = ans.decode
    if ans.ranked:
        # [name, score, is gold] (+ [model score, path prior] under a relation-path plan)
        row["answer_ranked"] = [[r.name, r.score, int(answer_key(r.name) in gold)]
                                + ([r.lm_score, r.prior] if r.prior is not None else [])
                                for r in ans.ranked[:20]]
    if ans.plan:
        row["plan"] = [[p.text, p.prob, p.ends] for p in ans.plan]
    if ans.raw or ans.answer:
        row["answer"] = ans.answer
        row["hit@1"] = hit_at_1(ans.answer, rec.answers)
        row["answer_f1"] = retrieval_scores(ans.answer, rec.answers).f1
    return row


def score_row(item: Item, ans: Answer, qa: bool) -> dict[str, Any]:
    """One report row's metrics (pure): `score_answer` against the retrieval gold, then
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
    row.pop("answer_f1", None)
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
    while that question is being run. ``sweeps``: the report's (lambda: adapter dirs)."""

    def __init__(self, pipe: Pipeline, sweeps: Sequence[Sweep] = ()):
        self.pipe = pipe
        self.sweeps = list(sweeps)
        self._item: str | None = None
        self._cands: dict[str, tuple[Candidate, Plan | None]] = {}
        self._retrievers: dict[str, RetrieverModel] = {}
        self.retrievals = 0  # candidate retrievals run (the cache's misses)

    def candidate(self, item: Item, point: Point, **retrieval: Any) -> Candidate:
        """The candidate of ``retrieval`` (RetrievalConfig overrides; the retriever defaults
        to pcst) at ``point``."""
        return self.planned(item, point, **retrieval)[0]

    def planned(self, item: Item, point: Point, **retrieval: Any
                ) -> tuple[Candidate, Plan | None]:
        """`candidate` and the plan retrieval made for it (answered without planning
        again), cached together."""
        if item.id != self._item:
            self._item, self._cands = item.id, {}
        overrides = {"method": "pcst", **retrieval_overrides(point), **retrieval}
        key = json.dumps(overrides, sort_keys=True)
        if key not in self._cands:
            self.retrievals += 1
            self._cands[key] = self.pipe.retrieve_planned(
                item.rec.question, item.rec.topic_entities or None, **overrides)
        return self._cands[key]

    def retriever(self, mode: str, point: Point) -> RetrieverModel | None:
        """The retriever a mode runs: the pipeline's own (None), the frozen base model, or
        the adapter of the point's lambda (loaded once onto the same base model)."""
        if mode in ("no-retriever", "retrieval"):
            return None
        from talent_core.llm.retriever import RetrieverModel  # torch: only for LLM modes

        own, _ = self.pipe.models
        if mode == "frozen":
            key = "frozen"
            if key not in self._retrievers:
                self._retrievers[key] = (own if own.frozen else RetrieverModel(
                    own.lm, None, own.task, own.max_new_tokens))
            return self._retrievers[key]
        if "lambda" not in point:
            return None
        path = next(s.dirs[str(point["lambda"])] for s in self.sweeps if s.name == "lambda")
        if path not in self._retrievers:
            name = f"retriever-lambda-{len(self._retrievers)}"
            own.lm.add_adapter(name, Path(path))
            self._retrievers[path] = RetrieverModel(own.lm, name, own.task, own.max_new_tokens)
        return self._retrievers[path]

    def answer(self, item: Item, point: Point, mode: str, decode: Decode | None = None,
               retrieval: dict[str, Any] | None = None) -> Answer:
        """One question in one mode: the candidate (the example's graph, else that of
        ``retrieval`` at ``point``), then `Pipeline.answer` (mode ``retrieval``: no language
        model; ``frozen``: the base model selects). ``total`` = the candidate's retrieval +
        the stages after it."""
        cand, plan = ((item.graph, None) if item.graph is not None
                      else self.planned(item, point, **(retrieval or {})))
        pipe_mode: Mode = ("retrieval" if mode == "retrieval" else
                           "no-retriever" if mode == "no-retriever" else "full")
        ans = self.pipe.answer(cand, pipe_mode, decode,
                               retriever=self.retriever(mode, point), plan=plan)
        timings = {**ans.timings_ms, "total": cand.timings_ms.get("total", 0.0)
                   + ans.timings_ms["total"]}
        return ans.model_copy(update={"timings_ms": timings})

    def compute(self, method: Method, item: Item, point: Point, mode: str) -> dict[str, Any]:
        """The metrics of one report row (`score_row`): the method's candidate (an
        equal-size method's size set from ``size_of``'s distinct names) in the row's mode."""
        retrieval = dict(method.retrieval or {})
        if method.size_of is not None:
            s = self.candidate(item, point, **method.size_of)
            retrieval["k_nodes"] = len(name_set(n.name for n in s.nodes))
        ans = self.answer(item, point, mode if method.llm else "retrieval", method.decode,
                          retrieval)
        return score_row(item, ans, qa=method.llm)

    def row(self, spec: Spec, config_hash: str) -> dict[str, Any]:
        metrics = self.compute(METHODS[spec.method], spec.item, spec.point, spec.mode)
        return {"key": spec.key, "config": config_hash, "id": spec.item.id,
                "hop": spec.item.hop, "qtype": spec.item.qtype, "method": spec.method,
                "mode": spec.mode, "point": spec.point, **metrics}


def evaluate(
    pipe: Pipeline, records: Iterable[QARecord], mode: Mode = "full", progress: bool = True,
    decode: Decode | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`talent eval` without --report: every question with the pipeline's own retrieval
    settings in ``mode``, scored by `score_answer`; returns (summary, rows). A question
    the language-model server fails on (TALENT_LLM_BACKEND=openai) is a row with its
    ``error``, counted as a miss; `SERVER_FAILURES` of them in a row stop the run (the
    server is down, not one question)."""
    runner = Runner(pipe)
    method = {"method": pipe.retrieval.method}  # the pipeline's retriever (reports: pcst)
    rows = []
    failures = 0
    for rec in tqdm(list(records), desc=f"eval ({mode})", disable=not progress, unit="q"):
        item = Item(id=rec.id, rec=rec, retrieval_gold=rec.answers)
        try:
            rows.append(score_answer(rec, runner.answer(item, {}, mode, decode, method)))
            failures = 0
        except LLMServerError as e:
            failures += 1
            if failures >= SERVER_FAILURES:
                raise
            log.warning("%s: %s; counted as a miss", rec.id, e)
            rows.append({"id": rec.id, "question": rec.question, "gold": rec.answers,
                         "error": str(e), "hit@1": 0.0, "answer_f1": 0.0, "truncated": False,
                         "timings_ms": {}})
    return summarise(rows), rows


SERVER_FAILURES = 3  # language-model server errors in a row that stop `evaluate`


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
