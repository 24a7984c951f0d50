from __future__ import annotations

import numpy as np
import pytest
from retrieval_helpers import kb

from talent_core.retrieval.paths import expand_paths, path_score
from talent_core.store.base import ExpansionCaps
from talent_core.store.expand import expand

# A film X with director D; D directed films F1, F2; F1 stars A1, A2; F2 stars A2;
# X stars A3; X has genre G, G has films F1, F3 (a "hub").
TRIPLES = kb("""
X|directed_by|D
F1|directed_by|D
F2|directed_by|D
F1|starred_actors|A1
F1|starred_actors|A2
F2|starred_actors|A2
X|starred_actors|A3
X|has_genre|G
F1|has_genre|G
F3|has_genre|G
""")
SCORES = {"directed_by": 0.9, "starred_actors": 0.8, "has_genre": 0.1}


class OneHopSpy:
    def __init__(self):
        rows = {}
        for h, r, t in TRIPLES:
            rows.setdefault(h, []).append((t, r, True))
            rows.setdefault(t, []).append((h, r, False))
        self.rows = {k: sorted(v) for k, v in rows.items()}
        self.frontiers: list[list[str]] = []

    def __call__(self, frontier):
        self.frontiers.append(list(frontier))

        def fetch(ids, limit):
            for fid in ids:
                for mid, rel, out in self.rows.get(fid, [])[:limit]:
                    yield (fid, out, rel, mid, mid)

        from talent_core.models import Entity

        caps = ExpansionCaps(fanout=50, max_nodes=1000, max_edges=1000)
        return expand([Entity(id=i, name=i) for i in frontier], fetch, 1, caps)


def _scores(rels):
    return {r: SCORES[r] for r in rels}


def _ends(exp, rels):
    t = next(t for t in exp.types if t.rels == rels)
    return {exp.ids[j]: s for j, s in zip(t.ends.tolist(), t.support.tolist(), strict=True)}


def test_path_score_counts_distinct_relations_against_tau():
    s = {"a": 0.9, "b": 0.5, "c": 0.1}
    tau = 0.5
    assert path_score(("a",), s, tau) == pytest.approx(0.4)
    assert path_score(("a", "a"), s, tau) == pytest.approx(0.4)  # repetition is neutral
    assert path_score(("a", "c"), s, tau) == pytest.approx(0.0)  # an off-topic hop costs
    assert path_score(("a", "b"), s, tau) == pytest.approx(0.4)


def test_expansion_types_supports_and_anchor_exclusion():
    spy = OneHopSpy()
    exp = expand_paths([("X", "X")], spy, _scores, hops=3, beam=10)
    assert exp.store_calls == 3 and spy.frontiers[0] == ["X"]
    # tau = mean(0.9, 0.8, 0.1) = 0.6
    assert exp.tau == pytest.approx(0.6)
    # X's director, then D's films: F1, F2 (never X again: walks do not return to anchors)
    assert _ends(exp, ("directed_by",)) == {"D": 1.0}
    assert _ends(exp, ("directed_by", "directed_by")) == {"F1": 1.0, "F2": 1.0}
    # actors of the director's films: A2 is reached by two walks (F1 and F2)
    ends = _ends(exp, ("directed_by", "directed_by", "starred_actors"))
    assert ends == {"A1": 1.0, "A2": 2.0}
    # ends are ordered by support: A2 first
    t = next(t for t in exp.types if t.rels == ("directed_by", "directed_by", "starred_actors"))
    assert exp.ids[int(t.ends[0])] == "A2"
    # the best path types come first; genre paths score below tau and rank last
    assert exp.types[0].score >= exp.types[-1].score
    assert all("has_genre" in t.rels for t in exp.types[-3:])
    # every type's edges are edges of the KG between its walks' nodes
    kg = {(h, r, t) for h, r, t in TRIPLES}
    for k in exp.used_edges().tolist():
        e = exp.edges[k]
        assert (e.src, e.rel, e.dst) in kg


def test_beam_limits_types_per_depth_and_frontier_cap():
    spy = OneHopSpy()
    exp = expand_paths([("X", "X")], spy, _scores, hops=2, beam=1)
    # depth 1 keeps only the best extension (directed_by), depth 2 its best extension
    assert [t.rels for t in exp.types] == [("directed_by", "directed_by"), ("directed_by",)]
    spy = OneHopSpy()
    expand_paths([("X", "X")], spy, _scores, hops=3, beam=10, frontier_per_path=1)
    # with one end per type passed on, D's two films are not both expanded at depth 3
    depth3 = spy.frontiers[2]
    assert not {"F1", "F2"} <= set(depth3)


def test_extend_limits_which_types_go_deeper():
    spy = OneHopSpy()
    exp = expand_paths([("X", "X")], spy, _scores, hops=2, beam=10, extend=1)
    # depth 1 keeps all three relations as types, but only directed_by (the best) goes on
    assert {t.rels for t in exp.types if len(t.rels) == 1} == {
        ("directed_by",),
        ("starred_actors",),
        ("has_genre",),
    }
    assert all(t.rels[0] == "directed_by" for t in exp.types if len(t.rels) == 2)
    assert spy.frontiers[1] == ["D"]  # neither A3 nor the genre hub G was fetched


def test_no_anchors_or_no_edges():
    spy = OneHopSpy()
    exp = expand_paths([], spy, _scores, hops=2, beam=10)
    assert exp.types == [] and exp.store_calls == 0 and exp.used_edges().size == 0
    exp = expand_paths([("lonely", "Lonely")], spy, _scores, hops=2, beam=10)
    assert exp.types == [] and exp.ids == ["lonely"]
    assert np.array_equal(exp.anchors, [0])


def test_one_hop_shares_the_node_and_edge_budget(mem_store):
    from talent_core.retrieval.neighbourhood import OneHop, check_hops, neighbourhood

    one = OneHop(mem_store, ExpansionCaps(fanout=50, max_nodes=5, max_edges=1000))
    sub = one(["The Matrix"])
    assert 0 < len(sub.nodes) <= 5 + 1 and one.truncated  # the Matrix has more neighbours
    assert one([]).nodes == [] and one.calls == 1
    # budget spent: further frontiers are cut without a store call
    assert one(["Speed"]).truncated and one.calls == 1
    with pytest.raises(ValueError, match="hops"):
        check_hops(4)
    caps = ExpansionCaps(fanout=2, max_nodes=2000, max_edges=5000)
    assert neighbourhood(mem_store, [], 2, caps).nodes == []
    full = neighbourhood(mem_store, ["The Matrix"], 1, caps)
    assert full.truncated and len(full.edges) == 2
