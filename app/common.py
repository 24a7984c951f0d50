"""What every page shares: the cached Pipeline (or the API client the Ask page answers
through), the store line of the sidebar, the graph component with its legend, and the
component's click events."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import streamlit as st
import streamlit.components.v1 as components

from talent_core.api.client import ApiClient
from talent_core.config import get_settings
from talent_core.pipeline import Pipeline
from talent_core.ui.kg import COLUMN_GAP, EDGE_GROUPS, ROLES, ComponentIds, layered
from talent_core.ui.safe import plain


@st.cache_resource(show_spinner="Opening the graph store (the first start of the embedded "
                   "server can take a few seconds)…")
def _pipeline(adapters: str, decode: str, base_model: str, generator_type: str, store: str,
              planner: str | None = None) -> Pipeline:
    """One Pipeline per (adapters, decoding, base model, generator type, store, planner): the
    cache key names them all (``store`` only as the key: the settings name the same
    store)."""
    return Pipeline(adapters=adapters or None, decode=decode,  # type: ignore[arg-type]
                    base_model=base_model, generator_type=generator_type,  # type: ignore[arg-type]
                    planner=planner)


def store_key() -> str:
    s = get_settings()
    return f"{s.store}:{s.data_dir.expanduser().resolve()}:{s.neo4j_uri}:{s.graph_name}"


def get_pipeline(adapters: str, decode: str, base_model: str, generator_type: str | None = None,
                 planner: str | None = None) -> Pipeline:
    s = get_settings()
    return _pipeline(adapters, decode, base_model, generator_type or s.generator_type,
                     store_key(), planner or s.planner)


def default_pipeline() -> Pipeline:
    """The Pipeline of the default settings (Explore, Load, Evaluate share Ask's default)."""
    s = get_settings()
    return get_pipeline(s.adapters, s.decode, s.base_model)


def api_client() -> ApiClient | None:
    """The `talent serve` the Ask page answers through and the Explore page browses through
    (TALENT_API_URL with TALENT_API_KEY): its models answer, none load in this process;
    None: the pages work in-process. The one place the choice is made (Ask, Explore and
    Load go through the server; Evaluate runs in this process)."""
    return ApiClient.from_settings(get_settings(), discover=False)


def store_caption(pipe: Pipeline | ApiClient) -> None:
    """Where the store is and what it holds (``pipe``: a Pipeline, or the ApiClient of the
    server that holds it), at the foot of the sidebar; an empty store is said plainly on
    the page."""
    stats = pipe.stats()
    s = get_settings()
    if isinstance(pipe, ApiClient):
        kind, where = "via API", pipe.url
    else:
        kind = s.store
        where = s.data_dir.expanduser().resolve() if s.store == "embedded" else s.neo4j_uri
    st.sidebar.caption(plain(f"store: {kind} · {where} · {stats.entities:,} entities, "
                             f"{stats.triples:,} triples"))
    left = stats.entities - stats.entities_with_embedding
    if stats.triples and left > 0:
        st.sidebar.caption(plain(
            f"entity vectors: {stats.entities_with_embedding:,} of {stats.entities:,} "
            "embedded so far (talent vectors fills the rest; answers meanwhile are the "
            "same, a little slower, and vector linking finds only the embedded names)"))
    if stats.triples == 0:
        st.warning(plain(f"The store at {where} is empty: load a KG on the Load page, run "
                         "`talent demo`, or point TALENT_DATA_DIR at a loaded store."))


def roles_present(els: dict[str, Any]) -> list[str]:
    """The node roles of a graph's elements (`{"nodes": [...], "edges": [...]}`), in
    legend order."""
    found = {n["data"].get("role") for n in els.get("nodes", [])}
    return [r for r, _, _ in ROLES if r in found]


def edge_groups_present(els: dict[str, Any]) -> list[str]:
    """The edge groups (S, EVIDENCE, JOIN, EXPANDED) of a graph's elements."""
    found = {e["data"].get("group") for e in els.get("edges", [])}
    return [g for g, _ in EDGE_GROUPS if g in found]


_EDGE_TEXT = {"EVIDENCE": "evidence path", "JOIN": "out-of-candidate joined to S",
              "S": "in the candidate subgraph S", "EXPANDED": "added by a click"}


def legend(roles: Iterable[str] | None = None,
           edges: bool | Iterable[str] = True, texts: dict[str, str] | None = None) -> None:
    """The colour legend of the graph (HTML built from constants only, no KG text):
    ``roles`` the node roles to list (None: all), ``edges`` the edge groups (True: all,
    False: none); the callers pass what the drawn graph holds (`roles_present`,
    `edge_groups_present`); ``texts``: a page's own words for a role (Explore retrieves
    nothing: its centre is not a "seed")."""
    keep = None if roles is None else set(roles)
    items = [(c, (texts or {}).get(r, t)) for r, c, t in ROLES if keep is None or r in keep]
    groups = ([g for g, _ in EDGE_GROUPS] if edges is True else [] if edges is False
              else list(edges))
    colour = dict(EDGE_GROUPS)
    html = " ".join(
        f'<span style="display:inline-block;margin-right:14px">'
        f'<span style="display:inline-block;width:12px;height:12px;border-radius:6px;'
        f'background:{c};vertical-align:middle"></span> {t}</span>' for c, t in items)
    shown = [g for g in ("EVIDENCE", "JOIN", "S", "EXPANDED") if g in groups]
    if shown:
        html += ('<br><span style="font-size:0.85em">edges: ' + " · ".join(
            f'<span style="color:{colour[g]}">■ {_EDGE_TEXT[g]}</span>' for g in shown)
            + '</span>')
    st.html(f'<div data-testid="talent-legend" style="font-size:0.9em">{html}</div>')


FRONTEND = Path(__file__).resolve().parent / "graph_frontend"
# the evidence graph component (`graph_frontend/`: Cytoscape.js, no build step)
_component = components.declare_component("talent_graph", path=str(FRONTEND))


def graph(elements: dict[str, Any], key: str, height: int = 680,
          texts: dict[str, str] | None = None) -> str | None:
    """Draw ``elements`` (ids from ``graph_ids(key)``) laid out by `kg.layered`; returns the
    KG id of a node the analyst asked to expand (double-click, or the panel's button) once
    per click, else None (also for an id the map does not hold, or a name not in the KG).
    ``texts``: the page's own words for a role or an edge group, in the panel as in its
    legend."""
    laid, font = layered(elements, height_px=height)
    value = _component(
        elements=laid, font=round(font, 1), label_width=round(0.9 * COLUMN_GAP),
        roles={r: {"colour": c, "text": (texts or {}).get(r, t)} for r, c, t in ROLES},
        groups={g: {"colour": c, "text": (texts or {}).get(g, _EDGE_TEXT[g])}
                for g, c in EDGE_GROUPS},
        height=height, key=key, default=None)
    if not isinstance(value, dict) or value.get("action") != "expand":
        return None
    stamp = value.get("timestamp")
    seen = st.session_state.setdefault("_graph_events", {})
    if seen.get(key) == stamp:
        return None  # the same click, reported again on a rerun
    seen[key] = stamp
    return graph_ids(key).kg_id(value.get("node"))


def graph_ids(key: str) -> ComponentIds:
    """The opaque-id map of the graph ``key``, kept in the session: a node keeps its
    component id across reruns, and a click maps back to the KG id."""
    maps = st.session_state.setdefault("_graph_ids", {})
    return maps.setdefault(key, ComponentIds())


def run_with_progress(
    work: Callable[[], Any], first: str, status: Callable[[float], tuple[float, str]],
    poll_s: float = 0.5,
) -> tuple[Any, BaseException | None, float, Any]:
    """Run ``work`` on a worker thread while this (the page's) thread draws a progress bar:
    ``status(elapsed_s)`` gives (fraction, text) at every poll. Returns (work's result or
    None, its exception or None, seconds taken, the bar for the caller's last word)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as e:  # shown on the page, by the caller
            box["error"] = e

    bar = st.progress(0.0, text=first)
    t = threading.Thread(target=run, daemon=True)
    t0 = time.perf_counter()
    t.start()
    while t.is_alive():
        t.join(poll_s)
        frac, text = status(time.perf_counter() - t0)
        bar.progress(frac, text=text)
    return box.get("result"), box.get("error"), time.perf_counter() - t0, bar
