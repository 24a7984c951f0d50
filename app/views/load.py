"""Load: upload a KG file (format detected from its name where it can be; at most
`max_upload_mb`), the CLI's options, a live progress bar fed by the loader's `on_commit`
callback, a Cancel button (the load stops at the next batch boundary), and a readable
result: counts, the rejected rows as a table and as a download. Below: the store's sources
(issue 33), each with its counts, Remove (after a confirmation) and Replace (the upload
replaces the chosen source instead of adding a new one).

The load runs on a worker thread held in the session state: pressing Cancel reruns this
page while the load goes on, and the rerun finds the load there, sets its cancel flag and
goes on drawing its progress. With an API server (TALENT_API_URL, a write key) the page
opens no store: the upload goes to POST /v1/loads, the thread polls the job, Cancel is
DELETE /v1/loads/{id}, and the sources come from /v1/sources."""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from talent_core.api.client import ApiClient
from talent_core.config import get_settings
from talent_core.errors import ApiClientError, TalentError
from talent_core.ui.common import api_client, default_pipeline, run_with_progress, store_caption
from talent_core.ui.safe import error_line, plain, upload_path
from talent_core.ui.views.adapt import planner_view

AUTO = "auto (from the file name)"
JOB = "_load_job"  # the session state's running load
MB = 1024 * 1024  # Streamlit's server.maxUploadSize counts MB of 2**20 bytes


def count_lines(path: Path, max_bytes: int | None = None,
                stop: Callable[[], bool] | None = None) -> int | None:
    """Lines of a text file (gzip read through), for the progress bar's total; None for a
    binary format, a file that does not read (the load then says why), more than
    ``max_bytes`` or when ``stop()`` says so (a Cancel while counting)."""
    if path.suffix.lower() == ".parquet":
        return None
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    n = size = 0
    try:
        with opener(path, "rb") as f:  # type: ignore[operator]
            for block in iter(lambda: f.read(1 << 20), b""):
                n += block.count(b"\n")
                size += len(block)
                if (max_bytes is not None and size > max_bytes) or (stop and stop()):
                    return None
    except (OSError, EOFError, zlib.error):
        return None
    return n


def guess_format(name: str) -> tuple[str | None, str]:
    """(format, why) from an upload's name, with the loaders' own rule."""
    from talent_core.errors import LoadError
    from talent_core.loaders.api import detect_format

    try:
        return detect_format(name), "detected from the file name"
    except LoadError as e:
        return None, e.reason


def result_view(report: Any, rejects: Path | None, upload_name: str,
                through: int | None = None, total: int | None = None) -> None:
    r = report
    verb = "Checked (dry run, nothing written)" if r.dry_run else "Loaded"
    if r.cancelled:
        where = f" (through line {through:,}" if through else ""
        where += (f" of {total:,})" if total else ")") if where else ""
        st.warning(plain(
            f"Cancelled: {upload_name} · stopped after {r.rows_read:,} rows{where} · "
            f"{r.loaded:,} triples {'checked' if r.dry_run else 'committed'}"
            f" · {r.rejected:,} rejected rows · {r.seconds:.1f} s. The batches before the "
            "cancel are complete in the store; the rest of the file was not loaded."))
    else:
        (st.success if not r.rejected else st.warning)(
            plain(f"{verb}: {upload_name} · {r.loaded:,} triples · {r.rejected:,} rejected "
                  f"rows · {r.seconds:.1f} s"))
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


@dataclass
class LoadJob:
    """A load on a worker thread, kept in the session state across the page's reruns: its
    private temporary folder (the upload, the rejects file), cancel flag, progress (from
    the loader's `on_commit`) and outcome."""

    tmp: Path
    path: Path
    rejects: Path | None
    total: int | None = None  # lines, once counted
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: dict[str, int] = field(default_factory=dict)
    report: Any = None
    error: BaseException | None = None
    t0: float = field(default_factory=time.perf_counter)
    seconds: float = 0.0
    thread: threading.Thread | None = None

    change: Any = None  # a Replace's summary (SourceChange)
    name: str = ""  # the source name a new load is recorded under
    notes: list[str] = field(default_factory=list)  # e.g. the vectors' fill behind

    def start(self, pipe: Any, fmt: str, options: dict[str, Any]) -> None:
        def on_commit(p: Any) -> None:  # the loader's writer thread: record only
            self.progress.update(line=p.through_line, triples=p.triples_committed)

        def run() -> None:
            try:  # counted here, not on the page: a large .gz takes a while (and may cancel)
                self.total = count_lines(self.path, get_settings().max_decompressed_bytes,
                                         self.cancel.is_set)
                replace = options.pop("replace", None)
                if replace is not None:
                    from talent_core.loaders.sources import replace_source

                    self.report, self.change = replace_source(
                        self.path, replace, fmt, store=pipe.store, settings=pipe.settings,
                        on_commit=on_commit, cancel=self.cancel.is_set, progress=False,
                        source=replace, **options)  # fmt: skip
                else:
                    self.report = pipe.load(self.path, fmt, on_commit=on_commit,
                                            cancel=self.cancel.is_set, progress=False,
                                            source=self.name, **options)  # fmt: skip
                if options.get("vectors") == "later" and not self.report.dry_run:
                    self._fill_behind(pipe)
            except BaseException as e:  # shown on the page
                self.error = e
                if options.get("vectors") == "later" and self.progress.get("triples"):
                    self._fill_behind(pipe)  # the batches committed before the failure stay
            finally:  # the upload goes now (the rejects file once the outcome is shown)
                self.path.unlink(missing_ok=True)
            self.seconds = time.perf_counter() - self.t0

        self.thread = threading.Thread(target=run, daemon=True, name="ui-load")
        self.thread.start()


    def _fill_behind(self, pipe: Any) -> None:
        """Start `talent vectors` behind a load that left its names' vectors for later."""
        from talent_core.loaders.vectors import fill_behind

        note = fill_behind(pipe.store, pipe.settings)
        self.notes += [note] if note else []

    def start_remote(self, client: ApiClient, content: bytes, fmt: str,
                     options: dict[str, Any]) -> None:
        """The same job run by the API server: send the upload, then poll it into this
        job's fields until it ends (a set cancel flag is sent once as DELETE)."""
        from talent_core.loaders.options import LoadReport
        from talent_core.models import SourceChange

        def run() -> None:
            try:
                opts = {k: v for k, v in options.items() if k != "rejects"}
                job = client.start_load(self.name, content, fmt, **opts)
                sent = False
                while True:
                    p = job["progress"]
                    self.total = p.get("total_rows")
                    self.progress.update(line=p.get("rows") or 0, triples=p.get("triples") or 0)
                    if job["status"] not in ("queued", "running"):
                        break
                    if self.cancel.is_set() and not sent:
                        sent = True
                        try:
                            client.cancel_load(job["id"])
                        except ApiClientError:  # it ended meanwhile: the next poll says so
                            pass
                    time.sleep(0.3)
                    job = client.load(job["id"])
                if job["status"] == "failed":
                    raise ApiClientError(job["error"]["message"], code=job["error"]["code"])
                result = job["result"] or {"cancelled": True}  # one cancelled while queued
                self.report = LoadReport.model_validate(
                    {**result, "source": job["source"], "format": fmt})
                if result.get("change"):
                    self.change = SourceChange.model_validate(result["change"])
                from talent_core.loaders.vectors import FILL_NOTE

                self.notes += [n for n in job.get("notes") or [] if n.startswith(FILL_NOTE)]
                if job["rejects"] and self.rejects is not None:
                    self.rejects.write_bytes(client.load_rejects(job["id"]))
            except BaseException as e:  # shown on the page
                self.error = e
            finally:
                self.path.unlink(missing_ok=True)
            self.seconds = time.perf_counter() - self.t0

        self.thread = threading.Thread(target=run, daemon=True, name="ui-load-remote")
        self.thread.start()


def start_load(pipe: Any, upload: Any, fmt: str, options: dict[str, Any],
               client: ApiClient | None = None) -> LoadJob:
    """Write the upload into a private temporary folder and start loading it (by the API
    server when there is one)."""
    tmp = Path(tempfile.mkdtemp(prefix="talent-upload-"))
    path = upload_path(tmp, upload.name)
    content = upload.getvalue()
    rejects = tmp / "rejects.jsonl" if options["on_error"] == "skip" else None
    job = LoadJob(tmp, path, rejects)
    job.name = path.name  # the source name: the upload's (safe) file name
    if client is not None:
        job.start_remote(client, content, fmt, options)
    else:
        path.write_bytes(content)
        job.start(pipe, fmt, {**options, "rejects": rejects})
    return job


def follow_load(pipe: Any, job: LoadJob, caption: bool) -> None:
    """Draw the job's progress (with its Cancel button) until it ends, then its outcome
    (and, with ``caption``, the sidebar's store line); the temporary folder goes once the
    outcome is shown."""
    from talent_core.errors import LoadError

    slot = st.empty()
    if slot.button("Cancel the load", key="cancel_load", disabled=job.cancel.is_set(),
                   help="stop at the next batch boundary: the batches written so far stay "
                   "complete in the store, nothing after them is read"):
        job.cancel.set()

    def status(_: float) -> tuple[float, str]:
        el = time.perf_counter() - job.t0
        line, triples = job.progress.get("line", 0), job.progress.get("triples", 0)
        rate = triples / el if el else 0.0
        frac = min(line / job.total, 1.0) if job.total else 0.0
        eta = (el / frac - el) if frac > 0.01 else None
        return frac, (("cancelling: the batch in flight commits, nothing more is read · "
                       if job.cancel.is_set() else "")
                      + f"{line:,} rows" + (f" of {job.total:,}" if job.total else "")
                      + f" · {triples:,} triples · {rate:,.0f} triples/s"
                      + (f" · ETA {eta:.0f} s" if eta is not None else "") + f" · {el:.0f} s")

    assert job.thread is not None
    _, _, _, bar = run_with_progress(job.thread.join, "Reading and embedding the first "
                                     "batch…", status, poll_s=0.3)
    slot.empty()
    st.session_state.pop(JOB, None)
    if caption:  # left out of this run while the load ran
        store_caption(pipe)
    try:
        cancelled = job.report is not None and job.report.cancelled
        bar.progress(1.0, text=f"{'cancelled' if cancelled else 'done'} in {job.seconds:.1f} s")
        error, name = job.error, job.path.name
        if isinstance(error, LoadError):
            where = f"{name}:{error.line}" if error.line is not None else name
            st.error(plain(f"{where}: {error.reason}"))
            if error.raw:
                st.code(error.raw, language=None)
            st.caption("Nothing of the failing batch was written (on a bad row: fail). "
                       "Choose skip to load the good rows and list the bad ones.")
        elif isinstance(error, ApiClientError):  # the server's words (its status, code)
            st.error(plain(str(error)))
        elif error is not None:
            st.error(plain(f"{type(error).__name__}: {error}".replace(str(job.tmp), "")))
        if error is not None:  # a failed load's committed batches get their fill too
            for note in job.notes:
                st.info(plain(note))
        else:
            result_view(job.report, job.rejects, name, job.progress.get("line"), job.total)
            for note in job.notes:
                st.info(plain(note))
            if job.change is not None:
                c = job.change
                st.success(plain(f"replaced source {c.source!r}: added {c.added:,}, removed "
                                 f"{c.removed:,}, unchanged {c.unchanged:,} triples; "
                                 f"{c.entities_deleted:,} entities and "
                                 f"{c.relations_deleted:,} relations left unused were "
                                 "deleted"))
    finally:
        shutil.rmtree(job.tmp, ignore_errors=True)


CONFIRM = "_remove_source"  # the session state's source awaiting the Remove confirmation
REMOVED = "_removed_source"  # (ok, text): what the last Remove did (shown after its rerun)


def sources_report(pipe: Any, client: ApiClient | None = None) -> Any:
    """The store's sources (one scan of its triples), or None for a store without them."""
    from talent_core.errors import SourceError
    from talent_core.loaders.sources import list_sources

    try:
        return client.sources() if client is not None else list_sources(pipe.store)
    except SourceError:
        return None
    except ApiClientError as e:
        st.error(plain(str(e)))
        return None


def remove(pipe: Any, client: ApiClient | None, source_id: int) -> tuple[bool, str]:
    """Unload the source ``source_id`` (here or by the API server; by id, so that any name
    works): (done, what to say)."""
    from talent_core.loaders.sources import unload_source

    try:
        if client is not None:
            change = client.remove_source(source_id)
        else:
            change = unload_source(pipe.store, source_id, get_settings().batch_size,
                                   settings=get_settings())
    except TalentError as e:  # busy (a load / unload is running), gone, a full disk, ...
        return False, str(e) if isinstance(e, ApiClientError) else error_line(e)
    return True, (f"removed {change.source!r}: {change.triples_deleted:,} triples, "
                  f"{change.entities_deleted:,} entities, {change.relations_deleted:,} "
                  "relations deleted")


def sources_view(pipe: Any, report: Any, client: ApiClient | None = None) -> None:
    """The store's sources with their counts; Remove one after a confirmation."""

    st.subheader("Sources")
    if REMOVED in st.session_state:
        ok, text = st.session_state.pop(REMOVED)
        (st.success if ok else st.error)(plain(text))
    if report is None or not report.sources:
        st.caption("No source yet: each load becomes one (its file name).")
        return
    st.dataframe([{"id": s.id, "name": s.name, "state": s.state, "triples": s.triples,
                   "only this source": s.only, "rows read": s.rows_read,
                   "rejected": s.rejected, "format": s.format,
                   "sha256": (s.sha256 or "")[:12], "loaded at": s.created}
                  for s in report.sources], hide_index=True)  # fmt: skip
    st.caption("`only this source`: the triples Remove deletes; the others stay, asserted by "
               "another source. Replace: choose the source under Load as, above.")
    names = [s.name for s in report.sources]
    c1, c2 = st.columns([3, 1])
    chosen = c1.selectbox("Source", names, key="remove_choice")
    if c2.button("Remove", key="remove_source"):
        st.session_state[CONFIRM] = chosen
    pending = st.session_state.get(CONFIRM)
    if pending is not None and pending in names:
        info = next(s for s in report.sources if s.name == pending)
        st.warning(plain(f"Remove source {pending!r}? {info.only:,} triples only it asserts "
                         "are deleted, then entities and relations left without a triple. "
                         "This cannot be undone (load the file again to restore it)."))
        y, n = st.columns(2)
        if y.button("Yes, remove it", type="primary", key="remove_confirm"):
            st.session_state.pop(CONFIRM, None)
            st.session_state[REMOVED] = remove(pipe, client, info.id)
            st.rerun()  # the table and the sidebar's counts as they are now
        if n.button("Cancel", key="remove_cancel"):
            st.session_state.pop(CONFIRM, None)


def page() -> None:
    from talent_core.loaders import FORMATS

    st.title("Load data")
    client = api_client()
    # with an API server this process opens no store: the server loads
    pipe = default_pipeline() if client is None else None
    job: LoadJob | None = st.session_state.get(JOB)
    running = job is not None
    if client is not None:
        st.caption(plain(f"Loading through the API server at {client.url} (a write key)."))
    if not running:  # a running load's counts are its own (and the store is busy with it)
        store_caption(pipe or client)
    limit_mb = get_settings().max_upload_mb
    upload = st.file_uploader(
        "KG file", key="upload",
        help="MetaQA kb.txt, triples .tsv/.csv, N-Triples .nt, RoG .jsonl/.parquet, "
        "ExplaGraphs .tsv (.gz for line formats)")
    st.caption(f"Largest upload: {limit_mb:,} MB (setting TALENT_MAX_UPLOAD_MB)")
    too_big = upload is not None and upload.size > limit_mb * MB
    if too_big:
        assert upload is not None
        st.error(plain(f"{upload.name}: {upload.size / MB:,.1f} MB is over the upload limit "
                       f"of {limit_mb:,} MB (TALENT_MAX_UPLOAD_MB); nothing was written"))
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
        later = st.checkbox(
            "answer at once: embed the entity names behind (talent load --vectors later)",
            key="vectors_later", help="The graph is written first and answers at once; its "
            "names' vectors are embedded by a background process (talent vectors), which "
            "gives way to questions. Meanwhile answers are the same, a little slower, and "
            "vector linking finds only the names embedded so far.")
    fmt = guessed if fmt_choice == AUTO else fmt_choice
    sources = sources_report(pipe, client) if not running else None
    replace = replace_choice(sources)
    if st.button("Load", type="primary", key="load",
                 disabled=upload is None or not fmt or too_big):
        if job is not None:
            st.info("A load is running: cancel it or wait for it to end.")
        elif upload is not None and fmt and not too_big:  # too_big: checked again here
            options: dict[str, Any] = {"on_error": on_error, "dry_run": dry_run,
                                       "limit": int(limit) or None}
            if later:
                options["vectors"] = "later"
            if delimiter.strip():
                options["delimiter"] = delimiter.strip()
            if columns.strip():
                options["columns"] = columns.strip()
            if replace is not None and not dry_run:
                options["replace"] = replace
            job = st.session_state[JOB] = start_load(pipe, upload, fmt, options, client)
    if job is not None:
        follow_load(pipe or client, job, caption=running)
    else:
        sources_view(pipe, sources, client)
        planner_view(client)


NEW = "a new source (the file name; the same name adds to it)"


def replace_choice(report: Any) -> str | None:
    """The `Load as` box: a new source, or the source the upload replaces."""
    names = [s.name for s in report.sources if s.id != 0] if report is not None else []
    choice = st.selectbox("Load as", [NEW, *[f"replace {n}" for n in names]], key="load_as",
                          help="replace: afterwards the store holds exactly the other "
                          "sources plus this file (facts the file dropped are gone)")
    return None if choice == NEW else choice.removeprefix("replace ")


page()
