"""`talent export --neo4j-import DIR`: the configured store as the CSV files that Neo4j's
offline bulk importer (`neo4j-admin database import full`) reads, for initial loads past
what batched MERGEs do in reasonable time (10M+ triples).

The files follow the data model of base.py:

  entities.header.csv      id:ID(Entity),name:string,name_lc:string,embedding:float[]
  relations.header.csv     name:ID(Relation),embedding:float[]
  triples.header.csv       :START_ID(Entity),:END_ID(Entity),rel:string,sources:long[],:TYPE
  sources.header.csv       :ID(Source),id:long,name:string,... (the Source records, issue 33)
  <kind>.part-NNNNN.csv    data, `part_rows` rows per part, no header

Headers are separate from the data so parts can be split, compressed or generated in
parallel without touching them. CSV: `,` between fields, `"` quotes (doubled inside a quoted
field), `;` between the floats of an embedding, LF line ends; names with commas, quotes or
newlines are quoted, so the import needs `--multiline-fields=true`. An entity without an
embedding has an empty embedding field (no property); a triple without a `sources` list (the
`legacy` source, loaded before sources were recorded) an empty sources field, so the
imported store keeps which loads assert each triple and can unload or replace them.
Embeddings are float32 written with 9 significant digits (exact round trip).

The store is read through Cypher in pages (cypher/<dialect>/export_*.cypher): FalkorDB by
internal node id ranges, Neo4j by keyset on the indexed key. Everything is written into a
temporary sibling directory that is renamed to DIR at the end, so DIR never holds a partial
export. DIR also gets `import.sh` (the exact neo4j-admin command and the post-import schema
step), `schema.cypher` (the project's Neo4j constraints and indexes), `manifest.json` and a
README.md. The import itself needs a stopped Neo4j 5.x with neo4j-admin; it is not run here.
DIR is created 0700 and its files 0600 (they hold the KG: not world-readable, whatever the
umask); a DIR that is (or holds) the store's data dir is refused, and a full disk stops the
export with `path: no space left on device`.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from talent_core.errors import ExportError
from talent_core.store._common import make_private_dirs, owner_only
from talent_core.text import normalise_name

DELIMITER = ","
ARRAY_DELIMITER = ";"
QUOTE = '"'

ENTITY_HEADER = ["id:ID(Entity)", "name:string", "name_lc:string", "embedding:float[]"]
RELATION_HEADER = ["name:ID(Relation)", "embedding:float[]"]
TRIPLE_HEADER = [":START_ID(Entity)", ":END_ID(Entity)", "rel:string", "sources:long[]", ":TYPE"]
# `:ID(Source)` without a property name: the import key only; `id` is stored as an integer
SOURCE_HEADER = [":ID(Source)", "id:long", "name:string", "sha256:string", "format:string",
                 "created:string", "state:string", "rows_read:long", "loaded:long",
                 "rejected:long"]  # fmt: skip
REL_TYPE = "REL"
KINDS = {"entities": ENTITY_HEADER, "relations": RELATION_HEADER, "triples": TRIPLE_HEADER,
         "sources": SOURCE_HEADER}  # fmt: skip


@dataclass
class ExportReport:
    directory: str
    entities: int = 0
    entities_with_embedding: int = 0
    relations: int = 0
    triples: int = 0
    sources: int = 0
    dimension: int | None = None
    files: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    source: str = ""


def csv_writer(f: Any) -> Any:
    """The CSV dialect neo4j-admin reads with its defaults (--delimiter=, --quote=")."""
    return csv.writer(
        f, delimiter=DELIMITER, quotechar=QUOTE, doublequote=True,
        quoting=csv.QUOTE_MINIMAL, lineterminator="\n",
    )  # fmt: skip


def csv_reader(f: Any) -> Any:
    return csv.reader(f, delimiter=DELIMITER, quotechar=QUOTE, doublequote=True, strict=True)


def format_vector(vec: Any) -> str:
    """`;`-joined float32 values, 9 significant digits (round-trips float32 exactly)."""
    if vec is None:
        return ""
    arr = np.asarray(vec, dtype=np.float32).ravel()
    return ARRAY_DELIMITER.join(f"{x:.9g}" for x in arr.tolist())


# --- reading the store -------------------------------------------------------------------------
Row = Sequence[Any]


def _pages(store: Any, name: str, batch_size: int, key: int = 0) -> Iterator[list[Row]]:
    """The rows of `export_<name>` page by page, in the store dialect's pagination."""
    read: Callable[[str, dict[str, Any]], list[Row]] = store._read
    if store.dialect == "falkordb":
        top_rows = read("export_max_node_id", {})
        top = top_rows[0][0] if top_rows else None
        if top is None:
            return
        lo = 0
        while lo <= int(top):
            rows = read(f"export_{name}", {"lo": lo, "hi": lo + batch_size})
            lo += batch_size
            if rows:
                yield rows
        return
    if store.dialect == "neo4j":
        after = ""
        while True:
            rows = read(f"export_{name}", {"after": after, "limit": batch_size})
            if not rows:
                return
            after = max(str(r[key]) for r in rows)
            yield rows
    raise ExportError(f"export reads a FalkorDB or Neo4j store, not {store.dialect!r}")


class _PartWriter:
    """Data rows into `<kind>.part-NNNNN.csv`, a new part every `part_rows` rows."""

    def __init__(self, root: Path, kind: str, part_rows: int):
        self.root, self.kind, self.part_rows = root, kind, part_rows
        self.files: list[str] = []
        self.rows = 0
        self._f: Any = None
        self._w: Any = None
        self._in_part = 0
        with open(
            root / f"{kind}.header.csv", "w", encoding="utf-8", newline="", opener=owner_only
        ) as f:
            csv_writer(f).writerow(KINDS[kind])

    def write(self, row: list[str]) -> None:
        if self._f is None or self._in_part >= self.part_rows:
            self._next()
        self._w.writerow(row)
        self._in_part += 1
        self.rows += 1

    def _next(self) -> None:
        self.close()
        name = f"{self.kind}.part-{len(self.files) + 1:05d}.csv"
        self._f = open(  # noqa: SIM115 - closed in close()
            self.root / name, "w", encoding="utf-8", newline="", opener=owner_only
        )
        self._w = csv_writer(self._f)
        self._in_part = 0
        self.files.append(name)

    def close(self) -> None:
        if self._f is not None:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            self._f = None

    def all_files(self) -> list[str]:
        if not self.files:  # the importer wants at least one data file per group
            self._next()
            self.close()
        return [f"{self.kind}.header.csv", *self.files]


def _bar(total: int, desc: str, progress: bool) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=" rows", unit_scale=True, dynamic_ncols=True)


def _write_kind(
    store: Any, root: Path, kind: str, convert: Callable[[Row], list[str] | None], *,
    batch_size: int, part_rows: int, total: int, progress: bool, key: int = 0,
) -> _PartWriter:  # fmt: skip
    out = _PartWriter(root, kind, part_rows)
    bar = _bar(total, kind, progress)
    try:
        for rows in _pages(store, kind, batch_size, key):
            for r in rows:
                row = convert(r)
                if row is not None:
                    out.write(row)
            if bar is not None:
                bar.update(out.rows - bar.n)
    finally:
        out.close()
        if bar is not None:
            bar.close()
    return out


# --- the target directory -----------------------------------------------------------------------
def _check_target(target: Path, force: bool, store: Any = None) -> None:
    """Refuse a target that is a file, not empty (without `force`), or the store's own data
    dir or a folder holding it (publishing replaces the target: the store would be lost)."""
    data_dir = getattr(store, "data_dir", None)
    if data_dir is not None and target.exists():
        d = Path(data_dir).resolve()
        if any(p.exists() and os.path.samefile(target, p) for p in (d, *d.parents)):
            raise ExportError(
                f"{target} is or holds the store's data dir {d}: the export would replace "
                "the store; choose another directory"
            )
    if target.exists() and not target.is_dir():
        raise ExportError(f"{target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise ExportError(
            f"{target} is not empty; choose an empty or new directory, or pass --force to "
            "replace its contents"
        )


def _publish(tmp: Path, target: Path) -> None:
    """Rename the finished `tmp` to `target` (replacing it; an old one is removed last)."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    try:
        os.replace(tmp, target)
    except BaseException:
        if old is not None:
            os.replace(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def export_neo4j_import(
    store: Any, target: Path, *, force: bool = False, batch_size: int = 5000,
    part_rows: int = 1_000_000, progress: bool = True,
) -> ExportReport:  # fmt: skip
    """Write the store's entities, relation catalogue and triples as neo4j-admin import
    CSVs into `target` (see the module docstring); returns what was written."""
    if batch_size < 1 or part_rows < 1:
        raise ValueError("batch_size and part_rows must be >= 1")
    if getattr(store, "dialect", None) not in ("falkordb", "neo4j"):
        raise ExportError(
            f"export reads a FalkorDB or Neo4j store, not {getattr(store, 'dialect', store)!r}"
        )
    target = Path(target).absolute()
    _check_target(target, force, store)
    make_private_dirs(target.parent)
    t0 = time.perf_counter()
    stats = store.stats()
    rep = ExportReport(directory=str(target), source=stats.store)
    dims: set[int] = set()

    def entity(r: Row) -> list[str]:
        i, name, name_lc, vec = r[0], r[1], r[2], r[3]
        if vec is not None:
            rep.entities_with_embedding += 1
            dims.add(len(vec))
        return [i, name, name_lc if name_lc is not None else normalise_name(name),
                format_vector(vec)]  # fmt: skip

    def relation(r: Row) -> list[str]:
        if r[1] is not None:
            dims.add(len(r[1]))
        return [r[0], format_vector(r[1])]

    def triple(r: Row) -> list[str] | None:
        src, rel, dst, ids = r[0], r[1], r[2], r[3]
        if rel is None:
            return None
        listed = ARRAY_DELIMITER.join(str(int(i)) for i in ids) if ids else ""
        return [src, dst, rel, listed, REL_TYPE]

    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))  # 0700
    try:
        kw: dict[str, Any] = {"batch_size": batch_size, "part_rows": part_rows,
                              "progress": progress}  # fmt: skip
        ents = _write_kind(store, tmp, "entities", entity, total=stats.entities, **kw)
        rels = _write_kind(store, tmp, "relations", relation, total=stats.relations, **kw)
        trips = _write_kind(store, tmp, "triples", triple, total=stats.triples, **kw)
        srcs = _PartWriter(tmp, "sources", part_rows)
        try:
            for rec in store.source_records():
                d = rec.model_dump()
                srcs.write([f"source:{rec.id}"] + ["" if d[h.split(":")[0]] is None
                           else str(d[h.split(":")[0]]) for h in SOURCE_HEADER[1:]])
        finally:
            srcs.close()
        if len(dims) > 1:
            raise ExportError(f"the store holds embeddings of several dimensions: {sorted(dims)}")
        rep.entities, rep.relations, rep.triples = ents.rows, rels.rows, trips.rows
        rep.sources = srcs.rows
        rep.dimension = dims.pop() if dims else None
        rep.files = {k: w.all_files() for k, w in
                     (("entities", ents), ("relations", rels), ("triples", trips),
                      ("sources", srcs))}  # fmt: skip
        rep.seconds = round(time.perf_counter() - t0, 2)
        _write_docs(tmp, rep)
        _publish(tmp, target)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            raise ExportError(
                f"{target}: no space left on device"
                + (f" (writing {e.filename})" if e.filename else "")
            ) from None
        raise
    rep.directory = str(target)
    return rep


# --- import.sh, README.md, schema.cypher, manifest.json ----------------------------------------
def import_command(rep: ExportReport, database: str = "neo4j") -> list[str]:
    """The neo4j-admin argument list (paths relative to the export directory)."""
    return [
        "neo4j-admin", "database", "import", "full", database,
        "--nodes=Entity=" + ",".join(rep.files["entities"]),
        "--nodes=Relation=" + ",".join(rep.files["relations"]),
        "--nodes=Source=" + ",".join(rep.files["sources"]),
        "--relationships=" + REL_TYPE + "=" + ",".join(rep.files["triples"]),
        f"--delimiter={DELIMITER}",
        f"--array-delimiter={ARRAY_DELIMITER}",
        "--quote=" + QUOTE,
        "--multiline-fields=true",
        "--id-type=string",
        "--overwrite-destination=false",
    ]  # fmt: skip


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", opener=owner_only) as f:  # 0600
        f.write(text)


def _write_docs(root: Path, rep: ExportReport) -> None:
    schema = resources.files("talent_core.cypher") / "neo4j" / "schema.cypher"
    _write_text(root / "schema.cypher", schema.read_text(encoding="utf-8"))
    dim = rep.dimension if rep.dimension is not None else 384
    args = [shlex.quote(a) for a in import_command(rep, "@DATABASE@")]
    cmd = " \\\n  ".join(args).replace("@DATABASE@", '"$DATABASE"')
    script = f"""#!/usr/bin/env bash
# Written by `talent export --neo4j-import` ({rep.source}).
# Offline bulk import into a NEW Neo4j 5.x database, then the project's schema.
# Run where neo4j-admin and cypher-shell are on PATH (e.g. inside the Neo4j container with
# this directory mounted), with the target database STOPPED (Community: stop the server).
# Not run by the export: no Neo4j server was available where these files were written.
set -euo pipefail
cd "$(dirname "$0")"
DATABASE="${{DATABASE:-neo4j}}"

{cmd}

# After starting the database: constraints, fulltext and vector indexes (dimension {dim}).
if [ "${{SKIP_SCHEMA:-0}}" != "1" ]; then
  cypher-shell -d "$DATABASE" -u "${{NEO4J_USER:-neo4j}}" \\
    -p "${{NEO4J_PASSWORD:?set NEO4J_PASSWORD}}" \\
    -a "${{NEO4J_URI:-bolt://localhost:7687}}" --param 'dimension => {dim}' -f schema.cypher
fi
"""
    _write_text(root / "import.sh", script)
    (root / "import.sh").chmod(0o700)
    files = "\n".join(f"- `{k}`: " + ", ".join(f"`{f}`" for f in v) for k, v in rep.files.items())
    readme = f"""# Neo4j bulk-import files

Written by `talent export --neo4j-import` from `{rep.source}`:
{rep.entities:,} entities ({rep.entities_with_embedding:,} with an embedding),
{rep.relations:,} catalogue relations, {rep.triples:,} triples, {rep.sources:,} load sources;
embedding dimension {rep.dimension}.

{files}

Headers (one line, separate from the data parts):

- `:Entity`: `{",".join(ENTITY_HEADER)}`
- `:Relation`: `{",".join(RELATION_HEADER)}`
- `:REL`: `{",".join(TRIPLE_HEADER)}` (type `{REL_TYPE}`, relation text in `rel`,
  the ids of the loads asserting it in `sources`; empty: the `legacy` source)
- `:Source`: `{",".join(SOURCE_HEADER)}` (one per load: `talent sources`)

CSV: `,` between fields, `"` quotes doubled inside quoted fields, `;` between the floats of
an embedding (float32, 9 significant digits), UTF-8, LF. Names may contain commas, quotes
and newlines (quoted fields), hence `--multiline-fields=true`.

## Import (not run here)

The export machine had no Neo4j; nothing below was executed by the export.
With Neo4j 5.x stopped (or a new database name on Enterprise), from this directory:

```bash
NEO4J_PASSWORD=... ./import.sh        # DATABASE=neo4j by default
```

which runs

```bash
{" ".join(import_command(rep))}
```

then, after the database is started, the project's schema (`schema.cypher`, the same file
as `cypher/neo4j/schema.cypher`: the `entity_id` / `relation_name` uniqueness constraints,
the `entity_name_lc` index, the `entity_name_fulltext` fulltext index and the cosine vector
indexes `entity_embedding` / `relation_embedding`):

```bash
cypher-shell -d neo4j -u neo4j -p "$NEO4J_PASSWORD" --param 'dimension => {dim}' -f schema.cypher
```

(`SKIP_SCHEMA=1 ./import.sh` leaves it out; `TALENT_STORE=neo4j talent load ...` also
creates the schema on its first write.) Vector indexes populate in the background; wait
with `CALL db.awaitIndexes()` before timing queries.
"""
    _write_text(root / "README.md", readme)
    manifest = {**asdict(rep), "delimiter": DELIMITER, "array_delimiter": ARRAY_DELIMITER,
                "quote": QUOTE, "headers": KINDS, "command": import_command(rep)}  # fmt: skip
    _write_text(root / "manifest.json", json.dumps(manifest, indent=2) + "\n")
