"""The report's methods: the one place a method is declared (`METHODS`), as data the runner
interprets, plus the LLM modes and how a sweep point projects onto a (method, mode) row.

A method reads a candidate (`Method.retrieval`: RetrievalConfig overrides; None: the
example's own graph, ExplaGraphs) and, when ``llm``, runs the language models on it in
each LLM mode. A retriever's own methods (pcst-*, subgraphrag, grag, ...) and whether the
LLM methods also run on its candidate (llm-*@retriever) come from its plug-in
(`talent_core.retrieval.registry`); the equal-size vector baseline, graph and the LLM
methods are declared here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from talent_core.retrieval import registry
from talent_core.retrieval.config import foreign_fields

REPORT_FORMATS = ("metaqa", "rog", "explagraphs")
LLM_MODES = ("full", "no-retriever", "frozen")
MODE_ORDER = ("retrieval", *LLM_MODES)

Point = dict[str, Any]  # sweep parameter -> value, e.g. {"k": 5, "lambda": 0.001}

# pcst-default's S as the LLM methods and the equal-size baseline read it (the retriever
# defaults to pcst: `runner.Runner.candidate`)
DEFAULT_S: Mapping[str, Any] = {"prizes": "default"}


@dataclass(frozen=True)
class Method:
    """One way of choosing nodes (and, for LLM methods, answers) for a question.

    ``retrieval``: the RetrievalConfig overrides of the candidate it reads (None: the
    example's graph); ``size_of``: the candidate whose distinct node names set this method's
    size setting (equal-size baselines); ``llm``: runs the language models in each LLM mode
    (on the example's graph where there is one); ``formats``: the question formats it
    applies to; ``retriever``: the retriever whose settings it reads (a sweep of another
    retriever's own setting does not multiply its rows; None: no retriever)."""

    name: str
    description: str
    retrieval: Mapping[str, Any] | None = None
    size_of: Mapping[str, Any] | None = None
    llm: bool = False
    formats: tuple[str, ...] = ("metaqa", "rog")
    decode: str | None = None
    retriever: str | None = "pcst"


def _llm_methods(retriever: str) -> list[Method]:
    return [Method(f"llm-{decode}@{retriever}", f"as llm-{decode}, on the {retriever} "
                   "retriever's candidate", {"method": retriever}, llm=True, decode=decode,
                   retriever=retriever)
            for decode in ("ranked", "free")]


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("vector", "vector top-k entities by question-to-name cosine (the vector "
           "retriever alone: no planned ends join), k = |S| of pcst-default for the same "
           "question (equal size)", {"method": "vector", "plan_join": 0}, size_of=DEFAULT_S),
    *(Method(r.name, r.description, r.overrides, retriever=r.retriever)
      for r in registry.report_methods()),
    Method("graph", "the whole explanation graph as S (ExplaGraphs)", None,
           formats=("explagraphs",), retriever=None),
    Method("llm-ranked", "LLM retriever V-hat, ranked decoding (on pcst-default's S; "
           "ExplaGraphs: the graph), generator ranked", DEFAULT_S, llm=True,
           formats=REPORT_FORMATS, decode="ranked"),
    Method("llm-free", "LLM retriever V-hat, free (greedy) decoding, generator free",
           DEFAULT_S, llm=True, formats=REPORT_FORMATS, decode="free"),
    *(m for r in registry.llm_report_retrievers() for m in _llm_methods(r)),
)}
DEFAULT_METHODS = {"metaqa": ["vector", "pcst-paper", "pcst-default"],
                   "rog": ["vector", "pcst-paper", "pcst-default"],
                   "explagraphs": ["graph", "llm-ranked"]}


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
