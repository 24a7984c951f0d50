"""Follow-up questions (issue 46): referring words, the readings of the previous turns
(number, person, the planner's score), the history re-read from the KG, and S anchored on
the reading with the referents planning as one set."""

from __future__ import annotations

import pytest

from talent_core.config import Settings
from talent_core.conversation import (
    HISTORY,
    known_turns,
    read_follow_up,
    readings,
    referring_words,
    rephrase,
    without_words,
)
from talent_core.models import Entity, Turn
from talent_core.pipeline import Pipeline


def E(name: str) -> Entity:  # noqa: N802 - reads as a constructor
    return Entity(id=name, name=name)


@pytest.mark.parametrize(("question", "ref"), [
    ("who directed them?", ("them", True)),
    ("When were THEY released", ("THEY", True)),
    ("which of those are comedies", ("those", True)),
    ("when was it released?", ("it", False)),
    ("and his wife?", ("his", False)),
    ("it's directed by whom", ("it", False)),
    ("who directed that?", ("that", False)),
    ("who directed The Matrix", None),
    ("which items are themed", None),  # no pronoun inside a word
    ("the film that Nolan directed", None),  # "that" not at the end
])
def test_referring_words(question, ref):
    assert referring_words(question) == ref


def test_the_planner_reads_the_question_without_its_referring_word():
    assert without_words("who directed them?", "them") == "who directed ?"
    assert without_words("and his theme?", "his") == "and theme?"


TOM = Turn(question="which films did Tom Hanks star in", topic=[E("Tom Hanks")],
           answers=[E("Big"), E("Splash")])


def test_plural_reads_the_answers_and_singular_the_one_topic():
    assert read_follow_up("who directed them", [TOM]).source == "answers"
    it = read_follow_up("where was he born", [TOM])
    assert it.source == "topic" and [e.id for e in it.entities] == ["Tom Hanks"]


def test_case_variants_of_one_name_are_one_referent():
    tagged = Turn(question="which films did Tom Hanks star in",
                  topic=[E("Tom Hanks"), E("tom hanks")], answers=[E("Big"), E("Splash")])
    he = read_follow_up("where was he born", [tagged])
    assert he.source == "topic" and not he.plural
    assert he.text == "reading 'he' as Tom Hanks (the topic above)"


def test_the_score_decides_between_readings_that_agree():
    turn = Turn(question="what did Big win", topic=[E("Big")], answers=[E("Oscar")])
    assert read_follow_up("when was it released", [turn]).source == "answers"  # no score
    scores = {"Big": 5.0, "Oscar": 1.0}
    got = read_follow_up("when was it released", [turn], lambda ids: scores[ids[0]])
    assert got.source == "topic" and got.entities[0].id == "Big"
    tie = read_follow_up("when was it released", [turn], lambda ids: 1.0)
    assert tie.source == "answers"  # a tie keeps the latest turn's answers


def test_he_reads_people_and_never_a_value_and_it_avoids_people():
    who = Turn(question="who directed Inception", topic=[E("Inception")],
               answers=[E("Christopher Nolan")])
    when = Turn(question="when was it released", topic=[E("Inception")], answers=[E("2010")])
    he = read_follow_up("what else did he direct", [who, when], lambda ids: 1.0)
    assert he.entities[0].id == "Christopher Nolan" and he.people
    assert all(r.entities[0].id != "2010" for r in readings("he", False, [who, when]))
    it = read_follow_up("when was it released", [who], lambda ids: 1.0)
    assert it.entities[0].id == "Inception"


def test_a_they_with_no_plural_to_refer_to_reads_a_person():
    who = Turn(question="who directed The Master", topic=[E("The Master")],
               answers=[E("Paul Thomas Anderson")])
    they = read_follow_up("which movies did they direct", [who], lambda ids: (
        2.0 if ids == ["The Master"] else 1.0))
    assert they.entities[0].id == "Paul Thomas Anderson"  # singular they: the person


def test_only_the_last_turns_count_and_the_reading_says_how_it_read():
    old = Turn(question="q", topic=[E("Old")], answers=[E("A"), E("B")])
    recent = [Turn(question=f"q{i}", topic=[E(f"T{i}")], answers=[E(f"x{i}")])
              for i in range(HISTORY)]
    assert all(r.entities[0].id != "A" for r in readings("them", True, [old, *recent]))
    many = Turn(question="q", answers=[E(f"f{i}") for i in range(150)])
    r = read_follow_up("who directed them", [many])
    assert len(r.entities) == 100 and r.total == 150
    assert r.text == "reading 'them' as the 100 answers above (the first 100 of 150)"
    assert read_follow_up("who directed them", []) is None
    assert read_follow_up("who directed Gravity", [TOM]) is None


def test_a_history_is_read_again_from_the_kg(mem_store):
    turn = Turn(question="q", topic=[Entity(id="Gravity", name="<b>not its name</b>")],
                answers=[E("Sandra Bullock"), E("no such entity")])
    [got] = known_turns([turn], mem_store.entities_by_id)
    assert got.topic == [E("Gravity")] and got.answers == [E("Sandra Bullock")]


@pytest.fixture
def pipe(mem_store, bow) -> Pipeline:
    return Pipeline(settings=Settings(_env_file=None), store=mem_store, embedder=bow,
                    adapters="none", planner="zero-shot")


def test_a_follow_up_is_anchored_on_the_previous_answers_as_one_set(pipe):
    films = Turn(question="which films did Keanu Reeves star in",
                 topic=[E("Keanu Reeves")], answers=[E("The Matrix"), E("John Wick")])
    cand, plan = pipe.retrieve_planned("who directed them?", history=[films])
    assert cand.reading is not None and cand.reading.source == "answers"
    assert set(cand.anchors) == {"The Matrix", "John Wick"}
    assert all(lk.how == "id" and lk.topic for lk in cand.links)
    assert plan is not None and plan.paths[0].rels == ["directed_by"] and not plan.joint
    ends = plan.ends["directed_by"]
    assert {"Lana Wachowski", "Chad Stahelski"} <= ends  # both films' directors: a union


def test_a_question_with_its_own_topic_is_not_a_follow_up(pipe):
    films = Turn(question="q", topic=[E("Keanu Reeves")], answers=[E("The Matrix")])
    cand, _ = pipe.retrieve_planned("who directed it [Gravity]", history=[films])
    assert cand.reading is None and cand.anchors == ["Gravity"]
    assert pipe.anchors_of("who directed [Gravity]") == [E("Gravity")]
    assert pipe.anchors_of("who directed it", [films]) == [E("The Matrix")]


def test_a_chat_reply_reads_back_as_the_entities_spelt_as_it_spells_them(mem_store):
    """A chat history's reply names "Keanu Reeves": the person, not the tag "keanu reeves"
    beside him; a name the KG holds in another casing only reads as that one."""
    from talent_core.api.chat import _named

    got = _named(mem_store, ["Keanu Reeves", "the matrix", "nothing such"])
    assert [e.id for e in got] == ["Keanu Reeves", "The Matrix"]


NOLAN = Turn(question="how many movies did [Christopher Nolan] direct",
             topic=[E("Christopher Nolan")], answers=[E("Inception")])


@pytest.mark.parametrize(("question", "asked"), [
    ("what about [Steven Spielberg]?", "how many movies did [Steven Spielberg] direct"),
    ("How about Steven Spielberg", "how many movies did [Steven Spielberg] direct"),
    ("and Steven Spielberg?", "how many movies did [Steven Spielberg] direct"),
    ("and who wrote Inception?", None),  # a question of its own
    ("what about them?", None),  # a referring word: read_follow_up's
    ("and Steven Spielberg.", None),  # "and X" only as a question
    ("what about a film that a director of the twenties made in Berlin?", None),  # no mention
])
def test_what_about_asks_the_previous_question_about_the_new_mention(question, asked):
    assert rephrase(question, [NOLAN]) == asked
    assert rephrase(question, []) is None


def test_what_about_keeps_the_previous_spelling_and_replaces_a_referring_word():
    plain = Turn(question="who directed Heat", topic=[E("Heat")])
    assert rephrase("what about Alien?", [plain]) == "who directed Alien"
    assert rephrase("what about [Alien]?", [plain]) == "who directed [Alien]"
    after = Turn(question="who directed them?", topic=[E("The Matrix"), E("John Wick")])
    assert rephrase("and Heat?", [after]) == "who directed Heat?"


def test_what_about_is_asked_and_the_reading_says_so(pipe):
    first = Turn(question="who directed [Gravity]", topic=[E("Gravity")],
                 answers=[E("Alfonso Cuarón")])
    cand, plan = pipe.retrieve_planned("what about [John Wick]?", history=[first])
    assert cand.anchors == ["John Wick"] and cand.question == "who directed John Wick"
    assert cand.reading is not None and cand.reading.source == "question"
    assert cand.reading.text == ("reading 'what about [John Wick]?' as 'who directed "
                                 "[John Wick]' (the question above)")
    assert plan is not None and "Chad Stahelski" in plan.ends["directed_by"]
    assert pipe.anchors_of("what about [John Wick]?", [first]) == [E("John Wick")]
