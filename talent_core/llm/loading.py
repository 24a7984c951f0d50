"""Both LLM roles on one base model: `load_models` (the retriever and the generator share the
`LoadedLM`). Above `lm`, `retriever` and `generator`, which it composes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from talent_core.config import (
    GENERATOR_MAX_NEW_TOKENS,
    RETRIEVER_MAX_NEW_TOKENS,
    Settings,
    get_settings,
)
from talent_core.llm.generator import GeneratorModel
from talent_core.llm.lm import LanguageModel, LoadedLM, Stage
from talent_core.llm.models import read_meta
from talent_core.llm.retriever import RetrieverModel


def load_models(
    base_model: str | None = None, retriever_dir: Path | None = None,
    generator_dir: Path | None = None, settings: Settings | None = None,
    device: str | None = None, retriever_max_new_tokens: int = RETRIEVER_MAX_NEW_TOKENS,
    generator_max_new_tokens: int = GENERATOR_MAX_NEW_TOKENS,
    embed: Callable[[list[str]], Any] | None = None, on_stage: Stage | None = None,
    store: Any = None,
) -> tuple[RetrieverModel, GeneratorModel]:
    """Both models on ONE base model. A missing adapter means the frozen base model.
    ``base_model`` defaults to the adapters' base (they must agree), then to settings.
    ``embed``: the store's embedding function (a graph-prompt generator needs it);
    ``store``: where it reads the stored vectors of KG nodes and relations."""
    metas = [read_meta(d) for d in (retriever_dir, generator_dir) if d is not None]
    if base_model is None and metas:
        base_model = metas[0].base_model
    adapters: dict[str, Path] = {}
    if retriever_dir is not None:
        adapters["retriever"] = Path(retriever_dir)
    if generator_dir is not None:
        adapters["generator"] = Path(generator_dir)
    settings = settings or get_settings()
    lm: LanguageModel
    if settings.llm_backend == "openai":
        from talent_core.llm.graph_prompt import has_graph_prompt
        from talent_core.llm.server import ServerLM, graph_prompt_refused

        if generator_dir is not None and has_graph_prompt(Path(generator_dir)):
            raise graph_prompt_refused()

        if on_stage is not None:
            on_stage(f"language-model server {settings.llm_base_url}", 0, 1)
        lm = ServerLM(adapters, settings)  # an adapter the server does not serve: frozen
        if on_stage is not None:
            on_stage("done", 1, 1)
    else:
        lm = LoadedLM(base_model, adapters, settings, device, on_stage)
    task = next((m.task for m in metas), None)
    retriever = RetrieverModel(lm, "retriever" if "retriever" in lm.metas else None, task,
                               retriever_max_new_tokens)
    generator = GeneratorModel(lm, "generator" if "generator" in lm.metas else None, task,
                               generator_max_new_tokens, embed=embed, store=store)
    return retriever, generator
