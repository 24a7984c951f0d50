"""`talent load` and `talent stats`: plain typer-annotated functions; talent_core/cli.py
registers them (`app.command("load")(load)`, `app.command("stats")(stats)`).
`python -m loaders.cli load ...` runs them standalone.

Exit codes of `load`: 0 loaded (in skip mode possibly with rejected rows, listed in the
rejects file); 1 bad input (`file:line: reason` on stderr; in fail mode nothing of the
failing batch and nothing after it was written); 2 usage errors (typer), an output that is
the input (`--rejects` naming the input file), no space left on device (`file: reason`).
"""

from __future__ import annotations

import json as jsonlib
import logging
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from loaders import FORMATS
from loaders.base import LoadError, LoadReport
from loaders.errors import OutputError
from talent_core.text import printable

log = logging.getLogger("loaders")


Format = Enum("Format", {f: f for f in FORMATS}, type=str)  # the --format choices


class OnErrorChoice(str, Enum):
    fail = "fail"
    skip = "skip"


class SelfLoopChoice(str, Enum):
    keep = "keep"
    reject = "reject"


class ConceptScope(str, Enum):
    example = "example"
    global_ = "global"


class Precision(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"


class RdfRelations(str, Enum):
    local = "local"
    iri = "iri"


def _setup_logging() -> None:
    """INFO from `loaders` to stderr (through tqdm, so the bar stays intact), unless the
    application configured logging already."""
    if logging.getLogger().handlers or log.handlers:
        if log.getEffectiveLevel() > logging.INFO:
            log.setLevel(logging.INFO)
        return

    class _TqdmHandler(logging.StreamHandler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                from tqdm import tqdm

                tqdm.write(self.format(record), file=sys.stderr)
                sys.stderr.flush()
            except Exception:  # noqa: BLE001 - logging must never raise
                self.handleError(record)

    h = _TqdmHandler()
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    log.addHandler(h)
    log.setLevel(logging.INFO)
    log.propagate = False


def _summary(r: LoadReport) -> str:
    lines = [
        f"{r.source} ({r.format}){' [dry run: nothing written]' if r.dry_run else ''}",
        f"  rows read {r.rows_read:,}  loaded {r.loaded:,}  duplicates {r.duplicates:,}  "
        f"rejected {r.rejected:,}  self-loops {r.self_loops:,}"
        + (f"  records {r.records:,}" if r.records else ""),
        (
            f"  new entities embedded {r.new_entities_embedded:,}  "
            f"new relations embedded {r.new_relations_embedded:,}"
        ),
        (
            f"  {r.seconds:.1f} s (embedding {r.embed_seconds:.1f} s)  "
            f"{r.triples_per_s:,.0f} triples/s, {r.triples_per_s_excl_embed:,.0f} excluding "
            "embedding"
        ),
    ]
    if r.store_after is not None:
        s = r.store_after
        lines.append(
            f"  store: {s.entities:,} entities, {s.relations:,} relations, {s.triples:,} triples"
            + (f" ({r.new_triples:+,} triples)" if r.new_triples is not None else "")
        )
    if r.rejects_file:
        lines.append(f"  rejected rows: {r.rejects_file}")
    if r.side_output_file:
        lines.append(f"  records kept in: {r.side_output_file}")
    return "\n".join(lines)


def load(
    path: Annotated[
        str,
        typer.Argument(
            help="Input file (or, for --format rog, a Hugging Face dataset name owner/name)."
        ),
    ],
    format: Annotated[
        Format | None,
        typer.Option("--format", "-f", help="Input format; guessed from the name if omitted."),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="Rows per write batch (default: TALENT_BATCH_SIZE)."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(min=0, help="Stop after N rows (records for rog / explagraphs)."),
    ] = None,
    on_error: Annotated[
        OnErrorChoice,
        typer.Option(help="fail: stop at the first bad row; skip: reject it and go on."),
    ] = OnErrorChoice.fail,
    rejects: Annotated[
        Path | None,
        typer.Option(
            help="With --on-error skip: JSONL of rejected rows (default: "
            "<data_dir>/rejects/<name>.rejects.jsonl)."
        ),
    ] = None,
    delimiter: Annotated[
        str | None,
        typer.Option(help="triples/explagraphs: field delimiter (tab, comma, ';', '|', ...)."),
    ] = None,
    columns: Annotated[
        str | None,
        typer.Option(
            help="triples: column mapping, e.g. head=subj,relation=pred,tail=obj "
            "(or positions head=0,relation=1,tail=2 for a file without header)."
        ),
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(
            help="rog/explagraphs: name of the questions file <data_dir>/questions/NAME.jsonl."
        ),
    ] = None,
    split: Annotated[
        str | None, typer.Option(help="rog from the Hugging Face Hub: the split (default: train).")
    ] = None,
    self_loops: Annotated[
        SelfLoopChoice,
        typer.Option(help="Rows with head == tail: keep (counted) or reject as bad rows."),
    ] = SelfLoopChoice.keep,
    max_line_length: Annotated[
        int | None,
        typer.Option(
            min=16,
            envvar="TALENT_MAX_LINE_LENGTH",
            help="Longest accepted line in bytes (default 1 MiB; 256 MiB for rog records).",
        ),
    ] = None,
    max_record_lines: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="triples/explagraphs: most lines one CSV record may span (quoted fields "
            "holding newlines; default 32). A quote left open longer makes its first line a "
            "bad row, and the lines after it are read as rows.",
        ),
    ] = None,
    concepts: Annotated[
        ConceptScope,
        typer.Option(help="explagraphs: concept nodes per example (default) or merged globally."),
    ] = ConceptScope.example,
    rdf_relations: Annotated[
        RdfRelations,
        typer.Option(help="ntriples: relation text = predicate local name or full IRI."),
    ] = RdfRelations.local,
    embed_precision: Annotated[
        Precision,
        typer.Option(
            help="Name embeddings in fp32 (identical to query time) or bf16 autocast "
            "(faster on CPUs with native bf16; cosine >= 0.9999 to fp32)."
        ),
    ] = Precision.fp32,
    embed_threads: Annotated[
        int | None,
        typer.Option(min=1, help="torch threads while embedding (default: cores - 1 while "
                     "batches overlap the writes, every core on the bulk path)."),
    ] = None,
    bulk: Annotated[
        bool | None,
        typer.Option(
            "--bulk/--no-bulk",
            help="An empty embedded graph is written with FalkorDB's GRAPH.BULK (default: "
            "TALENT_BULK_LOAD, on); --no-bulk writes every batch with MERGE statements.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate the whole input; write nothing.")
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    json: Annotated[bool, typer.Option("--json", help="Print the load report as JSON.")] = False,
) -> None:
    """Bulk-load a knowledge graph file into the graph store."""
    from loaders.api import dataset_name, load_path
    from talent_core.config import get_settings

    _setup_logging()
    settings = get_settings()
    if on_error is OnErrorChoice.skip and rejects is None:
        rejects = Path(settings.data_dir) / "rejects" / f"{dataset_name(path, split)}.rejects.jsonl"
    if on_error is OnErrorChoice.fail and rejects is not None:
        typer.echo("--rejects only applies with --on-error skip", err=True)
        raise typer.Exit(2)
    try:
        report = load_path(
            path,
            format.value if format else None,
            settings=settings,
            batch_size=batch_size,
            dataset=dataset,
            delimiter=delimiter,
            columns=columns,
            split=split,
            concepts=concepts.value,
            rdf_relations=rdf_relations.value,
            embed_precision=embed_precision.value,
            embed_threads=embed_threads,
            limit=limit,
            on_error=on_error.value,
            rejects=rejects,
            self_loops=self_loops.value,
            max_line_length=max_line_length,
            max_record_lines=max_record_lines,
            progress=progress and sys.stderr.isatty(),
            dry_run=dry_run,
            **({} if bulk is None else {"bulk": bulk}),
        )
    except LoadError as e:
        # KG text is escaped: control characters must not reach the terminal, and a lone
        # surrogate must not make the message itself fail to print
        typer.echo(f"error: {printable(e, keep_newlines=True)}", err=True)
        if e.raw:
            typer.echo(f"  row: {printable(e.raw[:300])}", err=True)
        raise typer.Exit(2 if isinstance(e, OutputError) else 1) from None
    if json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        typer.echo(printable(_summary(report), keep_newlines=True))
    if report.rejected:
        log.warning("%d rows rejected; see %s", report.rejected, report.rejects_file)
    if report.multiline_rows:
        log.warning(
            "%d rows hold a quoted field spanning lines (kept); check the file if no value "
            "should contain a newline",
            report.multiline_rows,
        )


def stats(
    json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Entity, relation and triple counts of the graph store; for the embedded store, where
    it is and whether its server runs (pid, since when, when it stops)."""
    from talent_core.config import get_settings
    from talent_core.store import open_store

    store = open_store(get_settings())
    try:
        s = store.stats()
        # the embedded store: where it is and whether its server runs (and until when)
        server = getattr(store, "server", None)
        status = server.status() if server is not None else None
    finally:
        store.close()
    if json:
        out = s.model_dump()
        if status is not None:
            out["server"] = status
        typer.echo(jsonlib.dumps(out))
    else:
        typer.echo(
            f"{s.entities:,} entities ({s.entities_with_embedding:,} with embeddings), "
            f"{s.relations:,} relations, {s.triples:,} triples"
            + (f" [{s.store}]" if s.store else "")
        )
        if status is not None:
            from talent_core.store.falkordb_server import status_text

            typer.echo(printable(status_text(status)))


app = typer.Typer(add_completion=False, no_args_is_help=True, help="TaLenT loaders (standalone).")
app.command("load")(load)
app.command("stats")(stats)

if __name__ == "__main__":
    app()
