"""The Ask page's view of an operator's answer (a count, a filter, a superlative, a
comparison or a yes/no): the typed answer first, its notice, then the set it read and
the store queries it ran, each behind an expander."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from talent_core.ui.safe import plain

OPERATOR_TITLES = {"count": "Count", "filter": "Filter", "superlative": "Superlative",
                   "compare": "Comparison", "exists": "Yes / no"}


def show_operation(answer: Any) -> None:
    """``answer.operation`` as the analyst reads it: "27 movies" in bold with the list it
    counted behind it; kept members with their values; yes or no with the path; the
    store queries and parameters as evidence."""
    op = answer.operation
    title = OPERATOR_TITLES.get(op.op, op.op)
    if op.answer_type == "number" and op.answer:
        st.markdown(f"**{title}:** **{plain(op.text)}**")
    elif op.answer_type == "yes/no" and op.answer:
        st.markdown(f"**{title}:** **{plain(op.answer[0])}** — {plain(op.text)}")
    elif op.answer or op.relation:
        st.markdown(f"**{title}:** {plain(op.text)}" if op.text else f"**{title}:** _(none)_")
        if op.values:
            st.dataframe([{"answer": name, op.relation or "value": value}
                          for name, value in op.values.items()],
                         width="stretch", hide_index=True)
    if op.notice:
        st.warning(plain(op.notice[0].upper() + op.notice[1:] + "."))
    if op.listed and op.op in ("count", "filter", "superlative"):
        did = {"count": "counted", "filter": "filtered", "superlative": "compared"}[op.op]
        label = f"the {op.members} {did}" if op.members else f"the set {did}"
        with st.expander(plain(f"{label}" + (f" ({op.path})" if op.path else ""))):
            st.dataframe([{"#": i, "name": n} for i, n in enumerate(op.listed, 1)],
                         width="stretch", hide_index=True)
            if op.members > len(op.listed):
                st.caption(f"the first {len(op.listed)} of {op.members}")
    if op.queries:
        with st.expander(f"store queries ({len(op.queries)})"):
            for q in op.queries:
                st.caption(plain(q.name))
                st.code(q.cypher, language="cypher")
                st.code(json.dumps({"params": q.params, "sizes": q.sizes}, indent=1,
                                   ensure_ascii=False), language="json")
