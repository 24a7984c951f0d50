"""One Pipeline object for the CLI, the UI and evaluation: models and store opened once.

question -> seeds -> neighbourhood -> candidate S (retrieval/) -> selection (LLM retriever)
-> answer (LLM generator), with out-of-candidate names grounded against the KG.

Modes (the paper's ablations, §4 Table 4):
  "full"          R_theta selects from S, G_phi answers from (V-hat, E-hat)
  "no-retriever"  S is fed straight to G_phi (w/o retriever)
  "retrieval"     stop after S (no language model is loaded)
A retriever without an adapter directory is the frozen base model (the frozen-retriever
ablation).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Literal

from talent_core.config import Settings, get_settings
from talent_core.embedding import Embedder, get_embedder
from talent_core.models import Answer, Candidate, CandidateEdge, StoreStats
from talent_core.retrieval import RetrievalConfig, retrieve
from talent_core.store import GraphStore, open_store

log = logging.getLogger(__name__)

Mode = Literal["full", "no-retriever", "retrieval"]


class Pipeline:
    def __init__(
        self,
        settings: Settings | None = None,
        store: GraphStore | None = None,
        embedder: Embedder | None = None,
        retrieval: RetrievalConfig | None = None,
        retriever_dir: Path | None = None,
        generator_dir: Path | None = None,
        base_model: str | None = None,
    ):
        self.settings = settings or get_settings()
        self.store = store or open_store(self.settings)
        self._embedder = embedder
        self.retrieval = retrieval or RetrievalConfig()
        self.retriever_dir = Path(retriever_dir) if retriever_dir else None
        self.generator_dir = Path(generator_dir) if generator_dir else None
        self.base_model = base_model
        self._models = None

    # --- lazily loaded resources (loaded once) -----------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            s = self.settings
            self._embedder = get_embedder(s.embedding_model, s.device, s.embed_batch_size)
        return self._embedder

    @property
    def models(self):
        """(RetrieverModel, GeneratorModel) on one base model, loaded on first use."""
        if self._models is None:
            from talent_core.llm.infer import load_models

            s = self.settings
            self._models = load_models(
                self.base_model, self.retriever_dir, self.generator_dir, s,
                retriever_max_new_tokens=s.retriever_max_new_tokens,
                generator_max_new_tokens=s.generator_max_new_tokens,
            )
        return self._models

    # --- stages ----------------------------------------------------------------------------
    def stats(self) -> StoreStats:
        return self.store.stats()

    def retrieve(
        self, question: str, topic_entities: list[str] | None = None, **overrides
    ) -> Candidate:
        config = self.retrieval.model_copy(update=overrides) if overrides else self.retrieval
        return retrieve(question, self.store, self.embedder, config, topic_entities)

    def ask(
        self,
        question: str,
        topic_entities: list[str] | None = None,
        mode: Mode = "full",
        **overrides,
    ) -> Answer:
        t0 = time.perf_counter()
        candidate = self.retrieve(question, topic_entities, **overrides)
        timings = {f"retrieve_{k}": v for k, v in candidate.timings_ms.items()}
        if mode == "retrieval":
            timings["total"] = (time.perf_counter() - t0) * 1000
            return Answer(question=question, candidate=candidate, timings_ms=timings)

        retriever, generator = self.models
        selection = None
        if mode == "full":
            t = time.perf_counter()
            selection = retriever.select(question, candidate, lookup=self._lookup)
            timings["retriever"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        context = generator.context(question, candidate, selection)
        answers, raw = generator.answer(question, context)
        timings["generator"] = (time.perf_counter() - t) * 1000
        timings["total"] = (time.perf_counter() - t0) * 1000
        return Answer(
            question=question,
            answer=answers,
            raw=raw,
            candidate=candidate,
            selection=selection,
            edges=[CandidateEdge.model_validate(e.model_dump()) for e in context.kg_edges],
            timings_ms=timings,
        )

    def _lookup(self, names: list[str]) -> dict[str, str]:
        """Ground out-of-candidate names: normalised exact name match in the whole KG."""
        from talent_core.text import normalise_name

        found = self.store.entities_by_name(list(names))
        by_norm = {normalise_name(e.name): e.id for e in found}
        return {n: by_norm[normalise_name(n)] for n in names if normalise_name(n) in by_norm}

    def close(self) -> None:
        self.store.close()
