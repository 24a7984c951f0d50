"""`talent unload SOURCE`: take one load out of the store; `_change_summary` is also the
summary of `talent load FILE --replace SOURCE`."""

from __future__ import annotations

from typing import Annotated

import typer

from talent_core.commands.console import echo
from talent_core.models import SourceChange


def change_summary(c: SourceChange) -> str:
    """The one summary of an unload or a replace."""
    head = (f"{c.action} {c.source!r} (source {c.source_id}): "
            + (f"added {c.added:,}, removed {c.removed:,}, unchanged {c.unchanged:,}"
               if c.action == "replace" else f"removed {c.removed:,} assertions"))
    lines = [head, f"  deleted: {c.triples_deleted:,} triples no other source asserts, "
                   f"{c.entities_deleted:,} entities left without a triple (with their "
                   f"vectors), {c.relations_deleted:,} unused relations  ({c.seconds:.1f} s)"]
    if c.store_after is not None:
        s = c.store_after
        lines.append(f"  store: {s.entities:,} entities, {s.relations:,} relations, "
                     f"{s.triples:,} triples")
    return "\n".join(lines)


def unload(
    source: Annotated[str, typer.Argument(help="The source's name (or id), as `talent sources` "
                                          "lists it; `legacy` for triples loaded before "
                                          "sources were recorded.")],
    batch_size: Annotated[int | None, typer.Option(
        min=1, help="Triples / entities per delete statement (default: TALENT_BATCH_SIZE).")
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Remove a source: triples no other source asserts go, then entities left with no
    triple (and their vectors), then relations no triple uses. Killed at any point, the
    next command that opens the store finishes the job (each step is atomic and
    idempotent). A store that cannot write (a full disk) stops it with one line, exit 2."""
    from talent_core.config import get_settings
    from talent_core.loaders.sources import unload_source
    from talent_core.store import open_store

    settings = get_settings()
    store = open_store(settings)
    try:
        change = unload_source(store, source, batch_size or settings.batch_size,
                               settings=settings)
    finally:
        store.close()
    if json:
        typer.echo(change.model_dump_json(indent=2))
    else:
        echo(change_summary(change))
