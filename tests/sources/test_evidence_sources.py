"""The sources of an answer's evidence (talent_core.explore.evidence_sources): what the Ask
page names when the facts behind an answer come from several loads (issue 33)."""

from __future__ import annotations

from talent_core.explore import Evidence, EvidencePath, Hop, evidence_sources
from talent_core.models import Edge, SourceRecord
from talent_core.store.memory import MemoryStore


def store() -> MemoryStore:
    s = MemoryStore()
    s.upsert_entities([(i, i, None) for i in ("Tom", "Film", "Dee", "Old")])
    s.put_source(SourceRecord(id=1, name="films.txt"))
    s.put_source(SourceRecord(id=2, name="directors <b>.txt"))
    s.upsert_triples([Edge(src="Film", rel="starred_actors", dst="Tom")], 1)
    s.upsert_triples([Edge(src="Film", rel="directed_by", dst="Dee")], 2)
    s.upsert_triples([Edge(src="Film", rel="directed_by", dst="Dee")], 1)
    s.upsert_triples([Edge(src="Film", rel="release_year", dst="Old")])  # legacy
    return s


def path(*hops: tuple[str, str, str]) -> EvidencePath:
    return EvidencePath(hops=[Hop(*h) for h in hops], text="t", planned=True)


def test_the_sources_of_each_evidence_edge_by_name():
    s = store()
    two_hop = path(("Film", "starred_actors", "Tom"), ("Film", "directed_by", "Dee"))
    ev = [Evidence(answer="Dee", id="Dee", paths=[two_hop])]
    assert evidence_sources(s, ev) == ["directors <b>.txt", "films.txt"]
    one = [Evidence(answer="Tom", id="Tom", paths=[path(("Film", "starred_actors", "Tom"))])]
    assert evidence_sources(s, one) == ["films.txt"]
    old = [Evidence(answer="Old", id="Old", paths=[path(("Film", "release_year", "Old"))])]
    assert evidence_sources(s, old) == ["legacy"]
    assert evidence_sources(s, [Evidence(answer="x", id=None)]) == []
