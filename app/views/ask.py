"""Ask: a question -> the answer with the KG's names, each answer's evidence path(s) from a
seed, the candidate subgraph S as an interactive graph coloured by role (double-click a
node to add its neighbours from the store), the retriever's selection and the names it
produced outside S, export as JSON/CSV, and the session's history."""

from __future__ import annotations

import time
import typing
from pathlib import Path
from typing import Any

import streamlit as st

from talent_core.api.client import ApiClient
from talent_core.config import DEMO_DIR, get_settings
from talent_core.conversation import HISTORY as FOLLOW_UP_TURNS
from talent_core.errors import TalentError
from talent_core.explore import (
    answer_evidence,
    entities_named,
    evidence_names,
    evidence_sources,
    export_csv,
    export_json,
    fill_closest,
    missing_topics,
    out_of_candidate_joins,
    shared_name_note,
    turn_of,
)
from talent_core.models import DECODES, GENERATOR_TYPES, Turn
from talent_core.pipeline import Pipeline
from talent_core.questions import is_comment, parse_question
from talent_core.retrieval.config import Method, RetrievalConfig, field_bounds, ui_controls
from talent_core.text import check_question
from talent_core.ui.common import (
    api_client,
    default_pipeline,
    edge_groups_present,
    get_pipeline,
    graph,
    graph_ids,
    legend,
    roles_present,
    run_with_progress,
    store_caption,
)
from talent_core.ui.kg import Extra, elements
from talent_core.ui.safe import error_line, plain
from talent_core.ui.views.operation import show_operation

ANSWERS_INLINE = 5  # answers (and their evidence) shown before "more"
EXAMPLES = DEMO_DIR / "examples.txt"
MODEL_LOAD_S = 30  # about how long the first load of the language models takes (2 cores)
HISTORY = 20  # answers kept in the session's history
DECODES_RANKED_FIRST = sorted(DECODES, key=lambda d: d != "ranked")  # the radio's order
MODES = ["full", "retrieval", "no-retriever"]  # the first is the page's default: it answers


def example_questions(pipe: Pipeline) -> list[str]:
    """Questions for the loaded KG: the bundled MetaQA dev examples when the store holds
    their entities, then the questions a RoG load wrote under <data_dir>/questions."""
    import json

    out: list[str] = []
    if EXAMPLES.is_file():
        qs = [ln.split("\t")[0] for ln in EXAMPLES.read_text(encoding="utf-8").splitlines()
              if not is_comment(ln)]
        topics = [t for q in qs[:3] for t in parse_question(q)[1]]
        if topics and entities_named(pipe.store, topics):
            out += qs
    qdir = Path(pipe.settings.data_dir) / "questions"
    for f in sorted(qdir.glob("*.jsonl"))[:3] if qdir.is_dir() else []:
        with f.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i >= 10:
                    break
                try:
                    rec = json.loads(line)
                except ValueError:
                    break
                q, topics = rec.get("question"), rec.get("q_entity") or []
                if isinstance(q, str) and q.strip():
                    out.append(q if not topics else
                               q + "".join(f" [{t}]" for t in topics[:1] if t not in q))
    return list(dict.fromkeys(out))


def ensure_models(pipe: Pipeline) -> None:
    """Load the language models once, with a progress bar: the first load converts the base
    model (GGUF -> safetensors, cached) and takes about half a minute."""
    if pipe.models_loaded:
        return
    stage = {"what": "starting", "done": 0, "total": 1, "since": time.perf_counter()}

    def on_stage(what: str, done: int, total: int) -> None:  # from the loading thread
        stage.update(what=what, done=done, total=total, since=time.perf_counter())

    def status(elapsed: float) -> tuple[float, str]:
        # the stages done, plus a creep within the current one (the base model is the long one)
        creep = min((time.perf_counter() - stage["since"]) / MODEL_LOAD_S, 0.9)
        frac = min((stage["done"] + creep) / stage["total"], 0.99)
        step = min(stage["done"] + 1, stage["total"])
        return frac, (f"Loading the language models: {stage['what']} ({step} of "
                      f"{stage['total']}), {elapsed:.0f} s (first question only; later "
                      "questions reuse them)")

    _, error, took, bar = run_with_progress(
        lambda: pipe.load_models(on_stage), "Loading the language models (first question "
        "only)…", status)
    bar.empty()
    if error is not None:
        raise error
    st.toast(f"Language models loaded in {took:.0f} s")


def sidebar() -> tuple[str, str, str, str, str, dict[str, Any]]:
    settings = get_settings()
    # the analyst's page is the question and its answer: the research controls wait, folded
    with st.sidebar, st.expander("Advanced: models and retrieval", expanded=False):
        st.caption("The defaults answer; these are for comparing methods and ablations.")
        st.markdown("**Models**")
        st.caption(plain(
            f"Language models: {settings.llm_backend} backend, "
            + (f"server {settings.llm_base_url}" if settings.llm_backend == "openai"
               else f"base model {settings.base_model}")
            + " (TALENT_LLM_BACKEND; docs/own-model.md)"))
        mode = st.radio(
            "Mode", MODES, key="mode", index=MODES.index("full"),
            help="full: LLM retriever + generator, an answer with its evidence (the "
            "first question loads the language models). retrieval: candidate subgraph "
            "only (no LLM, no answer). no-retriever: S straight to the generator "
            "(ablation).")
        decode = st.radio(
            "Decoding", DECODES_RANKED_FIRST, key="decode",
            index=DECODES_RANKED_FIRST.index(settings.decode),
            help="ranked: every candidate name is scored by the model; answers are KG nodes "
            "with scores. free: the paper's greedy decoding of a name list.")
        use_plan = st.checkbox(
            "Relation-path planner", value=settings.planner != "none", key="planner",
            help="beyond the paper: a planner predicts which relation paths from the "
            "question's topic entity hold the answer; their ends join the candidate subgraph "
            "and, with ranked decoding, candidate answers off every planned path lose (score "
            "= model log-likelihood + w log(path prior + eps)). The shipped planners serve "
            "MetaQA's and Freebase's relations; on another KG the zero-shot planner ranks the "
            "topic entity's own relation paths by their similarity to the question.")
        planner = (settings.planner if settings.planner != "none" else "bundled"
                   ) if use_plan else "none"
        choice = st.selectbox(
            "Adapters", ["bundled (trained)", "none (frozen base model)", "directory…"],
            key="adapters",
            help="bundled: the LoRA adapters shipped with the package for the default base "
            "model; none: the base model without training (the paper's frozen ablation).")
        adapters = {"bundled (trained)": "bundled", "none (frozen base model)": "none"}.get(
            choice, "")
        if not adapters:
            adapters = st.text_input("Directory with retriever/ and generator/",
                                     settings.adapters if settings.adapters not in
                                     ("bundled", "none") else "")
        types = list(GENERATOR_TYPES)
        generator_type = st.selectbox(
            "Generator", types, index=types.index(settings.generator_type),
            key="generator_type",
            help="text: the generator reads the evidence as CSV rows (the paper). "
            "graph-prompt: G-Retriever's GNN soft prompt over the evidence graph, in front "
            "of the same rows (needs a trained generator-graph/ adapter).")
        st.markdown("**Retrieval**")
        defaults = RetrievalConfig()
        method = st.selectbox(
            "Retriever", list(typing.get_args(Method)), key="method",
            help=RetrievalConfig.model_fields["method"].description)
        lo, hi = field_bounds("hops")
        hops = st.slider("hops", int(lo or 1), int(hi or defaults.hops), defaults.hops,
                         key="hops")
        overrides: dict[str, Any] = dict(method=method, hops=hops)
        for c in ui_controls(method):  # the controls the retriever's plug-in declares
            value = (st.selectbox(c.label, list(c.options or ()), key=c.key, help=c.help or None)
                     if c.choice else
                     st.slider(c.label, c.lo, c.hi, getattr(defaults, c.sets[0]), key=c.key,
                               help=c.help or None))
            overrides.update(dict.fromkeys(c.sets, value))
    return mode, decode, adapters.strip(), generator_type, planner, overrides


def history_sidebar() -> None:
    hist = st.session_state.get("history", [])
    if not hist:
        return
    st.sidebar.header("Session history")
    for i, h in enumerate(reversed(hist)):
        idx = len(hist) - 1 - i
        label = f"{h['answer'].question[:60]} · {h['mode']} · {h['answer'].candidate.method}"
        if st.sidebar.button(plain(label), key=f"hist{idx}", width="stretch"):
            st.session_state["current"] = idx


def ask_remote(client: ApiClient, question: str, topics: list[str] | None, mode: str,
               decode: str, overrides: dict[str, Any], history: list[Turn]
               ) -> tuple[Any, dict, Extra, list]:
    """`run_question`'s answer, missing topics, extra graph and evidence from the API: the
    server computes them from its store, the page draws them as it draws its own."""
    got = client.ask(question, topics, mode=mode, decode=decode, view="ui", history=history,
                     **overrides)
    extra = Extra()
    extra.edges.update(got.joins)
    extra.nodes.update({e.id: e for e in got.evidence_entities})
    extra.edges.update(h for e in got.evidence for p in e.paths if p.planned for h in p.hops)
    return got.answer, got.missing, extra, got.evidence


def run_question(pipe: Pipeline, question: str, topic: str, mode: str, decode: str,
                 overrides: dict[str, Any], client: ApiClient | None = None) -> None:
    topics = [t.strip() for t in topic.split("|") if t.strip()] or None
    try:  # before the models load: a bad question or setting is said at once
        question = check_question(question, pipe.settings.max_question_chars)
        pipe.retrieval_config(**overrides)
    except TalentError as e:
        say_error(e)
        return
    if client is not None:
        with st.spinner("Asking the API server…"):
            try:
                t0 = time.perf_counter()
                answer, missing, extra, evidence = ask_remote(client, question, topics, mode,
                                                              decode, overrides, turns())
                wall = time.perf_counter() - t0
                _, parsed = parse_question(question, topics)
            except Exception as e:  # shown to the analyst, not swallowed
                say_error(e)
                return
        remember(answer, mode, missing, extra, evidence, wall, parsed)
        return
    if mode != "retrieval":
        frozen = pipe.frozen_in(mode)  # type: ignore[arg-type]
        if frozen:
            st.warning("No trained adapter for the " + " and the ".join(frozen) + ": the "
                       "frozen base model runs in its place, and its answers are poor.")
        try:
            ensure_models(pipe)
        except Exception as e:
            say_error(e)
            return
    first = "embedder" not in st.session_state.setdefault("_warm", set())
    with st.spinner(("Retrieving…" if mode == "retrieval" else "Retrieving and generating…")
                    + (" (the first question also loads the embedding model)" if first
                       else "")):
        try:
            t0 = time.perf_counter()
            answer = pipe.ask(question, topics, mode=mode, decode=decode,  # type: ignore[arg-type]
                              history=turns(), **overrides)
            wall = time.perf_counter() - t0
            _, parsed = parse_question(question, topics)
            # linking (on by default) says what is missing itself; off: the exact look-up
            missing = {} if answer.candidate.links else missing_topics(pipe.store,
                                                                       pipe.embedder, parsed)
            fill_closest(pipe.store, pipe.embedder, answer)  # nothing close by name: vector
            extra = Extra()
            extra.edges.update(out_of_candidate_joins(pipe.store, answer))
            # every answer's planned path: one past the default cap would float unconnected
            evidence = answer_evidence(answer, pipe.store, max_answers=len(answer.answer))
            extra.nodes.update(evidence_names(answer, evidence, pipe.store))
            extra.edges.update(h for e in evidence for p in e.paths if p.planned
                               for h in p.hops)
        except Exception as e:  # shown to the analyst, not swallowed
            say_error(e)
            return
    st.session_state["_warm"].add("embedder")
    remember(answer, mode, missing, extra, evidence, wall, parsed)


def remember(answer: Any, mode: str, missing: dict, extra: Extra, evidence: list,
             wall: float, topics: list[str]) -> None:
    """The answer into the session history, as the one shown."""
    hist = st.session_state.setdefault("history", [])
    hist.append({"answer": answer, "mode": mode, "missing": missing, "extra": extra,
                 "evidence": evidence, "wall_s": wall,
                 "topics": topics})
    del hist[:-HISTORY]
    st.session_state["current"] = len(hist) - 1
    if not answer.not_in_kg:
        st.session_state["turns"] = [*turns(), turn_of(answer)][-FOLLOW_UP_TURNS:]


def turns() -> list[Turn]:
    """The conversation a follow-up question refers to (the last answers, oldest first)."""
    return list(st.session_state.get("turns", []))


def start_over() -> None:
    """Forget the conversation: the next question refers to nothing before it."""
    st.session_state["turns"] = []
    st.session_state["current"] = None
    st.session_state["question"] = ""


def conversation_bar() -> None:
    """Under the question box: what a follow-up ("who directed them?") would refer to, and
    one click to start over."""
    last = turns()[-1:]
    if not last:
        return
    t = last[0]
    n = len(t.answers)
    what = f"{n} answer{'s' if n != 1 else ''}" if n else "its topic"
    c1, c2 = st.columns([5, 1])
    c1.caption(plain(f"Follow-ups (“who directed them?”, “when was it released?”) refer to "
                     f"“{t.question}” ({what}) and the questions before it."))
    c2.button("Start over", key="start_over", on_click=start_over,
              help="forget the conversation: the next question stands on its own")


def say_error(e: BaseException) -> None:
    """The error in one line, and no answer under it: the one shown before belonged to
    another question (it stays in the session history)."""
    st.session_state["current"] = None
    st.error(plain(error_line(e)))


def reask(mention: str, name: str) -> None:
    """A closest name clicked: the question again with ``name`` in the place of ``mention``
    (a button callback, so the question box can still be set before it is drawn)."""
    q = st.session_state.get("question", "")
    if f"[{mention}]" in q:
        q = q.replace(f"[{mention}]", f"[{name}]", 1)
    elif mention in q:
        q = q.replace(mention, f"[{name}]", 1)
    topic = st.session_state.get("topic", "")
    if mention in topic:
        st.session_state["topic"] = topic.replace(mention, name, 1)
    st.session_state["question"] = q
    st.session_state["_ask_now"] = True


def show_links(h: dict[str, Any], idx: int) -> None:
    """The entity linking: "Reading 'Incepton' as Inception" (and the close alternatives),
    and for a mention no entity matched, "not in the KG" with the closest names as buttons
    that ask again with that name."""
    answer = h["answer"]
    for lk in answer.candidate.links:
        if lk.how == "fuzzy":
            alts = "; ".join(a.name for a in lk.alternatives)
            st.info(plain(f"Reading “{lk.mention}” as {lk.name} (similarity {lk.score:.2f})"
                          + (f"; close alternatives: {alts}" if alts else "") + "."))
        note = shared_name_note(lk)
        if note:
            st.info(plain(note[0].upper() + note[1:] + "."))
    for k, mention in enumerate(answer.not_in_kg):
        close = next((lk.closest for lk in answer.candidate.links
                      if lk.mention == mention), [])
        st.warning(plain(f"“{mention}” is not in the KG: no entity has this name or one "
                         "close to it, so there is no answer."
                         + (" Closest names (click one to ask with it):" if close else "")))
        if close:
            cols = st.columns(len(close))
            for j, (col, name) in enumerate(zip(cols, close, strict=True)):
                col.button(plain(name), key=f"closest{idx}-{k}-{j}", on_click=reask,
                           args=(mention, name))


def show_notices(h: dict[str, Any], idx: int = 0) -> None:
    answer = h["answer"]
    if answer.candidate.reading is not None:  # a follow-up: what its words were read as
        st.info(plain(answer.candidate.reading.text[0].upper()
                      + answer.candidate.reading.text[1:]))
    show_links(h, idx)
    for name, close in h["missing"].items():
        st.warning(plain(f"“{name}” is not in the KG (no entity has this name). "
                         + (f"Closest names: {'; '.join(close)}. " if close else "")
                         + "The subgraph below comes from the other seeds."))
    # after "not in the KG" the vector seeds' notice would contradict it (and repeat names)
    if not h["topics"] and not answer.not_in_kg and answer.candidate.seeds and all(
            set(s.sources) <= {"vector"} for s in answer.candidate.seeds):
        st.info(plain("No entity of the question was matched by name; the seeds come from "
                      "vector similarity only: "
                      + "; ".join(s.name for s in answer.candidate.seeds[:5])
                      + ". Put the entity in [brackets] to have it looked up by name."))
    if not answer.candidate.nodes:
        st.info("No candidate subgraph: no seed entity was found for this question.")


def show_answer_set(answer: Any) -> None:
    """One answer in bold; a list as "M answers" with the first ones inline and all of them,
    best first, in a table."""
    names = answer.answer
    if not names:
        st.markdown("**Answer:** _(no answer)_")
        return
    if len(names) == 1:
        st.markdown(f"**Answer:** **{plain(names[0])}**")
        return
    head = " | ".join(f"**{plain(a)}**" for a in names[:ANSWERS_INLINE])
    more = f" … and {len(names) - ANSWERS_INLINE} more" if len(names) > ANSWERS_INLINE else ""
    st.markdown(f"**{len(names)} answers:** " + head + more)
    if answer.answer_path:
        st.caption(plain(f"every end of the planned path {answer.answer_path}, best first"))
    if len(names) > ANSWERS_INLINE:
        with st.expander(f"all {len(names)} answers"):
            st.dataframe([{"#": i, "answer": a} for i, a in enumerate(names, 1)],
                         width="stretch", hide_index=True)


def show_evidence(answer: Any, evidence: list[Any]) -> None:
    """Each answer's supporting facts: the planned path that reached it, else a path over
    S from a seed; the first ones inline, the rest in an expander."""
    via = {r.name: r.path for r in answer.ranked if r.path}

    def line(ev: Any) -> str:
        if ev.paths:
            return "\n\n".join(plain(f"{ev.answer}:  {p.text}") for p in ev.paths)
        if ev.answer in via or answer.answer_path:
            return plain(f"{ev.answer}: reached in the KG by the planned path "
                         f"{via.get(ev.answer) or answer.answer_path}")
        return plain(f"{ev.answer}: no path from a seed in S"
                     + (" (named outside S)" if ev.id else ""))

    for ev in evidence[:ANSWERS_INLINE]:
        st.markdown(line(ev))
    if len(evidence) > ANSWERS_INLINE:
        with st.expander(f"evidence of the other {len(evidence) - ANSWERS_INLINE} answers"):
            for ev in evidence[ANSWERS_INLINE:]:
                st.markdown(line(ev))


def show_answer(pipe: Pipeline, h: dict[str, Any], idx: int) -> None:
    answer, mode = h["answer"], h["mode"]
    st.subheader(plain(answer.question))
    show_notices(h, idx)
    if answer.not_in_kg:  # an abstention: no answer, and no subgraph of look-alike seeds
        return
    if mode != "retrieval":
        op = answer.operation
        if op is not None:
            show_operation(answer)
        if op is None or not (op.answer or op.relation):  # else the operator's answer
            show_answer_set(answer)
        if answer.plan_notice:
            st.warning(plain(answer.plan_notice[0].upper() + answer.plan_notice[1:] + "."))
        who = "frozen base model" if "generator" in answer.frozen else "trained adapters"
        store_only = op is not None and "generator" not in answer.timings_ms
        st.caption("answered in the store by the operator (no language model)" if store_only
                   else f"{answer.decode} decoding · {answer.generator} generator · {who}"
                   + (f" · {answer.planner or 'relation-path'} planner" if answer.plan
                      else " · no planner"))
        if answer.models is not None and not store_only:
            m = answer.models
            st.caption(plain(f"{m.backend} backend · retriever: {m.retriever or '(none ran)'}"
                             f" · generator: {m.generator}"
                             + (" · ranked by the model's choice among the names (the server "
                                "gives no log-probabilities)" if m.ranking == "choice" else "")))
        if answer.plan_joint:
            st.markdown(plain("Answers reached from each of: " + "; ".join(
                f"{p.anchor} ({p.text})" for p in answer.plan if p.anchor)))
        elif answer.plan:
            st.markdown(plain("Planned relation paths: " + "; ".join(
                f"{p.text} (p {p.prob:.2f}, {p.ends} nodes)" for p in answer.plan)))
        if not store_only and (op is None or op.answer_type == "entities"):
            show_evidence(answer, h["evidence"])
        if "sources" not in h:  # once per answer, not at every rerun of the page
            h["sources"] = evidence_sources(pipe.store, h["evidence"])
        sources = h["sources"]
        if len(sources) > 1:
            st.caption(plain(f"The evidence comes from {len(sources)} sources: "
                             + ", ".join(sources)))
        if answer.ranked:
            with st.expander("ranked candidate answers (log-likelihood)"):
                st.dataframe([{"answer": r.name, "score": r.score, "id": r.id,
                               "chosen": r.name in answer.answer,
                               **({"model score": r.lm_score, "path prior": r.prior,
                                   "planned path": r.path or ""}
                                  if r.prior is not None else {})} for r in answer.ranked],
                             width="stretch")
        elif not store_only:
            with st.expander("raw generator output"):
                st.code(answer.raw or "", language=None)
    cand = answer.candidate
    st.caption(
        f"S ({cand.method}): {len(cand.nodes)} nodes, {len(cand.edges)} edges"
        + (" · neighbourhood truncated by a cap" if cand.truncated else "")
        + " · " + ", ".join(f"{k} {v:.0f} ms" for k, v in answer.timings_ms.items())
        + f" · wall {h['wall_s']:.1f} s")
    c1, c2 = st.columns(2)
    stem = f"answer-{idx + 1}"
    c1.download_button("Download answer + evidence (JSON)", export_json(answer, h["evidence"]),
                       f"{stem}.json", "application/json", key=f"json{idx}")
    c2.download_button("Download answer + evidence (CSV)", export_csv(answer, h["evidence"]),
                       f"{stem}.csv", "text/csv", key=f"csv{idx}")

    sel_ids = {n.id for n in answer.selection.selected} if answer.selection else set()
    tabs = st.tabs(["Graph", "Candidate nodes", "Selected", "Out of candidate", "Edges",
                    "Seeds"])
    with tabs[0]:
        missing = [o.name for o in (answer.selection.out_of_candidate if answer.selection
                                    else []) if not o.grounded]
        if missing:
            st.warning(plain("Named by the retriever but NOT in the KG (drawn unconnected, "
                             "red): " + "; ".join(missing)))
        if cand.nodes:
            extra: Extra = h["extra"]
            key = f"ask-graph-{idx}"
            els = elements(answer, extra, h["evidence"], graph_ids(key))
            legend(roles_present(els), edge_groups_present(els))
            clicked = graph(els, key=key)
            if clicked:  # a KG id (a name not in the KG maps to None)
                st.toast(extra.expand(pipe.store, clicked, {n.id for n in cand.nodes}))
                st.rerun()
            st.caption("Click a node or an edge to see what it is; double-click a node (or "
                       "press Expand neighbours in its panel) to add its neighbours from the "
                       "store.")
            if cand.method == "grag":
                from talent_core.retrieval.grag import describe

                with st.expander("GRAG text view (a tree per ego-graph centre)"):
                    st.code(describe(cand), language=None)
    with tabs[1]:
        st.dataframe([{"name": n.name, "id": n.id, "prize": n.prize, "seed": n.seed,
                       "selected": n.id in sel_ids} for n in cand.nodes], width="stretch")
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


TASKS = ["Question", "Stance (ExplaGraphs)"]
GRAPH_HELP = ("The arguments' explanation graph, ExplaGraphs' format: "
              "(concept; relation; concept)(concept; relation; concept)…")


def stance_task(pipe: Pipeline, client: ApiClient | None) -> None:
    """The stance task: two arguments (and their explanation graph, optional) -> support /
    counter with per-label scores and the evidence (`talent_core.stance`); by the API
    server's models when there is one (``client``), else in this process."""
    from talent_core.stance import StanceRequest, answer_stance

    arg1 = st.text_area("Argument 1", key="stance_arg1", height=68,
                        placeholder="e.g. Cannabis should be legal.")
    arg2 = st.text_area("Argument 2", key="stance_arg2", height=68,
                        placeholder="e.g. It's not a bad thing to make marijuana more available.")
    graph_text = st.text_area("Explanation graph (optional)", key="stance_graph", height=68,
                              help=GRAPH_HELP, placeholder="(cannabis; synonym of; marijuana)"
                              "(legal; causes; more available)")
    use_kg = st.checkbox("With no graph given, retrieve one from the loaded KG", value=True,
                         key="stance_use_kg", help="Off, or when the KG gives nothing: the "
                         "stance is decided without a graph, and the answer says so.")
    full = st.checkbox("The LLM retriever selects the evidence first", key="stance_full",
                       value=get_settings().stance_mode == "full",
                       help="Off (the default, TALENT_STANCE_MODE): the whole graph goes to "
                       "the generator, which scores higher with the shipped ExplaGraphs "
                       "adapters; on: the label retriever picks evidence nodes first.")
    if client is not None:
        st.caption(plain(f"The stance is decided by the API server at {client.url}: its "
                         "models and adapters."))
    if st.button("Decide stance", type="primary", key="stance_ask"):
        if not (arg1.strip() and arg2.strip()):
            st.session_state.pop("stance", None)
            st.warning("Type both arguments first, then press Decide stance.")
        else:
            request = StanceRequest(arg1=arg1, arg2=arg2, graph=graph_text or None,
                                    use_kg=use_kg, mode="full" if full else "no-retriever")
            try:
                if client is None:
                    ensure_models(pipe)
                with st.spinner("Deciding the stance…"):
                    t0 = time.perf_counter()
                    out = (answer_stance(pipe, request) if client is None else
                           client.stance(**request.model_dump()))
                    st.session_state["stance"] = (out, time.perf_counter() - t0)
            except Exception as e:  # shown to the analyst, not swallowed
                st.session_state.pop("stance", None)
                st.error(plain(error_line(e)))
    if "stance" in st.session_state:
        show_stance(*st.session_state["stance"])


def show_stance(out: Any, wall: float) -> None:
    """A stance answer: the label, which models decided it (frozen said), the notes (no
    graph, a graph from the KG), per-label scores, the evidence nodes and edges."""
    st.markdown(f"**Stance:** **{plain(out.label)}**")
    who = ("frozen base model (" + " and ".join(out.frozen) + ")" if out.frozen
           else "trained label-task adapters")
    if out.adapters:  # which adapters answered, by role
        who += " (" + "; ".join(f"{k}: {v}" for k, v in out.adapters.items()) + ")"
    st.caption(plain(f"ranked over support / counter · {out.generator} generator · {who}"
                     f" · wall {wall:.1f} s"))
    for note in out.notes:
        (st.warning if "frozen" in note or "without a graph" in note else st.info)(
            plain(note[0].upper() + note[1:] + "."))
    st.dataframe([{"label": s.label, "score (log-likelihood + offset)": s.score,
                   "probability": s.prob}
                  for s in out.scores], width="stretch", hide_index=True)
    source = {"given": "the given graph", "kg": "retrieved from the loaded KG", "none": "none"}
    st.markdown(plain(f"Graph: {source[out.graph_source]} ({out.graph_nodes} nodes)."))
    if out.evidence:
        st.markdown("**Evidence nodes:** " + ", ".join(plain(n) for n in out.evidence))
    elif out.graph_nodes:
        st.caption("No retriever in this mode: the whole graph was the evidence.")
    if out.evidence_edges:
        st.dataframe([{"src": a, "rel": r, "dst": b} for a, r, b in out.evidence_edges],
                     width="stretch", hide_index=True)


def page() -> None:
    settings = get_settings()
    mode, decode, adapters, generator_type, planner, overrides = sidebar()
    try:
        client = api_client()
        # with an API server, this Pipeline only reads the store (its models never load)
        pipe = (default_pipeline() if client is not None else
                get_pipeline(adapters, decode, settings.base_model, generator_type, planner))
    except (FileNotFoundError, TalentError) as e:
        st.error(plain(str(e)))
        return
    st.title("Ask")
    stats = pipe.stats()
    c1, c2, c3 = st.columns(3)
    c1.metric("entities", f"{stats.entities:,}")
    c2.metric("relations", f"{stats.relations:,}")
    c3.metric("triples", f"{stats.triples:,}")
    store_caption(pipe)
    task = st.radio("Task", TASKS, key="task", horizontal=True,
                    help="Question: a question over the KG. Stance: do two arguments support "
                    "or counter each other (ExplaGraphs)?")
    if task != TASKS[0]:
        stance_task(pipe, client)
        return

    carry = st.session_state.pop("_carry", None)
    if carry:
        st.session_state["topic"] = carry
        st.session_state["question"] = ""
        st.info(plain(f"Topic entity “{carry}” carried from Explore: type a question about "
                      "it (e.g. who directed it, what did it star in)."))
    examples = example_questions(pipe)
    if examples:
        picked = st.selectbox("Example questions for the loaded KG", ["—"] + examples,
                              key="example")
        if picked != "—" and st.session_state.get("_example") != picked:
            st.session_state["_example"] = picked
            st.session_state["question"] = picked
    question = st.text_input(
        "Question (names in [brackets] are looked up as topic entities)", key="question",
        placeholder="e.g. who directed the films that [Tom Cruise] starred in")
    topic = st.text_input("Topic entities (optional, `|`-separated)", key="topic")
    if client is not None:
        st.caption(plain(f"Answers come from the API server at {client.url}: its models, "
                         "adapters, generator and planner (the sidebar's decoding, mode and "
                         "retrieval settings apply)."))
    elif mode != "retrieval" and not pipe.models_loaded:
        st.caption(f"The first question in mode {mode} loads the language models "
                   f"(about {MODEL_LOAD_S} s, with a progress bar); later ones reuse them.")
    if st.button("Ask", type="primary", key="ask") or st.session_state.pop("_ask_now", False):
        if question.strip():
            run_question(pipe, question, topic, mode, decode, overrides, client)
        else:
            st.session_state["current"] = None
            st.warning("Type a question first (e.g. the example above), then press Ask.")
    conversation_bar()
    history_sidebar()
    hist = st.session_state.get("history", [])
    idx = st.session_state.get("current")
    if idx is not None and 0 <= idx < len(hist):
        show_answer(pipe, hist[idx], idx)


page()
