"""A name several KG entities share (MetaQA holds 3,081): the link keeps all of them as
anchors and says so (`Link.shared`, `explore.shared_name_note`; issue 33)."""

from __future__ import annotations

from talent_core.explore import link_notes, shared_name_note
from talent_core.models import Answer, Candidate, Entity, Link
from talent_core.retrieval.linking import choose


def test_an_exact_name_two_entities_share_links_to_both_and_says_so():
    exact = [Entity(id="King Kong (1933)", name="King Kong"),
             Entity(id="King Kong (2005)", name="King Kong")]
    link, ids = choose("king kong", exact, [], threshold=0.75, topic=True)
    assert ids == ["King Kong (1933)", "King Kong (2005)"]
    assert link.id == "King Kong (1933)" and link.shared == ["King Kong (2005)"]
    note = shared_name_note(link)
    assert note == ("'King Kong' names 2 entities in the KG (King Kong (1933), King Kong "
                    "(2005)); the answer starts from all of them")
    answer = Answer(question="q", candidate=Candidate(question="q", links=[link]))
    assert note in link_notes(answer)


def test_a_fuzzy_name_several_entities_share_and_a_unique_name():
    fuzzy = [Entity(id=f"x{i}", name="Incepton") for i in range(7)]
    link, ids = choose("Inception", [], fuzzy, threshold=0.75)
    assert link.how == "fuzzy" and len(ids) == 7 and link.shared == ids[1:]
    assert "names 7 entities in the KG (x0, x1, x2, x3, x4 and 2 more)" in shared_name_note(link)
    single, _ = choose("Amelie", [Entity(id="a", name="Amélie")], [], threshold=0.75)
    assert single.shared == [] and shared_name_note(single) is None
    assert shared_name_note(Link(mention="m")) is None
