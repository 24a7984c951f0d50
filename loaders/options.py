"""Load options, the progress handed to `on_commit`, and the report of a load."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from talent_core.errors import SourceError
from talent_core.loaders.io import DEFAULT_MAX_LINE_LENGTH, DEFAULT_MAX_RECORD_LINES
from talent_core.models import LEGACY_SOURCE_NAME, StoreStats
from talent_core.text import printable

OnError = Literal["fail", "skip"]
SelfLoops = Literal["keep", "reject"]
Vectors = Literal["now", "later"]


@dataclass
class LoadOptions:
    batch_size: int = 5000
    limit: int | None = None  # rows (triples) for line formats, records for rog/explagraphs
    on_error: OnError = "fail"
    rejects: Path | None = None
    # rejects written to the rejects file, first ones first (None: all); the rest are
    # counted in the report's `rejected` only (a server keeps a bounded file per job)
    max_rejects: int | None = None
    self_loops: SelfLoops = "keep"
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH
    # CSV formats: physical lines one record may span (quoted fields with newlines); read by
    # the reader (loaders.api.open_reader), kept here so that load_path takes it as an option
    max_record_lines: int = DEFAULT_MAX_RECORD_LINES
    max_name_length: int = 4096  # characters; longer entity/relation names are rejected
    side_output_path: Path | None = None  # where Records go (questions/examples JSONL)
    progress: bool = True
    dry_run: bool = False  # validate only: read and check everything, write nothing
    overlap: bool = True  # write batch k while batch k+1 is read and embedded
    # "later": entities are written without their embedding (the graph answers at once; name
    # and fuzzy linking work, retrieval embeds the names it scores) and `talent vectors`
    # (loaders.vectors.fill_vectors) embeds them afterwards; relations are embedded now
    vectors: Vectors = "now"
    # an empty graph in a store that offers it (embedded FalkorDB): GRAPH.BULK, not MERGE
    bulk: bool = True
    bulk_max_ids: int = 2_000_000  # entities the bulk path tracks before handing over
    on_commit: Callable[[LoadProgress], None] | None = None  # called after each ack
    # asked before each batch is read (e.g. `threading.Event().is_set`): True stops the load
    # there; the batches read so far commit, the report says `cancelled`
    cancel: Callable[[], bool] | None = None
    # the load's source (issue 33; a store offering sources records it): its name (default:
    # the file name) and the file's sha256; `source_id` reuses a source (--replace)
    source_name: str | None = None
    source_sha256: str | None = None
    source_id: int | None = None
    # --replace: every triple the load writes is added to this set (the replace then takes
    # back the source's other assertions)
    collect_triples: set[tuple[str, str, str]] | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if self.limit is not None and self.limit < 0:
            raise ValueError("limit must be >= 0")
        if self.on_error not in ("fail", "skip"):
            raise ValueError("on_error must be 'fail' or 'skip'")
        if self.max_record_lines < 1:
            raise ValueError("max_record_lines must be >= 1")
        if self.self_loops not in ("keep", "reject"):
            raise ValueError("self_loops must be 'keep' or 'reject'")
        if self.vectors not in ("now", "later"):
            raise ValueError("vectors must be 'now' or 'later'")


class LoadProgress(BaseModel):
    """Cumulative counts after a batch the store acknowledged."""

    batch: int
    through_line: int  # every row up to this line/record of the input is committed
    triples_committed: int  # unique-per-batch triples sent and acknowledged so far


class LoadReport(BaseModel):
    source: str
    format: str
    dry_run: bool = False
    rows_read: int = 0  # data rows seen (valid + rejected; header/comments/blank excluded)
    records: int = 0  # rog questions / explagraphs examples read
    loaded: int = 0  # unique triples written to the store (MERGE; see new_triples)
    duplicates: int = 0  # rows repeating a triple of the same batch (dropped, not an error)
    rejected: int = 0
    rejects_kept: int = 0  # of them, written to the rejects file (`max_rejects`)
    self_loops: int = 0  # rows with head == tail (kept unless self_loops="reject")
    whitespace_stripped: int = 0  # rows whose keys had surrounding whitespace (stripped)
    multiline_rows: int = 0  # CSV rows with a quoted field spanning lines (kept; shown)
    new_entities_embedded: int = 0
    new_relations_embedded: int = 0
    batches: int = 0
    bulk_batches: int = 0  # batches written with the store's bulk command (empty graph)
    seconds: float = 0.0
    embed_seconds: float = 0.0  # in the embedder
    write_seconds: float = 0.0  # in store calls (existence checks and writes)
    read_seconds: float = 0.0  # reading, parsing, validating, de-duplicating
    # store time by call: existence checks, entity / relation / triple upserts; bulk path:
    # "bulk" (GRAPH.BULK + vector conversion), "schema" (indexes built after batch 1)
    store_seconds_by_call: dict[str, float] = Field(default_factory=dict)
    triples_per_s: float = 0.0
    triples_per_s_excl_embed: float = 0.0
    store_before: StoreStats | None = None
    store_after: StoreStats | None = None
    new_triples: int | None = None  # store triple count delta (rows already stored excluded)
    rejects_file: str | None = None
    side_output_file: str | None = None
    cancelled: bool = False  # stopped by `LoadOptions.cancel`: only the batches counted here
    # the source the triples were recorded under (None: a store without sources, dry run)
    source_id: int | None = None
    source_name: str | None = None
    # what the loader noticed that the caller should see (also logged): a source loaded
    # before from another file that this load adds to
    warnings: list[str] = Field(default_factory=list)
    asserted_new: int = 0  # assertions of this source that were not in the store before


# --- source names (checked by every load that makes a source) -------------------------

MAX_SOURCE_NAME = 200  # characters of a source name
_DIGITS = re.compile(r"[0-9]+")


def source_name_problem(name: str) -> str | None:
    """Why `name` cannot name a source, or None: empty, longer than MAX_SOURCE_NAME, spaces
    around it, digits only (read as a source id), `legacy` (reserved), or a character
    `text.printable` escapes (a control such as a newline, which would split the
    `talent sources` table, a bidi/format control, a lone surrogate)."""
    if not name.strip():
        return "is empty"
    if len(name) > MAX_SOURCE_NAME:
        return f"is {len(name):,} characters long; the maximum is {MAX_SOURCE_NAME}"
    if name != name.strip():
        return "has leading or trailing whitespace"
    bad = next((i for i, c in enumerate(name) if printable(c) != c), None)
    if bad is not None:
        cp = ord(name[bad])
        what = ("a lone surrogate" if 0xD800 <= cp <= 0xDFFF else "a control character"
                if cp < 0xA0 else "an invisible formatting character")
        return f"contains {what} U+{cp:04X} at position {bad}"
    if _DIGITS.fullmatch(name):
        return "is a number (a number names a source id)"
    if name == LEGACY_SOURCE_NAME:
        return ("is reserved for the triples of stores loaded before sources were recorded")
    return None


def check_source_name(name: str) -> str:
    """`name` if it can name a source, else SourceError naming the problem (one line)."""
    problem = source_name_problem(name)
    if problem is not None:
        shown = name if len(name) <= 60 else name[:60] + "..."
        raise SourceError(f"source name {shown!r} {problem}; pass --source NAME")
    return name
