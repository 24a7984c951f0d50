"""Evaluate: run a small `talent eval --report` on a question file (talent_core.evaluation)
with a progress bar, show its tables and plots, and compare saved report folders side by side."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import streamlit as st

from talent_core.config import DEMO_DIR
from talent_core.errors import TalentError
from talent_core.ui.common import default_pipeline, run_with_progress, store_caption
from talent_core.ui.safe import error_line, plain, report_plots, upload_path

# the report the page opens on: the product's answers (QA) beside the S they came from
UI_METHODS = ["pcst-default", "llm-ranked"]
REPO = Path(__file__).resolve().parents[2]  # a source checkout: its bench/reports are listed
BUNDLED = {
    "MetaQA examples for the bundled movie KB (12 questions)": DEMO_DIR / "examples.txt",
}


def report_dirs(data_dir: Path) -> list[Path]:
    """Saved reports: bench/reports/* of the repository and <data_dir>/reports/*."""
    out = []
    for root in (REPO / "bench" / "reports", Path(data_dir) / "reports"):
        if root.is_dir():
            out += sorted(p for p in root.iterdir() if (p / "report.json").is_file())
    return out


def flat_results(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """One row per method x mode x sweep point of a report.json: the headline metrics."""
    rows = []
    for g in report.get("results", []):
        ret = g.get("retrieval", {})
        nodes = ret.get("nodes") or ret.get("S") or {}
        qa = g.get("qa") or {}
        lat = (g.get("latency") or {}).get("total") or {}
        # the answer's accuracy first; then S's, named as such: "hit" alone read like the
        # answers' (a retrieval method's 1.0 is an S that holds an answer, nothing answered)
        rows.append({"report": name, "method": g.get("method"), "mode": g.get("mode"),
                     "point": g.get("label"), "n": g.get("n"),
                     "QA hit@1": qa.get("hit@1"), "answer F1": qa.get("answer_f1"),
                     "S holds an answer": nodes.get("hit"),
                     "S answer recall": nodes.get("recall"), "S F1": nodes.get("f1"),
                     "mean |S| nodes": nodes.get("size"),
                     "latency mean ms": lat.get("mean_ms")})
    return rows


NOT_MEASURED = "—"  # a metric the row's method does not produce (QA of a retrieval-only method)


def shown(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` as the table shows them: a column no row measured is left out; in a column
    some rows lack (a retrieval-only method beside a QA one), the missing cells read
    NOT_MEASURED instead of "None" and the others keep 3 decimals."""
    keys = [k for k in (rows[0] if rows else {}) if any(r.get(k) is not None for r in rows)]
    gaps = {k for k in keys if any(r.get(k) is None for r in rows)}

    def cell(k: str, v: Any) -> Any:
        if k not in gaps:
            return v
        if v is None:
            return NOT_MEASURED
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    return [{k: cell(k, r.get(k)) for k in keys} for r in rows]


def show_report(folder: Path) -> None:
    md = folder / "report.md"
    data = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    st.dataframe(shown(flat_results(data, folder.name)), width="stretch", hide_index=True)
    plots = report_plots(folder, data)
    for i in range(0, len(plots), 2):
        cols = st.columns(2)
        for c, p in zip(cols, plots[i:i + 2]):
            c.image(str(p), caption=p.name)
    if md.is_file():
        with st.expander("report.md (every table)"):
            report_markdown(data, md)


def report_markdown(data: dict[str, Any], md: Path) -> None:
    """The report's tables, rendered from report.json by today's writer: question types,
    paths and the command are escaped there (a report.md saved by an older version may hold
    them raw, and one written by hand anything), and the plots are shown above. A
    report.json the writer cannot read is shown as its report.md's plain text."""
    from talent_core.evaluation.markdown import markdown

    try:
        text = markdown(data, plots=False)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        st.code(md.read_text(encoding="utf-8"), language=None)
        return
    st.markdown(text)


def _lines(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as f:
        return sum(1 for _ in f)


def run(pipe: Any, files: list[Path], fmt: str, methods: list[str], sweep: str,
        limit: int, out_dir: Path) -> tuple[dict[str, Any] | None, Exception | None]:
    """run_report on a worker thread; the page's thread counts rows.jsonl for progress."""
    from talent_core.evaluation.datasets import read_items, select_items
    from talent_core.evaluation.report import run_report
    from talent_core.evaluation.runner import plan
    from talent_core.evaluation.sweep import ReportOptions, sweep_points

    options = ReportOptions.parse(files, fmt, ",".join(methods), None,
                                  [sweep] if sweep.strip() else None, pipe.retrieval,
                                  limit, 0, 0)
    items = select_items(read_items(options.files, fmt), options.limit, options.sample_seed,
                         options.offset)
    total = len(plan(items, options.methods, options.modes, sweep_points(options.sweeps)))
    rows = out_dir / "rows.jsonl"
    before = _lines(rows)

    def status(el: float) -> tuple[float, str]:
        done = _lines(rows) - before
        eta = el / done * (total - done) if done else None
        return (min(done / total, 1.0) if total else 0.0,
                f"{done} of {total} rows · {el:.0f} s"
                + (f" · ETA {eta:.0f} s" if eta is not None else ""))

    report, error, took, bar = run_with_progress(
        lambda: run_report(pipe, options, out_dir, command="(UI) Evaluate page", progress=False),
        f"0 of {total} rows", status)
    bar.progress(1.0, text=f"report written in {took:.1f} s")
    return report, error


def page() -> None:
    from talent_core.evaluation.methods import METHODS

    st.title("Evaluate")
    pipe = default_pipeline()
    store_caption(pipe)
    data_dir = Path(pipe.settings.data_dir)
    run_tab, compare_tab = st.tabs(["Run a report", "Saved reports"])
    with run_tab:
        source = st.radio("Questions", [*BUNDLED, "upload a question file"], key="eval_src")
        upload = (st.file_uploader("Question file (MetaQA qa_*.txt or RoG .jsonl)",
                                   key="eval_upload") if source not in BUNDLED else None)
        c1, c2, c3 = st.columns(3)
        methods = c1.multiselect("Methods", [m for m in METHODS if m != "graph"],
                                 default=UI_METHODS, key="eval_methods",
                                 help="llm-ranked: the product's answers (QA hit@1, F1; "
                                 "loads the language models); the others build S only "
                                 "(how often S holds an answer). " + ", ".join(
                                     f"{m}: {METHODS[m].description}" for m in UI_METHODS))
        limit = c2.number_input("questions", 1, 500, 12, key="eval_limit")
        sweep = c3.text_input("sweep (optional)", key="eval_sweep",
                              placeholder="k=3,5,10")
        name = st.text_input("report name", "ui-report", key="eval_name")
        if st.button("Run the report", type="primary", key="eval_run"):
            run_section(pipe, data_dir, source, upload, methods, sweep, int(limit), name)
        last = st.session_state.get("eval_last")
        if last and (Path(last) / "report.json").is_file():
            show_report(Path(last))
    with compare_tab:
        compare_section(data_dir)


def run_section(pipe: Any, data_dir: Path, source: str, upload: Any, methods: list[str],
                sweep: str, limit: int, name: str) -> None:
    if not re.fullmatch(r"[\w][\w.-]*", name):
        st.error("report name: letters, digits, '.', '_', '-'")
        return
    if not methods:
        st.error("pick at least one method")
        return
    out_dir = data_dir / "reports" / name
    with tempfile.TemporaryDirectory() as tmp:
        if upload is not None:
            path = upload_path(Path(tmp), upload.name)
            path.write_bytes(upload.getvalue())
        elif source in BUNDLED:
            path = BUNDLED[source]
        else:
            st.warning("Upload a question file first.")
            return
        fmt = "rog" if path.suffix.lower() in (".jsonl", ".json", ".parquet") \
            else "metaqa"
        try:
            rep, err = run(pipe, [path], fmt, methods, sweep, limit, out_dir)
        except TalentError as e:  # a bad file: its line, in one line
            rep, err = None, e
    if err is not None:
        st.error(plain(error_line(err)))
    else:
        assert rep is not None
        st.success(plain(f"{rep['run']['rows']} rows ({rep['run']['computed']} "
                         f"computed) in {rep['run']['wall_s']:.1f} s → {out_dir}"))
        st.session_state["eval_last"] = str(out_dir)


def compare_section(data_dir: Path) -> None:
    dirs = report_dirs(data_dir)
    if not dirs:
        st.info("No saved report yet (bench/reports/*, <data_dir>/reports/*).")
        return
    labels = {str(d): f"{d.parent.parent.name}/{d.parent.name}/{d.name}" for d in dirs}
    picked = st.multiselect("Reports to compare", list(labels),
                            default=list(labels)[:2], format_func=labels.get,
                            key="eval_compare")
    rows: list[dict[str, Any]] = []
    for p in picked:
        rows += flat_results(json.loads((Path(p) / "report.json").read_text(
            encoding="utf-8")), Path(p).name)
    if rows:
        st.dataframe(shown(rows), width="stretch", hide_index=True)
    if len(picked) == 1:
        show_report(Path(picked[0]))
    elif picked:
        cols = st.columns(len(picked))
        for c, p in zip(cols, picked):
            with c:
                st.caption(labels[p])
                data = json.loads((Path(p) / "report.json").read_text(encoding="utf-8"))
                for img in report_plots(Path(p), data)[:4]:
                    st.image(str(img), caption=img.name)


page()
