"""TaLenT GraphQA — Streamlit UI.

Ask a question, see the answer and its evidence: the candidate subgraph S, the nodes the LLM
retriever selected, the names it produced outside S (grounded against the KG or not), and
the edges given to the generator. A second page loads files into the store.

The UI calls the Pipeline and the loaders only, never the store directly.
Run: `talent app` (or `streamlit run app/main.py`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import streamlit as st

from talent_core.config import get_settings
from talent_core.pipeline import Pipeline
from talent_core.retrieval import RetrievalConfig

st.set_page_config(page_title="TaLenT GraphQA", layout="wide")


@st.cache_resource(show_spinner="Opening the graph store…")
def get_pipeline(retriever_dir: str, generator_dir: str) -> Pipeline:
    return Pipeline(
        retriever_dir=Path(retriever_dir) if retriever_dir else None,
        generator_dir=Path(generator_dir) if generator_dir else None,
    )


def dot_graph(answer) -> str:
    """Graphviz DOT of S: seeds bold, selected nodes filled, answers double-circled."""
    cand = answer.candidate
    selected = {n.id for n in (answer.selection.selected if answer.selection else [])}
    answers = {a.lower() for a in answer.answer}

    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph S {", "rankdir=LR; node [shape=box, style=rounded, fontsize=10];"]
    for n in cand.nodes:
        attrs = []
        if n.id in selected:
            attrs += ['style="rounded,filled"', 'fillcolor="#cfe8ff"']
        if n.seed:
            attrs.append("penwidth=2.5")
        if n.name.lower() in answers:
            attrs.append("peripheries=2")
        lines.append(f"{q(n.id)} [label={q(n.name)} {' '.join(attrs)}];")
    for e in cand.edges:
        lines.append(f"{q(e.src)} -> {q(e.dst)} [label={q(e.rel)}, fontsize=8];")
    lines.append("}")
    return "\n".join(lines)


def ask_page() -> None:
    settings = get_settings()
    with st.sidebar:
        st.header("Models")
        mode = st.radio(
            "Mode",
            ["retrieval", "full", "no-retriever"],
            help="retrieval: candidate subgraph only (no LLM). full: LLM retriever + "
            "generator. no-retriever: S straight to the generator (ablation).",
        )
        retriever_dir = st.text_input("Retriever adapter dir (empty: frozen base model)",
                                      os.environ.get("TALENT_RETRIEVER_DIR", ""))
        generator_dir = st.text_input("Generator adapter dir (empty: base model)",
                                      os.environ.get("TALENT_GENERATOR_DIR", ""))
        st.header("Retrieval")
        defaults = RetrievalConfig()
        k = st.slider("k nodes = k edges", 1, 20, defaults.k_nodes)
        hops = st.slider("hops", 1, 3, defaults.hops)
        prizes = st.selectbox("prize rule", ["default", "paper"])
        st.caption(f"store: {settings.store}")

    pipe = get_pipeline(retriever_dir.strip(), generator_dir.strip())
    stats = pipe.stats()
    st.title("TaLenT GraphQA")
    c1, c2, c3 = st.columns(3)
    c1.metric("entities", f"{stats.entities:,}")
    c2.metric("relations", f"{stats.relations:,}")
    c3.metric("triples", f"{stats.triples:,}")
    if stats.triples == 0:
        st.warning("The store is empty: load a KG on the *Load data* page or run `talent demo`.")

    question = st.text_input("Question", key="question",
                             placeholder="e.g. who directed the films that [Tom Hanks] starred in")
    topic = st.text_input("Topic entities (optional, `|`-separated)", key="topic")
    if not st.button("Ask", type="primary") or not question.strip():
        return
    topics = [t.strip() for t in topic.split("|") if t.strip()] or None
    with st.spinner("Retrieving…" if mode == "retrieval" else "Retrieving and generating…"):
        try:
            answer = pipe.ask(question, topics, mode=mode, k_nodes=k, k_edges=k, hops=hops,
                              prizes=prizes)
        except Exception as e:  # shown to the analyst, not swallowed
            st.error(f"{type(e).__name__}: {e}")
            return

    if mode != "retrieval":
        st.subheader("Answer")
        st.markdown(" | ".join(f"**{a}**" for a in answer.answer) or "_(no answer)_")
        with st.expander("raw generator output"):
            st.code(answer.raw or "")
    cand = answer.candidate
    st.caption(
        f"S: {len(cand.nodes)} nodes, {len(cand.edges)} edges"
        + (" · neighbourhood truncated by a cap" if cand.truncated else "")
        + " · " + ", ".join(f"{k} {v:.0f} ms" for k, v in answer.timings_ms.items())
    )
    sel_ids = {n.id for n in answer.selection.selected} if answer.selection else set()
    tabs = st.tabs(["Graph", "Candidate nodes", "Selected", "Out of candidate", "Edges",
                    "Seeds"])
    with tabs[0]:
        if cand.nodes:
            st.graphviz_chart(dot_graph(answer))
        else:
            st.info("No candidate subgraph: no seed entity was found for this question.")
    with tabs[1]:
        st.dataframe([{"name": n.name, "id": n.id, "prize": n.prize, "seed": n.seed,
                       "selected": n.id in sel_ids} for n in cand.nodes],
                     use_container_width=True)
    with tabs[2]:
        if answer.selection is None:
            st.info("No LLM retriever in this mode.")
        else:
            st.dataframe([{"name": n.name, "id": n.id} for n in answer.selection.selected],
                         use_container_width=True)
            st.code(answer.selection.raw or "", language=None)
    with tabs[3]:
        if answer.selection is None:
            st.info("No LLM retriever in this mode.")
        else:
            st.dataframe([o.model_dump() for o in answer.selection.out_of_candidate],
                         use_container_width=True)
    with tabs[4]:
        edges = answer.edges if mode != "retrieval" else cand.edges
        names = {n.id: n.name for n in cand.nodes}
        st.dataframe([{"src": names.get(e.src, e.src), "rel": e.rel,
                       "dst": names.get(e.dst, e.dst), "prize": e.prize} for e in edges],
                     use_container_width=True)
    with tabs[5]:
        st.dataframe([s.model_dump() for s in cand.seeds], use_container_width=True)


def load_page() -> None:
    from loaders.api import FORMATS, load_path

    st.title("Load data")
    fmt = st.selectbox("Format", list(FORMATS))
    upload = st.file_uploader("File")
    on_error = st.radio("On a bad row", ["fail", "skip"], horizontal=True)
    if upload is None or not st.button("Load", type="primary"):
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / upload.name
        path.write_bytes(upload.getvalue())
        rejects = Path(tmp) / "rejects.tsv" if on_error == "skip" else None
        pipe = get_pipeline("", "")
        try:
            with st.spinner(f"Loading {upload.name}…"):
                report = load_path(path, fmt, store=pipe.store, on_error=on_error,
                                   rejects=rejects, progress=False)
        except Exception as e:
            st.error(str(e))
            return
        st.success("Loaded.")
        st.json(report.model_dump(mode="json"))
        if rejects is not None and rejects.exists() and rejects.stat().st_size:
            st.download_button("Rejected rows", rejects.read_bytes(), "rejects.tsv")


page = st.sidebar.radio("Page", ["Ask", "Load data"], label_visibility="collapsed")
ask_page() if page == "Ask" else load_page()
