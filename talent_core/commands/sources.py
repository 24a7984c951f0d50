"""`talent sources`: the loads a store holds (each with its counts) and the store's totals;
`--collisions`: the names several entities share (a name lookup of one is ambiguous)."""

from __future__ import annotations

import json as jsonlib
from typing import Annotated

import typer

from talent_core.commands.console import echo
from talent_core.text import printable


def sources(
    json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    collisions: Annotated[bool, typer.Option(
        "--collisions", help="List the names several entities share instead (normalised: "
        "case and spacing ignored), most shared first.")] = False,
    limit: Annotated[int, typer.Option(
        min=0, help="--collisions: names listed (0: all); the total is always given.")] = 50,
) -> None:
    """Each source (a loaded file or --source NAME) with the triples it asserts, those only
    it asserts (what `talent unload` removes), its sha256 and load counts; and the store's
    totals. `legacy`: triples of a store loaded before sources were recorded."""
    from talent_core.config import get_settings
    from talent_core.loaders import sources as src

    store = src.open_resumed(get_settings())  # a killed unload is finished first
    try:
        if collisions:
            found = src.collisions(store)
            shown = found[:limit] if limit else found
            if json:
                typer.echo(jsonlib.dumps({"names": len(found),
                                          "entities": sum(c.count for c in found),
                                          "collisions": [c.model_dump() for c in shown]}))
                return
            echo(f"{len(found):,} names shared by {sum(c.count for c in found):,} entities"
                 + (f" (the first {len(shown):,})" if len(shown) < len(found) else ""))
            for c in shown:
                more = ", ..." if c.count > len(c.ids) else ""
                echo(f"  {c.count:>4}  {c.name}  [{', '.join(c.ids)}{more}]")
            return
        report = src.list_sources(store)
    finally:
        store.close()
    if json:
        typer.echo(report.model_dump_json(indent=2))
        return
    rows = [("id", "name", "state", "triples", "only", "rows read", "rejected", "format",
             "sha256", "loaded at")]  # fmt: skip
    for s in report.sources:  # every cell escaped: a name with a newline keeps to its row
        rows.append(tuple(printable(c) for c in (
            str(s.id), s.name, s.state, f"{s.triples:,}", f"{s.only:,}", f"{s.rows_read:,}",
            f"{s.rejected:,}", s.format, (s.sha256 or "")[:12], s.created)))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    for s in report.sources:
        if s.state == "replacing":
            echo(f"note: source {s.id} ({printable(s.name)!r}) is `replacing`: its replace "
                 f"did not finish and it holds both versions' triples; run `talent load FILE "
                 f"--replace {s.id}` again, or `talent unload {s.id}`")
    t = report.totals
    echo(f"store: {t.entities:,} entities ({t.entities_with_embedding:,} with embeddings), "
         f"{t.relations:,} relations, {t.triples:,} triples [{t.store}]")
