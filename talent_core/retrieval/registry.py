"""The retriever registry: every module of `talent_core.retrieval.retrievers` that defines
``RETRIEVER`` (found with pkgutil, so a new retriever is one new module), in menu order.
`config` builds `RetrievalConfig` from it; `candidate.retrieve` dispatches through it; the
CLI, the UI and the report's methods list it."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from talent_core.retrieval import retrievers as _package
from talent_core.retrieval.plugin import Retriever


@functools.cache
def _registry() -> dict[str, Retriever]:
    found: dict[str, Retriever] = {}
    for info in pkgutil.iter_modules(_package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{_package.__name__}.{info.name}")
        r = getattr(module, "RETRIEVER", None)
        if not isinstance(r, Retriever):
            raise TypeError(f"{module.__name__}: a retriever module defines RETRIEVER "
                            "(a talent_core.retrieval.plugin.Retriever)")
        if r.name in found:
            raise TypeError(f"{module.__name__}: retriever {r.name!r} is registered twice")
        found[r.name] = r
    return {r.name: r for r in sorted(found.values(), key=lambda r: (r.order, r.name))}


def retrievers() -> tuple[Retriever, ...]:
    """Every registered retriever, in menu order (the first is the default)."""
    return tuple(_registry().values())


def names() -> tuple[str, ...]:
    """The registered retrievers' names (`--method` choices), in menu order."""
    return tuple(_registry())


def get(name: str) -> Retriever:
    """The retriever called ``name`` (KeyError naming the registered ones)."""
    try:
        return _registry()[name]
    except KeyError:
        raise KeyError(f"no retriever {name!r} (registered: {', '.join(names())})") from None


@dataclass(frozen=True)
class ReportSpec:
    """One `eval --report` method a retriever declares: ``overrides`` (``method`` included)
    give its candidate; ``retriever``: whose settings it reads."""

    name: str
    description: str
    retriever: str
    overrides: Mapping[str, Any]


def report_methods() -> list[ReportSpec]:
    """The retrieval-only report methods of every retriever, in menu order."""
    return [ReportSpec(m.name, m.description, r.name, {"method": r.name, **m.overrides})
            for r in retrievers() for m in r.report]


def llm_report_retrievers() -> list[str]:
    """The retrievers whose candidate the report's LLM methods also run on (llm-*@name)."""
    return [r.name for r in retrievers() if r.llm_report]
