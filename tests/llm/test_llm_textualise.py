from __future__ import annotations

import csv
import io

import pytest

from talent_core.llm.textualise import graph_csv, textualise
from talent_core.models import Candidate, CandidateEdge, CandidateNode


def _cand(nodes, edges):
    return Candidate(
        question="q",
        nodes=[CandidateNode(id=i, name=n) for i, n in nodes],
        edges=[CandidateEdge(src=s, rel=r, dst=d) for s, r, d in edges],
    )


def test_graph_csv_matches_appendix_e_layout():
    text = graph_csv(
        [(24, "john f. kennedy"), (428, "john f. kennedy 1961 presidential inauguration")],
        [(428, "base.inaugurations.inauguration.president", 24)],
    )
    assert text == (
        "<DESC>\n"
        "node_id,node_attr\n"
        "24,john f. kennedy\n"
        "428,john f. kennedy 1961 presidential inauguration\n"
        "\n"
        "src,edge_attr,dst\n"
        "428,base.inaugurations.inauguration.president,24\n"
        "</DESC>"
    )


def test_graph_csv_empty_graph():
    assert graph_csv([], []) == "<DESC>\nnode_id,node_attr\n\nsrc,edge_attr,dst\n</DESC>"


def test_textualise_local_ids_lowercase_and_dedup():
    cand = _cand(
        [("m.1", "The Matrix"), ("m.2", "Keanu Reeves"), ("m.3", "the matrix"), ("m.4", "1999")],
        [
            ("m.1", "starred_actors", "m.2"),
            ("m.3", "starred_actors", "m.2"),  # same row once m.3 merges into m.1
            ("m.3", "release_year", "m.4"),
        ],
    )
    assert textualise(cand) == (
        "<DESC>\n"
        "node_id,node_attr\n"
        "0,the matrix\n"
        "1,keanu reeves\n"
        "2,1999\n"
        "\n"
        "src,edge_attr,dst\n"
        "0,starred_actors,1\n"
        "0,release_year,2\n"
        "</DESC>"
    )
    # without lowercasing the two Matrix nodes are different names and stay two rows
    kept = textualise(cand, lowercase=False)
    assert "0,The Matrix\n" in kept and "2,the matrix\n" in kept


def test_textualise_quotes_awkward_names_and_round_trips():
    names = ['Hello, "World"', "two\nlines", "plain", "semi;colon"]
    cand = _cand([(f"e{i}", n) for i, n in enumerate(names)], [("e0", "rel,with comma", "e1")])
    text = textualise(cand, lowercase=False)
    assert '0,"Hello, ""World"""\n' in text
    body = text[len("<DESC>\n") : -len("</DESC>")]
    nodes_part, edges_part = body.split("\n\nsrc,edge_attr,dst\n")
    rows = list(csv.reader(io.StringIO(nodes_part + "\n")))
    assert rows[0] == ["node_id", "node_attr"]
    assert [r[1] for r in rows[1:]] == names
    assert list(csv.reader(io.StringIO(edges_part))) == [["0", "rel,with comma", "1"]]


def test_textualise_rejects_dangling_edge():
    with pytest.raises(ValueError, match="outside S"):
        textualise(_cand([("a", "A")], [("a", "r", "b")]))
