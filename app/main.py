"""TaLenT GraphQA — Streamlit UI.

Ask a question, see the answer and its evidence: the candidate subgraph S, the nodes the LLM
retriever selected, the names it produced outside S (grounded against the KG or not), and
the edges given to the generator. A second page loads files into the store.

The UI calls the Pipeline and the loaders only, never the store directly.
Run: `talent app` (or `streamlit run app/main.py`).
"""

from __future__ import annotations

import tempfile
import typing
from pathlib import Path
from typing import Any

import streamlit as st

from app.safe import plain, upload_path
from talent_core.config import get_settings
from talent_core.pipeline import Pipeline
from talent_core.retrieval.config import (
    Method,
    RetrievalConfig,
    RetrievalSettingsError,
    field_bounds,
)

st.set_page_config(page_title="TaLenT GraphQA", layout="wide")


EXAMPLES = Path(__file__).resolve().parents[1] / "talent_core" / "demo" / "metaqa" / \
    "examples.txt"


@st.cache_resource(show_spinner="Opening the graph store…")
def get_pipeline(adapters: str, decode: str, base_model: str) -> Pipeline:
    """One Pipeline per (adapters, decoding, base model): the cache key names all three."""
    return Pipeline(adapters=adapters or None, decode=decode,  # type: ignore[arg-type]
                    base_model=base_model)


def example_questions() -> list[str]:
    """MetaQA dev questions for the bundled demo KB (none used in training)."""
    if not EXAMPLES.is_file():
        return []
    return [ln.split("\t")[0] for ln in EXAMPLES.read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.startswith("#")]


def ensure_models(pipe: Pipeline) -> None:
    """Load the language models once, with a message: the first load converts the base
    model (GGUF -> safetensors, cached) and can take half a minute."""
    if not pipe.models_loaded:
        with st.spinner("Loading the language models (first use converts the base model "
                        "once and caches it; about 30 s)…"):
            _ = pipe.models


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
            "Mode", ["retrieval", "full", "no-retriever"], key="mode",
            help="retrieval: candidate subgraph only (no LLM). full: LLM retriever + "
            "generator. no-retriever: S straight to the generator (ablation).",
        )
        decode = st.radio(
            "Decoding", ["ranked", "free"],
            index=0 if settings.decode == "ranked" else 1,
            help="ranked: every candidate name is scored by the model; answers are KG nodes "
            "with scores. free: the paper's greedy decoding of a name list.")
        choice = st.selectbox(
            "Adapters", ["bundled (trained)", "none (frozen base model)", "directory…"],
            help="bundled: the LoRA adapters shipped with the package for the default base "
            "model; none: the base model without training (the paper's frozen ablation).")
        adapters = {"bundled (trained)": "bundled", "none (frozen base model)": "none"}.get(
            choice, "")
        if not adapters:
            adapters = st.text_input("Directory with retriever/ and generator/",
                                     settings.adapters if settings.adapters not in
                                     ("bundled", "none") else "")
        st.header("Retrieval")
        defaults = RetrievalConfig()
        method = st.selectbox(
            "Retriever", list(typing.get_args(Method)), key="method",
            help=RetrievalConfig.model_fields["method"].description)
        lo, hi = field_bounds("hops")
        hops = st.slider("hops", int(lo or 1), int(hi or defaults.hops), defaults.hops)
        overrides: dict[str, Any] = dict(method=method, hops=hops)
        if method in ("pcst", "vector"):
            k = st.slider("k (nodes = edges = path beam)", 1, 20, defaults.k_nodes,
                          help="k_nodes and, by prize rule, k_edges (paper) or beam (default)")
            overrides.update(k_nodes=k, k_edges=k, beam=k)
        if method == "pcst":
            overrides["prizes"] = st.selectbox("prize rule", ["default", "paper"])
        elif method == "subgraphrag":
            overrides["top_triples"] = st.slider(
                "K triples", 5, 200, defaults.top_triples,
                help=RetrievalConfig.model_fields["top_triples"].description)
        elif method == "grag":
            overrides["top_egos"] = st.slider(
                "N ego-graphs", 1, 10, defaults.top_egos,
                help=RetrievalConfig.model_fields["top_egos"].description)
            overrides["ego_hops"] = st.slider("ego-graph radius", 1, int(hi or 3),
                                              defaults.ego_hops)
        st.caption(f"store: {settings.store}")

    try:
        pipe = get_pipeline(adapters.strip(), decode, settings.base_model)
    except FileNotFoundError as e:
        st.error(plain(str(e)))
        return
    stats = pipe.stats()
    st.title("TaLenT GraphQA")
    c1, c2, c3 = st.columns(3)
    c1.metric("entities", f"{stats.entities:,}")
    c2.metric("relations", f"{stats.relations:,}")
    c3.metric("triples", f"{stats.triples:,}")
    if stats.triples == 0:
        st.warning("The store is empty: load a KG on the *Load data* page or run `talent demo`.")

    examples = example_questions()
    if examples:
        picked = st.selectbox("Example questions (MetaQA dev, for the bundled movie KB)",
                              ["—"] + examples, key="example")
        if picked != "—" and st.session_state.get("_example") != picked:
            st.session_state["_example"] = picked
            st.session_state["question"] = picked
    question = st.text_input("Question", key="question",
                             placeholder="e.g. who directed the films that [Tom Hanks] starred in")
    topic = st.text_input("Topic entities (optional, `|`-separated)", key="topic")
    if not st.button("Ask", type="primary") or not question.strip():
        return
    topics = [t.strip() for t in topic.split("|") if t.strip()] or None
    try:
        pipe.retrieval_config(**overrides)
    except RetrievalSettingsError as e:
        st.error(plain(str(e)))
        return
    if mode != "retrieval":
        frozen = pipe.frozen_in(mode)
        if frozen:
            st.warning("No trained adapter for the " + " and the ".join(frozen) + ": the "
                       "frozen base model runs in its place, and its answers are poor.")
        try:
            ensure_models(pipe)
        except Exception as e:
            st.error(plain(f"{type(e).__name__}: {e}"))
            return
    with st.spinner("Retrieving…" if mode == "retrieval" else "Retrieving and generating…"):
        try:
            answer = pipe.ask(question, topics, mode=mode, decode=decode, **overrides)
        except Exception as e:  # shown to the analyst, not swallowed
            st.error(plain(f"{type(e).__name__}: {e}"))
            return

    if mode != "retrieval":
        st.subheader("Answer")
        st.markdown(" | ".join(f"**{plain(a)}**" for a in answer.answer) or "_(no answer)_")
        who = "frozen base model" if "generator" in answer.frozen else "trained adapters"
        st.caption(f"{answer.decode} decoding · {who}")
        if answer.ranked:
            with st.expander("ranked candidate answers (log-likelihood)"):
                st.dataframe([{"answer": r.name, "score": r.score, "id": r.id,
                               "chosen": r.name in answer.answer} for r in answer.ranked],
                             width="stretch")
        else:
            with st.expander("raw generator output"):
                st.code(answer.raw or "")
    cand = answer.candidate
    st.caption(
        f"S ({cand.method}): {len(cand.nodes)} nodes, {len(cand.edges)} edges"
        + (" · neighbourhood truncated by a cap" if cand.truncated else "")
        + " · " + ", ".join(f"{k} {v:.0f} ms" for k, v in answer.timings_ms.items())
    )
    sel_ids = {n.id for n in answer.selection.selected} if answer.selection else set()
    tabs = st.tabs(["Graph", "Candidate nodes", "Selected", "Out of candidate", "Edges",
                    "Seeds"])
    with tabs[0]:
        if cand.nodes:
            st.graphviz_chart(dot_graph(answer))
            if cand.method == "grag":
                from talent_core.retrieval.grag import describe

                with st.expander("GRAG text view (a tree per ego-graph centre)"):
                    st.code(describe(cand), language=None)
        else:
            st.info("No candidate subgraph: no seed entity was found for this question.")
    with tabs[1]:
        st.dataframe([{"name": n.name, "id": n.id, "prize": n.prize, "seed": n.seed,
                       "selected": n.id in sel_ids} for n in cand.nodes],
                     width="stretch")
    with tabs[2]:
        if answer.selection is None:
            st.info("No LLM retriever in this mode.")
        else:
            st.dataframe([{"name": n.name, "id": n.id} for n in answer.selection.selected],
                         width="stretch")
            if answer.selection.ranked:
                st.caption("ranked retriever: every node of S scored (log-likelihood)")
                st.dataframe([r.model_dump(exclude={"id"}) for r in answer.selection.ranked],
                             width="stretch")
            else:
                st.code(answer.selection.raw or "", language=None)
    with tabs[3]:
        if answer.selection is None:
            st.info("No LLM retriever in this mode.")
        else:
            st.dataframe([o.model_dump() for o in answer.selection.out_of_candidate],
                         width="stretch")
    with tabs[4]:
        edges = answer.edges if mode != "retrieval" else cand.edges
        names = {n.id: n.name for n in cand.nodes}
        st.dataframe([{"src": names.get(e.src, e.src), "rel": e.rel,
                       "dst": names.get(e.dst, e.dst), "prize": e.prize} for e in edges],
                     width="stretch")
    with tabs[5]:
        st.dataframe([s.model_dump() for s in cand.seeds], width="stretch")


def load_page() -> None:
    from loaders import FORMATS

    st.title("Load data")
    fmt = st.selectbox("Format", list(FORMATS))
    upload = st.file_uploader("File")
    on_error = st.radio("On a bad row", ["fail", "skip"], horizontal=True)
    if upload is None or not st.button("Load", type="primary"):
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = upload_path(Path(tmp), upload.name)
        path.write_bytes(upload.getvalue())
        rejects = Path(tmp) / "rejects.tsv" if on_error == "skip" else None
        pipe = get_pipeline("none", "ranked", get_settings().base_model)
        try:
            with st.spinner(f"Loading {plain(path.name)}…"):
                report = pipe.load(path, fmt, on_error=on_error, rejects=rejects,
                                   progress=False)
        except Exception as e:
            st.error(plain(str(e)))
            return
        st.success("Loaded.")
        st.json(report.model_dump(mode="json"))
        if rejects is not None and rejects.exists() and rejects.stat().st_size:
            st.download_button("Rejected rows", rejects.read_bytes(), "rejects.tsv")


page = st.sidebar.radio("Page", ["Ask", "Load data"], label_visibility="collapsed")
if page == "Ask":
    ask_page()
else:
    load_page()
