"""Identifier-style KG names ("Daniel_OPARE", "j_p_morgan_jr": DBpedia/YAGO style) link from
questions that type them as people do, without brackets; the link shows the KG's own name,
and an unrelated question links to none of them (issue 45)."""

from __future__ import annotations

import pytest

from talent_core.models import Edge
from talent_core.retrieval.linking import not_in_kg, search
from talent_core.retrieval.seeds import text_seeds
from talent_core.store.memory import MemoryStore
from talent_core.text import identifier_forms, identifier_token, name_similarity, word_key

NAMES = ["Daniel_OPARE", "j_p_morgan_jr", "Tigres_UANL", "Repo_Men", "Daniel",
         "Standard_Liège", "Ghana", "J._P._Morgan_&_Co.", "Monterrey", "Miguel_Sapochnik"]
TRIPLES = [("Daniel_OPARE", "plays_for", "Standard_Liège"),
           ("Daniel_OPARE", "born_in", "Ghana"),
           ("j_p_morgan_jr", "led", "J._P._Morgan_&_Co."),
           ("Tigres_UANL", "based_in", "Monterrey"),
           ("Repo_Men", "directed_by", "Miguel_Sapochnik")]


@pytest.fixture(scope="module")
def id_store() -> MemoryStore:
    store = MemoryStore()
    store.upsert_entities([(n, n, None) for n in NAMES])
    store.upsert_relations([(r, None) for r in {r for _, r, _ in TRIPLES}])
    store.upsert_triples([Edge(src=h, rel=r, dst=t) for h, r, t in TRIPLES])
    return store


def test_identifier_spellings_of_a_typed_name():
    assert identifier_forms("Daniel Opare") == ["Daniel_Opare"]
    assert identifier_forms("J. P. Morgan Jr.") == ["J._P._Morgan_Jr.", "J_P_Morgan_Jr"]
    assert identifier_forms("Ghana") == []
    assert identifier_token("J. P. Morgan Jr.") == "j_p_morgan_jr"
    assert identifier_token("Ghana") is None
    assert word_key("Daniel_OPARE") == word_key("daniel opare") == "daniel opare"
    assert name_similarity("J. P. Morgan Jr.", "j_p_morgan_jr") == (1.0, 0)
    assert name_similarity("Tigres UANL", "Tigres_UANL") == (1.0, 0)
    assert name_similarity("Inception", "Inception") == (1.0, 0)


# typed names, as people write them and with a typo: (question, the KG's name) by how they link
TYPED = {"exact": [("which club does Daniel Opare play for", "Daniel_OPARE"),
                   ("which firm did J. P. Morgan Jr. lead", "j_p_morgan_jr"),
                   ("where are Tigres UANL based", "Tigres_UANL"),
                   ("who directed repo men", "Repo_Men")],
         "fuzzy": [("which club does Danel Opare play for", "Daniel_OPARE"),
                   ("which firm did J. P. Morgn Jr. lead", "j_p_morgan_jr"),
                   ("where are Tigres UNAL based", "Tigres_UANL")]}


@pytest.mark.parametrize(("question", "kg_name", "how"),
                         [(q, name, how) for how, rows in TYPED.items() for q, name in rows])
def test_typed_names_link_to_the_kg_name(id_store, question, kg_name, how):
    """A typed name links (exactly, or fuzzily with a typo) to the KG's node, and the link
    shows the KG's own name."""
    seeds = text_seeds(question, id_store, fuzzy_link=True)
    assert [a.name for a in seeds.anchors()] == [kg_name]
    assert [(lk.how, lk.name) for lk in seeds.links if lk.linked] == [(how, kg_name)]
    assert not not_in_kg(seeds.links)
    if how == "exact":
        link = next(lk for lk in seeds.links if lk.id == kg_name)
        assert link.score == 1.0


def test_a_bracketed_topic_typed_as_people_write_it(id_store):
    seeds = text_seeds("which club does Daniel Opare play for", id_store, ["Daniel Opare"],
                       fuzzy_link=True)
    assert [a.name for a in seeds.anchors()] == ["Daniel_OPARE"]
    assert [(lk.how, lk.name, lk.topic) for lk in seeds.links] == [("exact", "Daniel_OPARE",
                                                                    True)]


def test_unrelated_questions_link_to_no_identifier(id_store):
    for question in ("who directed Inception", "what did Daniel Craig star in",
                     "which club does Oparey Danielsson play for"):
        seeds = text_seeds(question, id_store, fuzzy_link=True)
        linked = {lk.name for lk in seeds.links if lk.linked}
        assert not linked & {"Daniel_OPARE", "j_p_morgan_jr", "Tigres_UANL", "Repo_Men"}
    seeds = text_seeds("who directed Inception", id_store, fuzzy_link=True)
    assert not_in_kg(seeds.links)


def test_explore_search_finds_the_identifier(id_store):
    got = search(id_store, "Daniel Opare", 0.75)
    assert (got[0].name, got[0].how) == ("Daniel_OPARE", "exact")
    got = search(id_store, "tigres unal", 0.75)
    assert (got[0].name, got[0].how) == ("Tigres_UANL", "fuzzy")


def test_an_identifier_typed_into_search_finds_a_spaced_name():
    store = MemoryStore()
    store.upsert_entities([(n, n, None) for n in ("Tom Hanks", "Tom and Huck")])
    got = search(store, "Tom_Hanks", 0.75)
    assert (got[0].name, got[0].score) == ("Tom Hanks", 1.0)
