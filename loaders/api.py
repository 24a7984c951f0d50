"""Formats, reader selection, and `load_path`: the one entry point the CLI and benches use."""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import Any

from talent_core.config import Settings, get_settings
from talent_core.errors import LoadError
from talent_core.loaders import FORMATS
from talent_core.loaders.base import (
    LoadOptions,
    LoadReport,
    Reader,
    TextEmbedder,
    check_outputs,
    run_load,
)
from talent_core.loaders.explagraphs import ExplaGraphsReader
from talent_core.loaders.io import DEFAULT_MAX_LINE_LENGTH, DEFAULT_MAX_RECORD_LINES
from talent_core.loaders.metaqa import MetaQAReader
from talent_core.loaders.ntriples import NTriplesReader
from talent_core.loaders.rog import open_rog
from talent_core.loaders.triples import TriplesReader, parse_columns, parse_delimiter
from talent_core.store.base import GraphStore

log = logging.getLogger(__name__)

_GENERIC_STEMS = {"train", "dev", "test", "val", "valid", "validation", "data", "kb", "graph"}


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file (its Source record tells two versions apart)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def detect_format(path: str) -> str:
    """Guess the format from the file name; raise LoadError when it is ambiguous."""
    p = Path(path)
    name = p.name.lower().removesuffix(".gz")  # kb.txt.gz reads as kb.txt (line formats)
    suffix = Path(name).suffix
    if suffix in (".jsonl", ".json", ".parquet") and p.name.lower().endswith(".gz"):
        raise LoadError(path, None, "gzip is read for line formats (metaqa, triples, "
                        "ntriples) only; decompress this file first")
    if suffix in (".jsonl", ".json", ".parquet"):
        return "rog"
    if suffix == ".nt":
        return "ntriples"
    if name == "kb.txt":
        return "metaqa"
    if suffix in (".csv", ".tsv"):
        return "triples"
    if not p.exists() and re.fullmatch(r"[\w.-]+/[\w.-]+", path):
        return "rog"  # a Hugging Face dataset name
    raise LoadError(
        path, None, f"cannot tell the format from the name; pass --format {{{','.join(FORMATS)}}}"
    )


def dataset_name(path: str, split: str | None = None) -> str:
    """The default side-output name: the file stem, prefixed with its folder when the stem is
    generic (`webqsp-evidence/dev.jsonl` -> `webqsp-evidence-dev`); for a Hub dataset,
    `RoG-webqsp-test`."""
    p = Path(path)
    if not p.exists() and "/" in path and not p.suffix:
        return f"{path.rsplit('/', 1)[-1]}-{split or 'train'}"
    stem = p.name.split(".")[0]
    if stem.lower() in _GENERIC_STEMS and p.resolve().parent.name:
        stem = f"{p.resolve().parent.name}-{stem}"
    return re.sub(r"[^\w.-]+", "_", stem)


def open_reader(
    path: str,
    format: str,
    *,
    delimiter: str | None = None,
    columns: str | None = None,
    split: str | None = None,
    max_line_length: int | None = None,
    concepts: str = "example",
    rdf_relations: str = "local",
    max_record_lines: int | None = None,
    max_decompressed_bytes: int | None = None,
) -> Reader:
    """The reader of `format` over `path`; `max_decompressed_bytes` caps a .gz input
    (default: the setting)."""
    mll = max_line_length or DEFAULT_MAX_LINE_LENGTH
    mrl = max_record_lines or DEFAULT_MAX_RECORD_LINES
    gz = max_decompressed_bytes
    if format == "metaqa":
        return MetaQAReader(Path(path), max_line_length=mll, max_decompressed_bytes=gz)
    if format == "triples":
        try:
            cols = parse_columns(columns)
            delim = parse_delimiter(delimiter)
        except ValueError as e:
            raise LoadError(path, None, str(e)) from None
        return TriplesReader(
            Path(path), delimiter=delim, columns=cols, max_line_length=mll, max_record_lines=mrl,
            max_decompressed_bytes=gz,
        )  # fmt: skip
    if format == "ntriples":
        return NTriplesReader(
            Path(path), relation_names=rdf_relations, max_line_length=mll,  # type: ignore[arg-type]
            max_decompressed_bytes=gz,
        )  # fmt: skip
    if format == "explagraphs":
        try:
            delim = parse_delimiter(delimiter) or "\t"
        except ValueError as e:
            raise LoadError(path, None, str(e)) from None
        return ExplaGraphsReader(
            Path(path),
            concepts=concepts,
            delimiter=delim,
            max_line_length=mll,  # type: ignore[arg-type]
            max_record_lines=mrl,
            max_decompressed_bytes=gz,
        )
    if format == "rog":
        return open_rog(path, split, max_line_length)
    raise LoadError(path, None, f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def load_path(
    path: str | Path, format: str | None = None, *,
    store: GraphStore | None = None, embedder: TextEmbedder | None = None,
    settings: Settings | None = None, batch_size: int | None = None,
    dataset: str | None = None, delimiter: str | None = None, columns: str | None = None,
    split: str | None = None, concepts: str = "example", rdf_relations: str = "local",
    embed_precision: str = "fp32", embed_threads: int | None = None,
    source: str | None = None, **options: Any,
) -> LoadReport:
    """Load one input into the store (opened from `settings` when not given).

    `source`: the name the load's triples are recorded under (default: the file name).
    `options` are `LoadOptions` fields (limit, on_error, rejects, self_loops,
    max_line_length, max_record_lines, progress, dry_run, on_commit, cancel). RoG questions and
    ExplaGraphs examples go to `<data_dir>/questions/<dataset>.jsonl` unless
    `side_output_path` is given.
    """
    settings = settings or get_settings()
    path = str(path)
    fmt = format or detect_format(path)
    reader = open_reader(
        path,
        fmt,
        delimiter=delimiter,
        columns=columns,
        split=split,
        max_line_length=options.get("max_line_length"),
        concepts=concepts,
        rdf_relations=rdf_relations,
        max_record_lines=options.get("max_record_lines"),
        max_decompressed_bytes=settings.max_decompressed_bytes,
    )
    owned_store = None
    try:
        for knob in ("max_line_length", "max_record_lines"):
            if options.get(knob) is None:
                options.pop(knob, None)
        if reader.side_output is not None and options.get("side_output_path") is None:
            if dataset is not None and not re.fullmatch(r"[\w][\w.-]*", dataset):
                raise LoadError(
                    path, None, f"--dataset {dataset!r}: use letters, digits, '.', '_', '-' "
                    "(it names a file in <data_dir>/questions)"
                )
            name = dataset or dataset_name(path, split)
            options["side_output_path"] = Path(settings.data_dir) / "questions" / f"{name}.jsonl"
        if source is not None:
            options["source_name"] = source
        if not options.get("dry_run") and Path(path).is_file():
            options.setdefault("source_sha256", file_sha256(Path(path)))
        options.setdefault("bulk", settings.bulk_load)
        options.setdefault("bulk_max_ids", settings.bulk_max_ids)
        opts = LoadOptions(batch_size=batch_size or settings.batch_size, **options)
        # a rejects path naming a directory (or an unwritable place) fails here, before the
        # store is opened and its schema written
        check_outputs(opts, reader)
        if opts.dry_run:
            return run_load(reader, store, embedder, opts)
        from talent_core.store._common import exclusive_job, job_dir

        if store is None:
            from talent_core.store import open_store

            store = owned_store = open_store(settings)
        with exclusive_job(job_dir(store, settings), f"talent load {Path(path).name}",
                           shared=True):
            if embedder is None:
                from talent_core.loaders.embedders import make_embedder

                embedder = make_embedder(settings, embed_precision, threads=embed_threads)
            store.ensure_schema(embedder.dimension)
            return run_load(reader, store, embedder, opts)
    except BaseException:
        reader.close()
        raise
    finally:
        if owned_store is not None:
            owned_store.close()
