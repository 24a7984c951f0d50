"""app/kg.py without Streamlit: roles, the graph component's elements (opaque ids, KG text
as it is), and a click mapped back to its KG id. The data it draws (evidence paths, export, store
look-ups) is tested with the library: tests/retrieval/test_explore.py."""

from __future__ import annotations

from answer_samples import payload_answer, sample_answer

from talent_core.explore import answer_evidence
from talent_core.models import (
    Answer,
    CandidateEdge,
    CandidateNode,
    Edge,
    Entity,
    OutOfCandidate,
    Subgraph,
)
from talent_core.ui.kg import (
    ComponentIds,
    Extra,
    elements,
    layered,
    neighbourhood_elements,
)


def test_roles_colour_every_kind_of_node():
    ans = sample_answer()
    extra = Extra()
    extra.edges.add(("e9", "directed_by", "f1"))  # the grounded out-of-S node, joined to S
    ids = ComponentIds()
    els = elements(ans, extra, answer_evidence(ans), ids)
    kg = {n["data"]["id"]: ids.kg_id(n["data"]["id"]) or "missing:" + n["data"]["name"]
          for n in els["nodes"]}
    role = {kg[n["data"]["id"]]: n["data"]["role"] for n in els["nodes"]}
    assert role == {"tom": "seed", "f1": "selected", "f2": "candidate", "d": "answer",
                    "m.0x": "candidate", "e9": "grounded",
                    "missing:Nowhere (not in KG)": "missing"}
    names = {kg[n["data"]["id"]]: n["data"]["name"] for n in els["nodes"]}
    assert names["d"] == "Dee <b>"  # as the KG writes it: the component sets text
    assert names["m.0x"] == "⟨film.performance⟩ m.0x"  # a CVT node's readable label
    groups = {(kg[e["data"]["source"]], kg[e["data"]["target"]]): e["data"]["group"]
              for e in els["edges"]}
    assert groups[("f1", "d")] == "EVIDENCE" and groups[("e9", "f1")] == "JOIN"
    assert groups[("m.0x", "tom")] == "S"


def test_only_what_the_mentions_linked_to_is_drawn_as_a_seed():
    """A tag sharing the linked name ("tom hanks" beside Tom Hanks) or a vector look-alike
    is a seed of retrieval, not the question's entity: drawn as S (issue 46)."""
    from talent_core.models import Link
    from talent_core.ui.kg import roles

    ans = sample_answer()
    nodes = [*ans.candidate.nodes, CandidateNode(id="tom-tag", name="tom", seed=True),
             CandidateNode(id="look", name="Tim", seed=True)]
    ans.candidate = ans.candidate.model_copy(update={
        "nodes": nodes, "anchors": ["tom", "tom-tag"],
        "links": [Link(mention="Tom", id="tom", name="Tom", score=1.0, how="exact",
                       shared=["tom-tag"])]})
    role = roles(ans)
    assert role["tom"] == "seed" and role["tom-tag"] == "candidate"
    assert role["look"] == "candidate"


# --- the graph component gets opaque ids and the KG's text as it is (issue 26, item 1) -----
XSS = """<img src=x onerror="window.top.document.title='XSSID';alert(1)">"""
ENT = "&lt;img src=x onerror=alert(2)&gt;"  # would show as `<img ...>` through innerHTML


def _hostile() -> tuple[Answer, Extra]:
    """An answer with the payload everywhere a KG string reaches the graph: ids, names, a
    relation, edge ends, a CVT-like id, the answer and its evidence path, a grounded and a
    missing out-of-candidate name, and a node added by a click."""
    ans = payload_answer(XSS, CandidateNode(id="q1", name=ENT), XSS, ENT,
                         OutOfCandidate(name=XSS + "1", grounded=True, id=XSS + "id",
                                        kg_name=XSS + "kg"), XSS + "2")
    cand = ans.candidate  # and a node whose id and name look like the component's ids
    ans.candidate = cand.model_copy(update={
        "nodes": [*cand.nodes, CandidateNode(id="n0", name="e0")],
        "edges": [*cand.edges, CandidateEdge(src="n0", rel="e0", dst="Tom Hanks")]})
    extra = Extra()
    extra.add(Subgraph(nodes=[Entity(id=XSS + "x", name=XSS + "x")],
                       edges=[Edge(src=XSS + "x", rel=XSS + "r", dst=XSS)]))
    extra.edges.add((XSS + "id", "rel", XSS))  # the grounded name joined to S
    return ans, extra


def _check_component_data(els: dict, ids: ComponentIds, kg_ids: set[str]) -> None:
    """Every id opaque and mapped back; the panel's KG id the one the map returns."""
    import re

    nodes, edges = els["nodes"], els["edges"]
    for n in nodes:
        assert re.fullmatch(r"n\d+", n["data"]["id"])
        assert set(n["data"]) == {"id", "name", "role", "kg_id", "expandable"}
    for e in edges:
        assert re.fullmatch(r"e\d+", e["data"]["id"])
        assert {e["data"]["source"], e["data"]["target"]} <= {n["data"]["id"] for n in nodes}
        assert set(e["data"]) == {"id", "source", "target", "group", "rel"}
    back = {ids.kg_id(n["data"]["id"]) for n in nodes} - {None}
    assert back == kg_ids
    for n in nodes:  # only a KG node can be expanded; a missing name has no KG id
        kg = ids.kg_id(n["data"]["id"])
        assert n["data"]["kg_id"] == (kg or "") and n["data"]["expandable"] == bool(kg)


def test_elements_give_the_component_opaque_ids_and_the_kg_text_as_it_is():
    ans, extra = _hostile()
    ids = ComponentIds()
    els = elements(ans, extra, answer_evidence(ans), ids)
    _check_component_data(els, ids, {"Tom Hanks", XSS, "q1", "q-entity", "n0", XSS + "id",
                                     XSS + "x"})
    by_kg = {ids.kg_id(n["data"]["id"]): n["data"] for n in els["nodes"]}
    assert by_kg[XSS]["name"] == XSS and by_kg["q1"]["name"] == ENT
    assert by_kg["q1"]["role"] == "answer"  # the answer, with its evidence path
    groups = {(ids.kg_id(e["data"]["source"]), e["data"]["rel"], ids.kg_id(e["data"]["target"])):
              e["data"]["group"] for e in els["edges"]}
    assert groups[("Tom Hanks", "starred_in", XSS)] == "EVIDENCE"
    assert groups[(XSS, XSS, "q1")] == "EVIDENCE"
    assert groups[(XSS + "id", "rel", XSS)] == "JOIN"
    assert groups[(XSS + "x", XSS + "r", XSS)] == "EXPANDED"
    missing = [n["data"] for n in els["nodes"] if n["data"]["role"] == "missing"]
    assert [ids.kg_id(m["id"]) for m in missing] == [None]  # not expandable
    assert missing[0]["name"] == XSS + "2 (not in KG)"
    grounded = by_kg[XSS + "id"]
    assert grounded["role"] == "grounded" and grounded["name"] == XSS + "kg"


def test_neighbourhood_elements_give_opaque_ids_and_the_kg_text_as_it_is():
    centre = Entity(id=XSS, name=XSS)
    sub = Subgraph(nodes=[centre, Entity(id="Tom Hanks", name="Tom Hanks"),
                          Entity(id="q1", name=ENT), Entity(id="e0", name="n1")],
                   edges=[Edge(src="Tom Hanks", rel="starred_in", dst=XSS),
                          Edge(src=XSS, rel=XSS, dst="q1"),
                          Edge(src="e0", rel="n0", dst=XSS)])
    extra = Extra()
    extra.add(Subgraph(nodes=[Entity(id=ENT, name=ENT)],
                       edges=[Edge(src="q1", rel=ENT, dst=ENT)]))
    ids = ComponentIds()
    els = neighbourhood_elements(centre, sub, None, extra, ids)
    _check_component_data(els, ids, {XSS, "Tom Hanks", "q1", "e0", ENT})
    assert els["nodes"][0]["data"]["role"] == "seed"
    assert ids.kg_id(els["nodes"][0]["data"]["id"]) == XSS
    # filtered to one relation: the payload relation's edge only, its ends still mapped
    els = neighbourhood_elements(centre, sub, {XSS}, extra, ids)
    _check_component_data(els, ids, {XSS, "q1"})
    assert [e["data"]["rel"] for e in els["edges"]] == [XSS]


def test_component_ids_are_stable_across_reruns_and_unknown_ids_map_to_nothing():
    """The component adds an expansion's elements to those it holds, by id: a node keeps
    its id when the graph grows (the same map, the next rerun), edges too."""
    ans, _ = _hostile()
    ids = ComponentIds()
    before = elements(ans, Extra(), answer_evidence(ans), ids)
    _, extra = _hostile()
    after = elements(ans, extra, answer_evidence(ans), ids)  # a click added nodes and edges
    old = {n["data"]["id"]: n["data"]["kg_id"] for n in before["nodes"]}
    new = {n["data"]["id"]: n["data"]["kg_id"] for n in after["nodes"]}
    assert old.items() <= new.items() and len(new) > len(old)
    old_e = {e["data"]["id"]: (e["data"]["source"], e["data"]["rel"], e["data"]["target"])
             for e in before["edges"]}
    new_e = {e["data"]["id"]: (e["data"]["source"], e["data"]["rel"], e["data"]["target"])
             for e in after["edges"]}
    assert old_e.items() <= new_e.items() and len(new_e) > len(old_e)
    # a fresh map on the same data gives the same ids (deterministic order)
    assert elements(ans, Extra(), answer_evidence(ans), ComponentIds()) == before
    for junk in ("n999", "", "e0", None, 3, ["n0"], {"id": "n0"}, XSS, "Tom Hanks"):
        assert ids.kg_id(junk) is None, junk
    assert ids.kg_id("n0") == "Tom Hanks"


def test_graph_maps_a_click_back_to_the_kg_id_once_and_ignores_unknown_ids(monkeypatch):
    """app.common.graph in a Streamlit run, the component replaced by a stand-in that
    reports one click per run: a known opaque id comes back as the KG id (once), an id the
    map lacks, a name not in the KG or a malformed event as None."""
    from streamlit.testing.v1 import AppTest

    import talent_core.ui.common as common

    # the script's graph: n0 the seed (the payload), n1 its neighbour, n2 a missing name
    clicks = ["n0", "n0", "n999", "n2", ["n1"], None, XSS, "e0", "n1"]
    stamps = [1, 1, 2, 3, 4, 5, 6, 7, 8]  # the second is the first click reported again
    seen: list[dict] = []

    def fake(elements, **kw):
        i = len(seen)
        seen.append(elements)
        return {"action": "expand", "node": clicks[i], "timestamp": stamps[i]}

    monkeypatch.setattr(common, "_component", fake)

    def script():
        import streamlit as st

        from talent_core.models import (
            Answer,
            Candidate,
            CandidateEdge,
            CandidateNode,
            OutOfCandidate,
            Selection,
        )
        from talent_core.ui.common import graph, graph_ids
        from talent_core.ui.kg import elements

        xss = """<img src=x onerror="window.top.document.title='XSSID';alert(1)">"""
        cand = Candidate(question="q", nodes=[CandidateNode(id=xss, name=xss, seed=True),
                                              CandidateNode(id="b", name="B")],
                         edges=[CandidateEdge(src=xss, rel="r", dst="b")])
        sel = Selection(out_of_candidate=[OutOfCandidate(name="gone", grounded=False)])
        ans = Answer(question="q", answer=[], candidate=cand, selection=sel)
        got = graph(elements(ans, None, (), graph_ids("g")), key="g")
        st.session_state.setdefault("got", []).append(got)

    at = AppTest.from_function(script, default_timeout=60)
    for _ in clicks:
        at.run()
        assert not at.exception, at.exception
    roles = {n["data"]["id"]: n["data"]["role"] for n in seen[0]["nodes"]}
    assert roles == {"n0": "seed", "n1": "candidate", "n2": "missing"}
    assert at.session_state["got"] == [XSS, None, None, None, None, None, None, None, "b"]


def _star(answers: int) -> dict:
    nodes = [{"data": {"id": "s", "role": "seed", "name": "Tom Hanks"}},
             *({"data": {"id": f"a{i}", "role": "answer", "name": f"Film {i}"}}
               for i in range(answers)),
             {"data": {"id": "far", "role": "candidate", "name": "1984"}},
             {"data": {"id": "lone", "role": "missing", "name": "Oppenheimer"}}]
    edges = [*({"data": {"source": "s", "target": f"a{i}", "rel": "starred_actors"}}
               for i in range(answers)),
             {"data": {"source": "far", "target": "a0", "rel": "directed_by"}}]
    return {"nodes": nodes, "edges": edges}


def test_layered_reads_the_evidence_left_to_right_and_fills_a_wide_column():
    """Seeds in the first column, their answers after them (a long list wrapped into
    sub-columns), a node two hops out further right; the drawing about 1.5 times as wide as
    tall (the Ask column), whatever the list's length; every node placed once."""
    for answers in (1, 5, 32, 120):
        laid, font = layered(_star(answers))
        pos = {n["data"]["id"]: n["position"] for n in laid["nodes"]}
        assert len(pos) == answers + 3
        assert pos["s"]["x"] == 0 and pos["lone"]["x"] == 0  # a part no seed reaches: col 0
        assert all(pos[f"a{i}"]["x"] > 0 for i in range(answers))
        assert pos["far"]["x"] > max(pos[f"a{i}"]["x"] for i in range(answers))
        assert len({(p["x"], p["y"]) for p in pos.values()}) == len(pos)  # no overlap
        xs = [p["x"] for p in pos.values()]
        ys = [p["y"] for p in pos.values()]
        if answers >= 32:
            assert 1.0 <= (max(xs) - min(xs)) / (max(ys) - min(ys)) <= 2.5
        assert font > 0
        shown = [e["data"]["caption"] for e in laid["edges"]]
        # a fan of one relation from one node: one caption (2 edges or fewer: each its own)
        assert shown.count("starred_actors") == (1 if answers > 2 else answers)
        assert shown[-1] == "directed_by"
    assert layered({"nodes": [], "edges": []})[0] == {"nodes": [], "edges": []}

