"""Entity linking (talent_core.retrieval.linking): typos, accents, absent entities,
alternatives, the seeds it gives and the answer's abstention."""

from __future__ import annotations

import pytest

from talent_core.evaluation.runner import score_answer
from talent_core.evaluation.summary import summarise
from talent_core.models import Answer, Candidate, Edge, Entity, Link
from talent_core.questions import QARecord
from talent_core.retrieval import retrieve
from talent_core.retrieval.linking import (
    allowed_edits,
    choose,
    not_in_kg,
    read_as_linked,
    search,
)
from talent_core.retrieval.seeds import text_seeds
from talent_core.store.memory import MemoryStore
from talent_core.text import edit_distance, fold_name, name_similarity


def test_similarity_folds_case_and_accents_and_counts_swaps():
    assert fold_name("Amélie") == "amelie"
    assert name_similarity("AMELIE", "Amélie") == (1.0, 0)
    assert edit_distance("incpetion", "inception") == 1  # a swap is one edit
    assert name_similarity("Incepton", "Inception") == (0.889, 1)
    assert [allowed_edits(m) for m in ("Up", "Heat", "Gravty", "tom hanx")] == [0, 1, 1, 2]


def test_choose_links_exact_fuzzy_or_none():
    e = [Entity(id="1", name="Inception"), Entity(id="2", name="Interception")]
    link, ids = choose("Incepton", [], e, 0.75)
    assert (link.id, link.how, ids, link.alternatives) == ("1", "fuzzy", ["1"], [])
    link, ids = choose("inception", e[:1], e, 0.75)
    assert (link.how, link.score, ids) == ("exact", 1.0, ["1"])
    link, ids = choose("Incepton", [], e, 0.95)  # below the threshold
    assert (link.linked, ids, link.closest) == (False, [], ["Inception", "Interception"])
    link, _ = choose("Oppenheimer", [], [Entity(id="3", name="Evan Oppenheimer")], 0.5)
    assert not link.linked  # five edits: never, whatever the threshold


def test_close_candidates_are_alternatives_and_same_names_all_anchor():
    e = [Entity(id="a", name="Heat"), Entity(id="b", name="Hear"), Entity(id="c", name="heat"),
         Entity(id="d", name="Beat")]
    link, ids = choose("Heax", [], e, 0.7)  # Heat and Hear: one edit each; Beat: two
    assert link.name == "Heat" and ids == ["a", "c"]
    assert [a.name for a in link.alternatives] == ["Hear"]


def test_not_in_kg():
    linked = Link(mention="x", id="1", name="X", score=1.0, how="exact")
    assert not_in_kg([]) == []
    assert not_in_kg([Link(mention="Zorblax", topic=True), linked]) == ["Zorblax"]
    assert not_in_kg([Link(mention="a b"), Link(mention="c")]) == ["a b", "c"]
    assert not_in_kg([Link(mention="a b"), linked]) == []


def test_the_question_is_read_as_linked():
    """A fuzzy mention is replaced by the KG's name in the question the planner and the
    language models see; an exact or unlinked one stays as typed."""
    links = [Link(mention="Incepton", id="1", name="Inception", score=0.89, how="fuzzy"),
             Link(mention="nolan", id="2", name="Christopher Nolan", score=1.0, how="exact"),
             Link(mention="Zorblax")]
    cand = Candidate(question="did nolan direct Incepton with Zorblax", links=links)
    assert read_as_linked(cand).question == "did nolan direct Inception with Zorblax"


@pytest.mark.parametrize(("question", "topics", "anchor", "how"), [
    ("who directed Gravty", None, "Gravity", "fuzzy"),
    ("who directed Gravty", ["Gravty"], "Gravity", "fuzzy"),
    ("who directed Gravity", ["Gravity"], "Gravity", "exact"),
    ("who starred in the matrx", None, "The Matrix", "fuzzy"),
])
def test_fuzzy_links_anchor(mem_store, question, topics, anchor, how):
    seeds = text_seeds(question, mem_store, topics, fuzzy_link=True)
    assert anchor in [a.name for a in seeds.anchors()]
    assert [lk.how for lk in seeds.links] == [how]
    assert not not_in_kg(seeds.links)
    src = "fuzzy" if how == "fuzzy" else "topic"
    assert src in next(s for s in seeds.seeds if s.name == anchor).sources


def test_exact_questions_anchor_as_before(mem_store):
    for q, t in [("did Keanu Reeves star in Speed", None), ("who directed Speed", None),
                 ("who directed Gravity", ["Gravity"]), ("zzz qqq", None)]:
        old = text_seeds(q, mem_store, t)
        new = text_seeds(q, mem_store, t, fuzzy_link=True)
        assert new.anchor_ids == old.anchor_ids
        assert [s.model_dump() for s in new.seeds] == [s.model_dump() for s in old.seeds]
        assert not old.links


def test_absent_entity_is_not_in_kg(mem_store):
    seeds = text_seeds("who directed Oppenheimer", mem_store, ["Oppenheimer"], fuzzy_link=True)
    assert not_in_kg(seeds.links) == ["Oppenheimer"]
    seeds = text_seeds("who directed Zorblaxian", mem_store, fuzzy_link=True)
    assert not_in_kg(seeds.links) == ["directed Zorblaxian"]


def test_retrieve_carries_links_and_fuzzy_link_off_is_exact_only(mem_store, bow):
    cand = retrieve("who directed Gravty", mem_store, bow, topic_entities=["Gravty"])
    assert [(lk.mention, lk.name, lk.how) for lk in cand.links] == [("Gravty", "Gravity",
                                                                     "fuzzy")]
    assert "Gravity" in {n.name for n in cand.nodes if n.seed}
    off = retrieve("who directed Gravty", mem_store, bow, topic_entities=["Gravty"],
                   fuzzy_link=False)
    assert off.links == [] and "Gravity" not in off.anchors


def test_search_puts_the_typoed_name_first():
    store = MemoryStore()
    store.upsert_entities([(n, n, None) for n in ("Tom Hanks", "Tom Hanx Junior", "Tom and Huck",
                                                  "Hans Zimmer")])
    got = search(store, "tom hanx", 0.75)
    assert got[0].name == "Tom Hanks" and got[0].how == "fuzzy"
    assert search(store, "Tom Hanks", 0.75)[0].how == "exact"
    assert search(store, "  ", 0.75) == []


def test_abstained_answer_row():
    cand = Candidate(question="who directed Zorblax", links=[Link(mention="Zorblax",
                                                                  topic=True)])
    ans = Answer(question=cand.question, candidate=cand, not_in_kg=["Zorblax"])
    row = score_answer(QARecord(id="1", question=cand.question, answers=["x"]), ans)
    assert row["not_in_kg"] == ["Zorblax"] and row["links"][0]["id"] is None
    answered = {**row, "hit@1": 1.0, "answer_f1": 1.0}
    answered.pop("not_in_kg")
    summary = summarise([row, answered])
    assert summary["abstained"] == 0.5 and summary["hit@1"] == 0.5


def test_a_common_word_that_is_a_title_gives_way_to_a_written_name():
    """"who made the movie Jaws": "made" is the film *Made* as well as a word; the name the
    question writes capitalised anchors, the word does not (both did: Made's cast was in
    the answer). With no name written so, one-word matches anchor as before."""
    store = MemoryStore()
    store.upsert_entities([(n, n, None) for n in ("Made", "Jaws", "Roy Scheider")])
    store.upsert_triples([Edge(src="Jaws", rel="starred_actors", dst="Roy Scheider"),
                          Edge(src="Made", rel="starred_actors", dst="Roy Scheider")])
    assert text_seeds("who made the movie Jaws", store, fuzzy_link=True).anchor_ids == [
        "Jaws"]
    assert sorted(text_seeds("who made the movie jaws", store).anchor_ids) == ["Jaws", "Made"]
