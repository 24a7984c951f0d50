"""The project's fixtures are coherent: every answer is derivable from its KG (checked here
independently of tests/fixtures/build_fixtures.py)."""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict

from loader_helpers import FIXTURES

MQ = FIXTURES / "metaqa"


def _kb():
    fwd, bwd = defaultdict(set), defaultdict(set)
    for line in (MQ / "kb.txt").read_text(encoding="utf-8").splitlines():
        h, r, t = line.split("|")
        fwd[(h, r)].add(t)
        bwd[(t, r)].add(h)
    return fwd, bwd


REL = {  # qtype words -> (relation, direction) for each hop
    ("movie", "director"): ("directed_by", "f"), ("director", "movie"): ("directed_by", "b"),
    ("movie", "actor"): ("starred_actors", "f"), ("actor", "movie"): ("starred_actors", "b"),
    ("movie", "writer"): ("written_by", "f"), ("writer", "movie"): ("written_by", "b"),
    ("movie", "year"): ("release_year", "f"), ("movie", "language"): ("in_language", "f"),
    ("movie", "genre"): ("has_genre", "f"), ("tag", "movie"): ("has_tags", "b"),
}  # fmt: skip


def test_metaqa_answers_follow_from_kb():
    fwd, bwd = _kb()
    total = 0
    for hop in (1, 2, 3):
        qs = (MQ / f"qa_{hop}hop.txt").read_text(encoding="utf-8").splitlines()
        types = (MQ / f"qa_{hop}hop_qtype.txt").read_text(encoding="utf-8").splitlines()
        assert len(qs) == len(types) >= 10
        for q, qtype in zip(qs, types, strict=True):
            text, answers = q.split("\t")
            topic = re.search(r"\[(.+?)\]", text).group(1)
            words = qtype.split("_to_")
            assert len(words) == hop + 1
            frontier = {topic}
            for a, b in itertools.pairwise(words):
                rel, d = REL[(a, b)]
                idx = fwd if d == "f" else bwd
                frontier = set().union(*(idx[(x, rel)] for x in frontier))
            assert set(answers.split("|")) == frontier - {topic}, q
            total += 1
    assert total >= 45


def test_rog_answers_are_in_the_graph_near_the_topic_entity():
    recs = [
        json.loads(x)
        for x in (FIXTURES / "rog" / "webqsp_toy.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert 20 <= len(recs) <= 40
    assert len({r["id"] for r in recs}) == len(recs)
    cvt = rel_dotted = 0
    for r in recs:
        adj = defaultdict(set)
        for h, rel, t in r["graph"]:
            adj[h].add(t)
            adj[t].add(h)
            cvt += h.startswith("m.0") or t.startswith("m.0")
            rel_dotted += rel.count(".") >= 2
        assert r["answer"] and r["a_entity"] == r["answer"]
        reach = set(r["q_entity"])
        for _ in range(2):  # answers lie within 2 hops (through a CVT node at most)
            reach |= {y for x in reach for y in adj[x]}
        assert set(r["a_entity"]) <= reach, r["question"]
    assert cvt >= 20 and rel_dotted == sum(len(r["graph"]) for r in recs)


def test_explagraphs_and_triples_fixtures_have_expected_shape():
    lines = (FIXTURES / "explagraphs" / "sample.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == ["arg1", "arg2", "label", "graph"]
    assert any(line.startswith('"') for line in lines)  # CSV-quoted rows are present
