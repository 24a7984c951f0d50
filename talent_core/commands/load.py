"""`talent load`, `talent stats` and `talent export`: a KG file into the graph store
(loaders/), its counts, and the store out for Neo4j's bulk importer.

Exit codes of `load`: 0 loaded (in skip mode possibly with rejected rows, listed in the
rejects file); 1 bad input (`file:line: reason` on stderr; in fail mode nothing of the
failing batch and nothing after it was written); 2 usage errors (typer), an output that is
the input (`--rejects` naming the input file), no space left on device (`file: reason`).
"""

from __future__ import annotations

import json as jsonlib
import logging
import sys
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, get_args

import typer

from talent_core.commands.console import TqdmHandler
from talent_core.config import get_settings
from talent_core.loaders import FORMATS
from talent_core.loaders.base import LoadReport
from talent_core.loaders.options import OnError, SelfLoops, Vectors
from talent_core.text import printable

log = logging.getLogger("talent_core.loaders")  # the loaders' progress lines


def _choices(name: str, values: Iterable[str]) -> Any:
    """A str Enum of ``values`` (typer lists an Enum's values as an option's choices)."""
    return Enum(name, {v: v for v in values}, type=str)


Format = _choices("Format", FORMATS)  # the --format choices
OnErrorChoice = _choices("OnErrorChoice", get_args(OnError))
SelfLoopChoice = _choices("SelfLoopChoice", get_args(SelfLoops))
ConceptScope = _choices("ConceptScope", ("example", "global"))
Precision = _choices("Precision", ("fp32", "bf16"))
RdfRelations = _choices("RdfRelations", ("local", "iri"))
VectorsChoice = _choices("VectorsChoice", get_args(Vectors))


def _setup_logging() -> None:
    """INFO from `loaders` to stderr (through tqdm, so the bar stays intact), unless the
    application configured logging already."""
    if logging.getLogger().handlers or log.handlers:
        if log.getEffectiveLevel() > logging.INFO:
            log.setLevel(logging.INFO)
        return

    h = TqdmHandler()
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
    if r.source_id is not None:
        lines.append(f"  source: {r.source_name!r} (id {r.source_id}; `talent sources`)")
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
    vectors: Annotated[
        VectorsChoice,
        typer.Option(help="now: embed the entity names while loading; later: write the graph "
                     "without them (it answers at once; `talent vectors` embeds them)."),
    ] = VectorsChoice.now,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate the whole input; write nothing.")
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    json: Annotated[bool, typer.Option("--json", help="Print the load report as JSON.")] = False,
    source: Annotated[str | None, typer.Option(
        "--source", metavar="NAME", help="The name the load's triples are recorded under "
        "(default: the file name); loading a name again adds to that source.")] = None,
    replace: Annotated[str | None, typer.Option(
        "--replace", metavar="SOURCE", help="Replace that source by FILE: afterwards the store "
        "holds exactly the other sources plus FILE (one summary: added / removed / "
        "unchanged). Killed, the same command run again finishes it.")] = None,
) -> None:
    """Bulk-load a knowledge graph file into the graph store."""
    from talent_core.loaders.api import dataset_name, load_path

    _setup_logging()
    settings = get_settings()
    if on_error is OnErrorChoice.skip and rejects is None:
        rejects = Path(settings.data_dir) / "rejects" / f"{dataset_name(path, split)}.rejects.jsonl"
    if on_error is OnErrorChoice.fail and rejects is not None:
        typer.echo("--rejects only applies with --on-error skip", err=True)
        raise typer.Exit(2)
    kwargs: dict[str, Any] = dict(
        settings=settings, batch_size=batch_size,
        dataset=dataset, delimiter=delimiter, columns=columns, split=split,
        concepts=concepts.value, rdf_relations=rdf_relations.value,
        embed_precision=embed_precision.value, embed_threads=embed_threads, limit=limit,
        on_error=on_error.value, rejects=rejects, self_loops=self_loops.value,
        max_line_length=max_line_length, max_record_lines=max_record_lines,
        progress=progress and sys.stderr.isatty(), dry_run=dry_run, source=source,
        vectors=vectors.value,
        **({} if bulk is None else {"bulk": bulk}),
    )
    fmt = format.value if format else None
    from talent_core.loaders.base import source_name_of
    from talent_core.loaders.sources import check_source_name, open_resumed

    if replace is None or source is not None:  # --replace keeps the source's name
        check_source_name(source or source_name_of(path))
    if replace is not None:
        if dry_run:
            typer.echo("--replace does not combine with --dry-run", err=True)
            raise typer.Exit(2)
        from talent_core.commands.unload import change_summary
        from talent_core.loaders.sources import replace_source

        report, change = replace_source(path, replace, fmt, **kwargs)
        if json:
            typer.echo(jsonlib.dumps({"load": report.model_dump(mode="json"),
                                      "change": change.model_dump(mode="json")}, indent=2))
        else:
            typer.echo(printable(_summary(report) + "\n" + change_summary(change),
                                 keep_newlines=True))
    else:
        report = load_path(path, fmt, **kwargs)
        if not dry_run:  # what a killed unload left (the load itself is refused for its source)
            open_resumed(settings).close()
        if json:
            typer.echo(report.model_dump_json(indent=2))
        else:
            typer.echo(printable(_summary(report), keep_newlines=True))
    if vectors.value == "later" and not dry_run:
        typer.echo("entity vectors: left for later; `talent vectors` embeds them (the store "
                   "answers meanwhile)")
    if report.rejected:
        log.warning("%d rows rejected; see %s", report.rejected, report.rejects_file)
    if report.multiline_rows:
        log.warning(
            "%d rows hold a quoted field spanning lines (kept); check the file if no value "
            "should contain a newline",
            report.multiline_rows,
        )


def vectors_cmd(
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    json: Annotated[bool, typer.Option("--json", help="Print the fill's report as JSON.")] = False,
    behind: Annotated[bool, typer.Option("--behind", help="A fill behind a UI or a server: "
                                         "nice 10 (questions on the store pause any fill).")
                      ] = False,
    threads: Annotated[int | None, typer.Option(min=1, help="torch threads while embedding "
                                                "(default: every core).")] = None,
) -> None:
    """Embed the entities stored without an embedding (`talent load --vectors later`, `talent
    demo`); resumable: run it again after a stop and it goes on where it stopped."""
    from talent_core.loaders.embedders import make_embedder
    from talent_core.loaders.vectors import fill_vectors, vectors_left
    from talent_core.store import open_store
    from talent_core.store._common import job_dir

    if behind:
        from talent_core.loaders.vectors import run_behind

        run_behind()
    _setup_logging()
    settings = get_settings()
    store = open_store(settings)
    bar = None
    try:
        left, entities = vectors_left(store)
        if left and progress and sys.stderr.isatty():
            from tqdm.auto import tqdm

            bar = tqdm(total=left, unit="names", desc="vectors", dynamic_ncols=True)

        def shown(done: int, total: int) -> None:
            if bar is not None:
                bar.total = total
                bar.update(done - bar.n)

        embedder = make_embedder(settings, threads=threads) if left else None
        report = fill_vectors(store, embedder, job_dir(store, settings), on_progress=shown)
    finally:
        if bar is not None:
            bar.close()
        store.close()
    if json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        typer.echo(f"{report.embedded:,} entities embedded in {report.seconds:.1f} s; "
                   f"{report.left:,} of {entities:,} still without an embedding")


def stats(
    json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Entity, relation and triple counts of the graph store; for the embedded store, where
    it is and whether its server runs (pid, since when, when it stops)."""
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
            from talent_core.store.falkordb_client import status_text

            typer.echo(printable(status_text(status)))


def export_cmd(
    neo4j_import: Annotated[Path, typer.Option(
        "--neo4j-import", metavar="DIR", help="write node/relationship CSVs (headers separate, "
        "vectors as float[]) for `neo4j-admin database import full`, with import.sh, "
        "schema.cypher and a README; the import itself runs on a Neo4j host, not here")],
    force: Annotated[bool, typer.Option(
        "--force", help="replace the contents of a non-empty DIR")] = False,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="rows (FalkorDB: node ids) read per query")] = 5000,
    part_rows: Annotated[int, typer.Option(
        "--part-rows", min=1, help="data rows per CSV part file")] = 1_000_000,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="no progress bars")] = False,
) -> None:
    """Export the configured store (TALENT_STORE) for Neo4j's offline bulk importer. DIR is
    written atomically (a temporary sibling renamed at the end); run DIR/import.sh on a
    host with neo4j-admin and a stopped Neo4j 5.x."""
    from talent_core.store import open_store
    from talent_core.store.export import export_neo4j_import

    store = open_store()
    try:
        rep = export_neo4j_import(store, neo4j_import, force=force, batch_size=batch_size,
                                  part_rows=part_rows, progress=not no_progress)
    finally:
        store.close()
    typer.echo(jsonlib.dumps({"directory": rep.directory, "entities": rep.entities,
                            "relations": rep.relations, "triples": rep.triples,
                            "dimension": rep.dimension, "seconds": rep.seconds,
                            "import": str(Path(rep.directory) / "import.sh")}))
