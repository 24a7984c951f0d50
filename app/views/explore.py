"""Explore: find an entity by name (exact, fuzzy, fulltext and vector matches), show its
neighbourhood as a graph and a table, filter by relation, double-click a node to add its
neighbours, and carry the entity to Ask."""

from __future__ import annotations

from typing import Any

import streamlit as st

from talent_core.explore import EXPLORE_CAPS, find_entities, one_hop
from talent_core.models import Entity
from talent_core.ui.common import (
    api_client,
    default_pipeline,
    graph,
    graph_ids,
    legend,
    roles_present,
    store_caption,
)
from talent_core.ui.kg import EXPLORE_LEGEND, Extra, neighbourhood_elements
from talent_core.ui.safe import error_line, plain


def page() -> None:
    st.title("Explore the KG")
    client = api_client()
    if client is None:
        pipe = default_pipeline()
        store_caption(pipe)
        reader: Any = pipe.store
    else:  # browsing through the API server: this process opens no store
        st.caption(plain(f"Browsing through the API server at {client.url}"))
        reader = client
    text = st.text_input("Find an entity by name", key="explore_query",
                         placeholder="e.g. Gravity, Tom Cruise, m.0abc")
    if not text.strip():
        st.caption("Exact name, fulltext and vector (embedding) matches are listed; pick one "
                   "to see its neighbourhood.")
        return
    with st.spinner("Searching (the first search loads the embedding model)…"):
        try:
            if client is not None:
                found = client.entities(text, k=10)
            else:
                cfg = pipe.retrieval
                found = find_entities(pipe.store, pipe.embedder, text, k=10,
                                      fuzzy_threshold=cfg.link_threshold  # type: ignore[attr-defined]
                                      if cfg.fuzzy_link else None)  # type: ignore[attr-defined]
        except Exception as e:
            st.error(plain(error_line(e)))
            return
    if not found:
        st.warning(plain(f"“{text}” is not in the KG: no entity has this name or one close "
                         "to it."))
        return
    labels = [f"{m.entity.name}  ·  {m.how}" + (f" {m.score:.2f}" if m.score is not None else "")
              + (f"  ·  id {m.entity.id}" if m.entity.id != m.entity.name else "")
              for m in found]
    # as Ask links a mention: an exact name, or a fuzzy one close enough to read it as
    linked = found[0].linked
    if not linked:
        st.warning(plain(f"“{text}” is not in the KG: no entity has this name, and none is "
                         "close enough to read it as one. Pick one of the closest names "
                         "below to see it."))
    elif found[0].how == "fuzzy":
        st.info(plain(f"Reading “{text}” as {found[0].entity.name} (the closest name, "
                      f"similarity {found[0].score:.2f})."))
    if st.session_state.get("_explore_text") != text:  # a new search: its own default pick
        st.session_state["_explore_text"] = text
        st.session_state.pop("explore_pick", None)
    i = st.selectbox("Matches" if linked else "Closest names", range(len(found)),
                     format_func=lambda j: labels[j], key="explore_pick",
                     index=0 if linked else None, placeholder="pick a name")
    if i is None:
        return
    entity: Entity = found[i].entity
    state = st.session_state.setdefault("explore", {})
    if state.get("centre") != entity.id:
        state.clear()
        state.update(centre=entity.id, extra=Extra())
    extra: Extra = state["extra"]
    try:
        sub = one_hop(reader, entity.id, EXPLORE_CAPS)
    except Exception as e:  # the server went away, or the entity with a load
        st.error(plain(error_line(e)))
        return
    rels = sorted({e.rel for e in sub.edges} | {r for _, r, _ in extra.edges})
    c1, c2 = st.columns([3, 1])
    key, default = f"rels-{entity.id}", rels
    offered: set[str] = state.setdefault("offered", set())
    fresh = [r for r in rels if r not in offered]
    if offered and fresh and key in st.session_state:  # a click brought new relations
        st.session_state[key] = [*st.session_state[key], *fresh]
        default = None  # the value is set: no default (Streamlit warns about both)
    offered.update(rels)
    chosen = c1.multiselect("Relations", rels, default=default, key=key)
    if c2.button("Ask about this entity", type="primary", key="explore_ask"):
        st.session_state["_carry"] = entity.name
        st.switch_page("views/ask.py")
    st.caption(plain(f"{entity.name} (id {entity.id}): {len(sub.nodes) - 1} neighbours, "
                     f"{len(sub.edges)} edges" + (" · cut by a cap" if sub.truncated else "")
                     + (f" · {len(extra.expanded)} node(s) expanded" if extra.expanded
                        else "")))
    key = f"explore-graph-{entity.id}"
    els = neighbourhood_elements(entity, sub, set(chosen), extra, graph_ids(key))
    legend(roles_present(els), edges=False, texts=EXPLORE_LEGEND)
    if state.get("note"):  # the last expansion, said under the graph's caption (a toast
        st.caption(plain(state["note"]))  # covered the "Ask about this entity" button)
    clicked = graph(els, key=key, height=480, texts=EXPLORE_LEGEND)
    if clicked:
        state["note"] = extra.expand(reader, clicked, {n.id for n in sub.nodes})
        st.rerun()
    names = {n.id: n.name for n in [*sub.nodes, *extra.nodes.values()]}
    rows = [{"src": names.get(e.src, e.src), "rel": e.rel, "dst": names.get(e.dst, e.dst)}
            for e in sub.edges if e.rel in set(chosen)]
    rows += [{"src": names.get(s, s), "rel": r, "dst": names.get(d, d)}
             for s, r, d in sorted(extra.edges) if r in set(chosen)]
    st.dataframe(rows, width="stretch", hide_index=True)


page()
