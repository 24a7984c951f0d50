"""What several commands share: the Pipeline they build from their options, and the notes
they print about it on stderr. The pipeline is imported when a command builds one (not when
`talent --help` imports the commands)."""

from __future__ import annotations

from pathlib import Path

import typer

from talent_core.commands.console import fail
from talent_core.commands.options import ModelChoice, check_decode
from talent_core.models import GENERATOR_TYPES


def pipeline_for(config, models: ModelChoice, question_format=None, store=None):
    """The Pipeline for ask / eval, with a clear message for a bad adapter choice."""
    from talent_core.pipeline import Pipeline

    m = models
    if m.generator_type is not None and m.generator_type not in GENERATOR_TYPES:
        raise fail(f"--generator-type must be {' or '.join(GENERATOR_TYPES)}, not "
                   f"{m.generator_type!r}")

    for d in (m.retriever, m.generator):
        if d is not None and not d.is_dir():
            raise fail(f"{d}: not an adapter directory")
    if m.frozen_retriever and m.retriever is not None:
        raise fail("--frozen-retriever and --retriever exclude each other")
    try:
        return Pipeline(retrieval=config, retriever_dir=m.retriever, generator_dir=m.generator,
                        base_model=m.base_model, adapters=m.adapters,
                        frozen_retriever=m.frozen_retriever, decode=check_decode(m.decode),
                        question_format=question_format, store=store,
                        generator_type=m.generator_type, planner=m.planner)
    except FileNotFoundError as e:
        raise fail(str(e)) from None


def empty_store_notice(pipe) -> None:
    """An empty store is said on stderr (where it is, and how to fill or choose one): a
    question over it would silently retrieve nothing."""
    stats = pipe.stats()
    if stats.triples == 0:
        typer.echo(f"note: the store {stats.store or ''} is empty: load a KG with `talent load` "
                   "or `talent demo --no-app`, or set TALENT_DATA_DIR to a loaded store's "
                   "folder" + (" (./.talent, the former default, is here: "
                               "TALENT_DATA_DIR=.talent opens it)"
                               if Path(".talent").is_dir() and Path(".talent").resolve()
                               != Path(pipe.settings.data_dir).expanduser().resolve()
                               else ""), err=True)


def frozen_notice(roles: list[str]) -> None:
    """Which roles run on the frozen base model, said on stderr."""
    if roles:
        typer.echo("note: no trained adapter for the " + " and the ".join(roles)
                   + ": the frozen base model runs in its place", err=True)

