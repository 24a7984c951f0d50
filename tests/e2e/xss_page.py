"""A page for tests/e2e/test_browser.py (not a test): the Ask page's graph (`app.kg.elements`
through `app.common.graph`) on a made-up answer with a script payload wherever KG text
reaches the graph and that a tiny model cannot be made to produce: the answer and its
evidence path, a grounded and a missing out-of-candidate name, a node added by a click.
A double-click adds a node named with a payload and lists the KG id that came back.

Run by the test as `streamlit run tests/e2e/xss_page.py` (PYTHONPATH: the repository)."""

from __future__ import annotations


def payload(flag: str) -> str:
    """An `<img>` whose error handler sets ``window.top.__xss_<flag>`` and raises an alert."""
    return f"<img src=x onerror=\"window.top.__xss_{flag}=1;alert('{flag}')\">"


XSS = """<img src=x onerror="window.top.document.title='XSSID';alert(1)">"""  # issue 26
ENTITY = "&lt;img src=x onerror=&quot;window.top.__xss_entity=1&quot;&gt;"  # HTML-encoded
ANSWER, REL, OOC, MISSING, EXPANDED = (payload(f) for f in
                                       ("answer", "rel", "ooc", "missing", "expanded"))


def page() -> None:
    import sys
    from pathlib import Path

    import streamlit as st

    from talent_core.explore import answer_evidence
    from talent_core.models import CandidateNode, Edge, Entity, OutOfCandidate, Subgraph
    from talent_core.ui.common import graph, graph_ids
    from talent_core.ui.kg import Extra, elements

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: answer_samples
    from answer_samples import payload_answer

    answer = payload_answer(XSS, CandidateNode(id=ANSWER, name=ANSWER), REL, ENTITY,
                            OutOfCandidate(name=OOC, grounded=True, id=OOC, kg_name=OOC),
                            MISSING)
    extra = st.session_state.setdefault("extra", Extra())
    extra.edges.add((OOC, "joined", ANSWER))
    clicked = graph(elements(answer, extra, answer_evidence(answer), graph_ids("xss")),
                    key="xss")
    if clicked:
        n = len(extra.expanded)
        extra.add(Subgraph(nodes=[Entity(id=f"x{n}", name=EXPANDED)],
                           edges=[Edge(src=clicked, rel=EXPANDED, dst=f"x{n}")]))
        extra.expanded.append(clicked)
        st.rerun()
    st.code("\n".join(extra.expanded) or "no click", language=None)


if __name__ == "__main__":  # streamlit run
    page()
