"""What a retriever plug-in declares (`Retriever`) and the one signature every retriever has
(`retrieve(ctx: RetrievalContext) -> Candidate`); `registry` finds the plug-ins, one module
each under `talent_core.retrieval.retrievers`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from talent_core.embedding import Embedder
from talent_core.models import Candidate
from talent_core.retrieval.relations import QuestionEncoding
from talent_core.retrieval.seeds import SeedSet
from talent_core.store.base import GraphReader


class RetrieverSettings(BaseModel):
    """The base of a retriever's own settings: they join `RetrievalConfig` flat, so an unknown
    name is an error rather than silently ignored."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class RetrievalContext:
    """One question's retrieval after the shared seeding stage: what a retriever reads.
    ``cfg``: the `RetrievalConfig` (built from the plug-ins, so not imported here);
    ``timings`` takes the retriever's own stages (ms)."""

    question: str
    store: GraphReader
    embedder: Embedder
    encoding: QuestionEncoding
    seeds: SeedSet
    cfg: Any
    timings: dict[str, float]


@dataclass(frozen=True)
class Control:
    """One UI control of a retriever: a slider, or with ``choice`` a select box.

    ``sets``: the settings it sets, the first giving its default; ``lo`` / ``hi`` / ``options``
    None: from that setting's bounds / Literal choices; ``help`` None: the setting's
    description, "": none."""

    label: str
    key: str
    sets: tuple[str, ...]
    lo: int | None = None
    hi: int | None = None
    options: tuple[str, ...] | None = None
    help: str | None = None
    choice: bool = False


@dataclass(frozen=True)
class ReportMethod:
    """A retrieval-only method of `talent eval --report`: this retriever with ``overrides``."""

    name: str
    description: str
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Retriever:
    """A retriever plug-in.

    ``settings``: a pydantic model of its own settings (they join `RetrievalConfig` flat, so
    they become `--flag`s and override names); ``size``: the setting that sets its output
    size (coverage-vs-size sweeps); ``summary``: one phrase for `--method`'s help;
    ``order``: its place in menus; ``controls``: its UI controls (none: a slider of
    ``size``); ``report``: its `eval --report` methods; ``llm_report``: whether the report
    also runs the LLM methods on its candidate (llm-ranked@name, llm-free@name)."""

    name: str
    settings: type[BaseModel]
    size: str
    retrieve: Callable[[RetrievalContext], Candidate]
    summary: str
    order: int = 100
    controls: tuple[Control, ...] = ()
    report: tuple[ReportMethod, ...] = ()
    llm_report: bool = False

    def __post_init__(self) -> None:
        if self.size not in self.settings.model_fields:
            raise TypeError(f"retriever {self.name}: size setting {self.size!r} is not one of "
                            f"its settings {sorted(self.settings.model_fields)}")
