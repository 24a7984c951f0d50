"""Load: upload a KG file (format detected from its name where it can be), the CLI's
options, a live progress bar fed by the loader's `on_commit` callback, and a readable
result: counts, the rejected rows as a table and as a download."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path
from typing import Any

import streamlit as st

from app.common import default_pipeline, run_with_progress, store_caption
from app.safe import plain, upload_path

AUTO = "auto (from the file name)"


def count_lines(path: Path) -> int | None:
    """Lines of a text file (gzip read through), for the progress bar's total; None for a
    binary format."""
    if path.suffix.lower() == ".parquet":
        return None
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    n = 0
    with opener(path, "rb") as f:  # type: ignore[operator]
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def guess_format(name: str) -> tuple[str | None, str]:
    """(format, why) from an upload's name, with the loaders' own rule."""
    from loaders.api import detect_format
    from loaders.base import LoadError

    try:
        return detect_format(name), "detected from the file name"
    except LoadError as e:
        return None, e.reason


def result_view(report: Any, rejects: Path | None, upload_name: str) -> None:
    r = report
    verb = "Checked (dry run, nothing written)" if r.dry_run else "Loaded"
    (st.success if not r.rejected else st.warning)(
        plain(f"{verb}: {upload_name} · {r.loaded:,} triples · {r.rejected:,} rejected rows"
              f" · {r.seconds:.1f} s"))
    c = st.columns(5)
    c[0].metric("rows read", f"{r.rows_read:,}")
    c[1].metric("triples loaded", f"{r.loaded:,}")
    c[2].metric("rejected", f"{r.rejected:,}")
    c[3].metric("new triples in store", "—" if r.new_triples is None else f"{r.new_triples:,}")
    c[4].metric("triples/s", f"{r.triples_per_s:,.0f}")
    details = {"duplicates in a batch": r.duplicates, "self loops (kept)": r.self_loops,
               "whitespace stripped": r.whitespace_stripped, "multi-line rows": r.multiline_rows,
               "records (questions)": r.records, "new entities embedded": r.new_entities_embedded,
               "new relations embedded": r.new_relations_embedded, "batches": r.batches}
    st.dataframe([{"what": k, "count": v} for k, v in details.items()], hide_index=True)
    if r.store_after is not None:
        st.caption(f"store now: {r.store_after.entities:,} entities, "
                   f"{r.store_after.relations:,} relations, {r.store_after.triples:,} triples")
    if rejects is not None and rejects.is_file() and rejects.stat().st_size:
        rows = [json.loads(ln) for ln in rejects.read_text(encoding="utf-8").splitlines()
                if ln.strip()]
        st.subheader("Rejected rows")
        st.dataframe([{"line": x.get("line"), "reason": x.get("reason"), "raw": x.get("raw")}
                      for x in rows[:1000]], width="stretch", hide_index=True)
        stem = Path(upload_name).name.split(".")[0] or "upload"
        st.download_button("Download the rejected rows (JSONL)", rejects.read_bytes(),
                           f"{stem}.rejects.jsonl", "application/jsonl", key="rejects_dl")
    if r.side_output_file:
        st.caption(plain(f"questions written to {r.side_output_file}"))


def run_load(pipe: Any, path: Path, fmt: str, options: dict[str, Any], total: int | None,
             shown_name: str) -> tuple[Any, Exception | None]:
    """Run the load on a worker thread; this (the page's) thread draws the progress."""
    prog: dict[str, Any] = {}

    def on_commit(p: Any) -> None:  # the loader's writer thread: record only
        prog.update(line=p.through_line, triples=p.triples_committed, batch=p.batch)

    def status(el: float) -> tuple[float, str]:
        line, triples = prog.get("line", 0), prog.get("triples", 0)
        rate = triples / el if el else 0.0
        frac = min(line / total, 1.0) if total else 0.0
        eta = (el / frac - el) if frac > 0.01 else None
        return frac, (f"{line:,} rows" + (f" of {total:,}" if total else "")
                      + f" · {triples:,} triples · {rate:,.0f} triples/s"
                      + (f" · ETA {eta:.0f} s" if eta is not None else "") + f" · {el:.0f} s")

    report, error, took, bar = run_with_progress(
        lambda: pipe.load(path, fmt, on_commit=on_commit, progress=False, **options),
        "Reading and embedding the first batch…", status, poll_s=0.3)
    bar.progress(1.0, text=f"done in {took:.1f} s")
    return report, error


def page() -> None:
    from loaders import FORMATS
    from loaders.base import LoadError

    st.title("Load data")
    pipe = default_pipeline()
    store_caption(pipe)
    upload = st.file_uploader(
        "KG file", key="upload",
        help="MetaQA kb.txt, triples .tsv/.csv, N-Triples .nt, RoG .jsonl/.parquet, "
        "ExplaGraphs .tsv (.gz for line formats)")
    guessed, why = guess_format(upload.name) if upload is not None else (None, "")
    c1, c2 = st.columns(2)
    fmt_choice = c1.selectbox("Format", [AUTO, *FORMATS], key="load_format")
    on_error = c2.radio("On a bad row", ["fail", "skip"], horizontal=True, key="on_error",
                        help="fail: stop at the first bad row (nothing of its batch is "
                        "written); skip: write the good rows, list the bad ones")
    if upload is not None and fmt_choice == AUTO:
        if guessed:
            st.caption(plain(f"format: {guessed} ({why})"))
        else:
            st.warning(plain(f"{why}: pick the format above."))
    with st.expander("Options (as in `talent load`)"):
        o1, o2, o3 = st.columns(3)
        delimiter = o1.text_input("delimiter (triples)", key="delimiter",
                                  help="e.g. `\\t`, `,`, `|`; default: from the extension")
        columns = o2.text_input("columns (triples)", key="columns",
                                help="e.g. `head,relation,tail` or `0,1,2`")
        limit = o3.number_input("limit rows (0: all)", min_value=0, value=0, step=1000,
                                key="limit")
        dry_run = st.checkbox("dry run: check every row, write nothing", key="dry_run")
    fmt = guessed if fmt_choice == AUTO else fmt_choice
    if not st.button("Load", type="primary", key="load", disabled=upload is None or not fmt):
        return
    assert upload is not None and fmt
    with tempfile.TemporaryDirectory() as tmp:
        path = upload_path(Path(tmp), upload.name)
        path.write_bytes(upload.getvalue())
        rejects = Path(tmp) / "rejects.jsonl" if on_error == "skip" else None
        options: dict[str, Any] = {"on_error": on_error, "rejects": rejects,
                                   "dry_run": dry_run, "limit": int(limit) or None}
        if delimiter.strip():
            options["delimiter"] = delimiter.strip()
        if columns.strip():
            options["columns"] = columns.strip()
        total = count_lines(path)
        report, error = run_load(pipe, path, fmt, options, total, path.name)
        if isinstance(error, LoadError):
            where = f"{path.name}:{error.line}" if error.line is not None else path.name
            st.error(plain(f"{where}: {error.reason}"))
            if error.raw:
                st.code(error.raw, language=None)
            st.caption("Nothing of the failing batch was written (on a bad row: fail). "
                       "Choose skip to load the good rows and list the bad ones.")
            return
        if error is not None:
            st.error(plain(f"{type(error).__name__}: {error}".replace(str(tmp), "")))
            return
        result_view(report, rejects, path.name)


page()
