"""Operators over the planned set (talent_core.operators, issue 48): which one a question
asks for (pure rules), literals as numbers and dates, and each operator computed over a
store: count, filter, superlative, compare (values and counts), exists; the evidence
(store queries and parameters) and the notices when an operator cannot answer."""

from __future__ import annotations

import re

import pytest
from retrieval_helpers import BowEmbedder, as_edges, kb, memory_store

from talent_core.models import Candidate, CandidateNode, PlannedPath, Seed
from talent_core.operators import PlainSet, apply, recognise
from talent_core.operators.run import count_path, mention_groups, store_query
from talent_core.operators.values import comparable_share, holds, value_key
from talent_core.planning import Plan
from talent_core.planning.matcher import PathMatcher
from talent_core.planning.plan import MatcherPlanner
from talent_core.store.cypher import statement
from talent_core.store.memory import MemoryStore

KG = kb("""
Jaws|directed_by|Steven Spielberg
Jaws|release_year|1975
Jaws|starred_actors|Roy Scheider
Lincoln|directed_by|Steven Spielberg
Lincoln|release_year|2012
Lincoln|starred_actors|Daniel Day-Lewis
Hook|directed_by|Steven Spielberg
Hook|release_year|1991
Hook|starred_actors|Dustin Hoffman
Munich|directed_by|Steven Spielberg
Munich|release_year|2005
Alien|directed_by|Ridley Scott
Alien|release_year|1979
Alien|starred_actors|Sigourney Weaver
Gladiator|directed_by|Ridley Scott
Gladiator|release_year|2000
Heat|directed_by|Michael Mann
Heat|release_year|1995
Heat|has_tags|heat
""")


@pytest.fixture(scope="module")
def store():
    return memory_store(KG, BowEmbedder())


@pytest.fixture(scope="module")
def planner():
    return MatcherPlanner(PathMatcher({"name": "zero-shot", "trained": False}, BowEmbedder()))


def cand(question: str, *anchors: str) -> Candidate:
    return Candidate(question=question, seeds=[Seed(id=a, name=a) for a in anchors],
                     anchors=list(anchors),
                     nodes=[CandidateNode(id=a, name=a, seed=True) for a in anchors])


def films_plan(store, person: str) -> tuple[Plan, PlainSet]:
    ends = {f for _, f in store.follow([person], "directed_by", 100)}
    plan = Plan(paths=[PlannedPath(rels=["directed_by"], prob=0.9, ends=len(ends))],
                ends={"directed_by": ends})
    return plan, PlainSet(sorted(ends), sorted(ends), "directed_by")


# -- recognition (pure) ---------------------------------------------------------------

@pytest.mark.parametrize("question, op, fields", [
    ("how many movies did [Steven Spielberg] direct", "count",
     {"base": "which movies did [Steven Spielberg] direct", "noun": "movies"}),
    ("what is the number of films starring [Tom Hanks]", "count",
     {"base": "which films starring [Tom Hanks]", "noun": "films"}),
    ("which of the movies starring [Tom Hanks] were released after 2000", "filter",
     {"base": "which of the movies starring [Tom Hanks]", "clause": "released",
      "comparator": "gt", "value": "2000"}),
    ("which of the movies starring Tom Hanks were released after 2000", "filter",
     {"base": "which of the movies starring Tom Hanks", "clause": "released"}),
    ("which films directed by [X] came out before 1990", "filter",
     {"clause": "came out", "comparator": "lt", "value": "1990"}),
    ("name the films directed by [X] released since 1990", "filter", {"comparator": "ge"}),
    # the verb after a do-question's subject is the question's own: planned, not cut
    ("which movies did [Ringo Lam] direct after 1992", "filter",
     {"base": "which movies did [Ringo Lam] direct", "clause": "direct", "value": "1992"}),
    ("which films did Tom Hanks star in after 2000", "filter",
     {"base": "which films did Tom Hanks star in", "comparator": "gt"}),
    ("what is the latest movie directed by [Steven Spielberg]", "superlative",
     {"base": "what is the movie directed by [Steven Spielberg]", "most": True}),
    ("which is the earliest film starring [Tom Hanks]", "superlative", {"most": False}),
    ("which was released first, [Heat] or [Alien]", "compare",
     {"most": False, "by_count": False, "yes_no": False, "clause": "released"}),
    ("which came out later, Heat or Alien", "compare", {"most": True}),
    ("was [Alien] released before [Heat]", "compare", {"most": False, "yes_no": True}),
    ("did [Steven Spielberg] direct more films than [Ridley Scott]", "compare",
     {"by_count": True, "most": True, "yes_no": True}),
    ("who directed fewer movies, [A] or [B]", "compare",
     {"by_count": True, "most": False, "yes_no": False}),
    ("did [Tom Hanks] star in [Forrest Gump]", "exists", {"yes_no": True}),
    ("did Tom Hanks star in Forrest Gump", "exists", {"yes_no": True}),
    # an analyst's own words (bench/operator_questions.py FREE)
    ("count the films Martin Scorsese directed", "count",
     {"base": "which films Martin Scorsese directed"}),
    ("in how many movies did Tom Hanks act", "count",
     {"base": "which movies did Tom Hanks act"}),
    ("what's the total number of films written by Woody Allen", "count", {"noun": "films"}),
    ("how many record labels has [Slipknot] been signed to", "count",
     {"noun": "record labels"}),
    ("how many children did [Queen Victoria] have", "count", {"noun": "children"}),
    ("how many of the films starring [Tom Hanks] are comedies", "count", {"noun": ""}),
    ("is Jaws older than Alien?", "compare", {"yes_no": True, "most": False,
                                             "by_count": False}),
    ("was Inception released after Memento", "compare", {"yes_no": True, "most": True}),
    ("has Meryl Streep appeared in more films than Robert De Niro", "compare",
     {"by_count": True, "yes_no": True}),
    ("which Tom Hanks film came out last", "superlative", {"most": True}),
])
def test_recognise_reads_the_operator_and_its_parts(question, op, fields):
    got = recognise(question)
    assert got is not None and got.op == op
    for k, v in fields.items():
        assert getattr(got, k) == v, k
    assert "[" not in got.question


@pytest.mark.parametrize("question", [
    "what movies did [Tom Hanks] star in",
    "can you name a film directed by [Isaac Florentine]",  # MetaQA 1-hop: not yes/no
    "the films that share actors with the film [First Blood] were released in which years",
    "what films share actors with First Blood",  # a capitalised name is never a cue
    "who directed [The Last Emperor]",  # bracketed words are never cues
    "when was [Heat] released",
    "is [Willard] considered good",  # MetaQA 1-hop: one bracketed entity, no second one
    "which film is older than [Alien]",  # one bracketed entity: not two compared
])
def test_plain_questions_are_no_operator(question):
    assert recognise(question) is None


# -- values (pure) --------------------------------------------------------------------

def test_values_compare_as_numbers_and_dates():
    assert value_key("2000") == 2000.0 and value_key("-3.5") == -3.5
    assert 1984 < value_key("1984-05-12") < value_key("1984-12-01") < 1985
    assert value_key("1984-05-12T10:00:00") == value_key("1984-05-12")
    assert value_key("good") is None and value_key("1984-13-01") is None
    assert holds(2001, "gt", 2000) and not holds(2000, "gt", 2000) and holds(2000, "ge", 2000)
    assert holds(1999, "lt", 2000) and holds(2000, "le", 2000)
    assert comparable_share(["a", "b"], [("a", "1", "1990"), ("b", "g", "good")]) == 0.5


# -- operators over a store -----------------------------------------------------------

def test_count_is_computed_in_the_store(store, planner):
    op = recognise("how many movies did [Steven Spielberg] direct")
    plan, plain = films_plan(store, "Steven Spielberg")
    got = apply(op, store, planner, cand(op.base, "Steven Spielberg"), plan, plain)
    assert (got.answer, got.answer_type, got.text) == (["4"], "number", "4 movies")
    assert got.path == "directed_by" and got.listed == plain.names
    q = got.queries[0]
    assert q.name == "count_follow" and q.params["rel"] == "directed_by"
    assert q.params["exclude"] == ["Steven Spielberg"] and "in-memory" in q.cypher


def test_count_of_a_two_relation_path_and_of_a_big_set():
    s = MemoryStore()
    members = [f"m{i:05d}" for i in range(10_000)]
    s.upsert_entities([(i, i, None) for i in ["hub", "mid", *members]])
    s.upsert_triples(as_edges(kb("hub|has|mid\n" + "\n".join(f"mid|holds|{m}" for m in members))))
    n, queries = count_path(s, ["hub"], ["has", "holds"], limit=20)
    assert n == 10_000  # the last hop is counted, not walked (the walk limit is 20)
    assert queries[0].sizes == {"ids": 1, "exclude": 1}


def test_a_count_counts_the_planned_path_whose_ends_look_like_its_noun(planner):
    # "how many profession titles does [Twain] have": the plan's top path reads Twain's
    # co-members (the other holders of his professions, people) at p 0.6; its runner-up
    # reaches the professions themselves, whose names the counted noun is like
    s = memory_store(kb("""
Twain|profession|Writer profession
Twain|profession|Humorist profession
Poe|profession|Writer profession
Austen|profession|Writer profession
Swift|profession|Humorist profession
"""), BowEmbedder())
    op = recognise("how many profession titles does [Twain] have")
    assert op.noun == "profession titles"
    walked = {t: {e for _, e in s.follow(list(f), t[-1], 100)} for t, f in
              ((("profession",), {"Twain"}),
               (("profession", "profession"), {"Writer profession", "Humorist profession"}))}
    co = walked[("profession", "profession")] - {"Twain"}
    plan = Plan(paths=[PlannedPath(rels=["profession", "profession"], prob=0.6, ends=len(co)),
                       PlannedPath(rels=["profession"], prob=0.4, ends=2)],
                ends={"profession > profession": co, "profession": walked[("profession",)]})
    plain = PlainSet(sorted(co), sorted(co), "profession > profession")
    got = apply(op, s, planner, cand(op.base, "Twain"), plan, plain)
    assert (got.answer, got.path) == (["2"], "profession")
    assert sorted(got.listed) == ["Humorist profession", "Writer profession"]
    # a plan of one path counts it, whatever its ends look like
    one = Plan(paths=plan.paths[:1], ends={"profession > profession": co})
    got = apply(op, s, planner, cand(op.base, "Twain"), one, plain)
    assert (got.answer, got.path, got.listed) == (["3"], "profession > profession", plain.names)


def test_filter_keeps_the_members_whose_value_passes(store, planner):
    op = recognise("which movies directed by [Steven Spielberg] were released after 1990")
    plan, plain = films_plan(store, "Steven Spielberg")
    got = apply(op, store, planner, cand(op.base, "Steven Spielberg"), plan, plain)
    assert got.relation == "release_year" and got.answer_type == "entities"
    assert got.answer == ["Hook", "Munich", "Lincoln"]  # by value, then name
    assert got.values == {"Hook": "1991", "Munich": "2005", "Lincoln": "2012"}
    assert got.text.startswith("3 of 4 with release_year after 1990")
    assert got.queries[0].name == "member_values" and got.queries[0].sizes["ids"] == 4
    op = recognise("which movies directed by [Steven Spielberg] came out before 1900")
    assert apply(op, store, planner, cand(op.base, "Steven Spielberg"), plan, plain
                 ).answer == []


def test_superlative_picks_the_extreme_value(store, planner):
    plan, plain = films_plan(store, "Steven Spielberg")
    for question, want in (("what is the latest movie directed by [Steven Spielberg]",
                            ["Lincoln"]),
                           ("which is the earliest film directed by [Steven Spielberg]",
                            ["Jaws"])):
        op = recognise(question)
        got = apply(op, store, planner, cand(op.base, "Steven Spielberg"), plan, plain)
        assert got.answer == want and got.relation == "release_year"


def test_no_comparable_relation_says_so(store, planner):
    op = recognise("what is the latest movie directed by [Steven Spielberg]")
    plan = Plan(paths=[PlannedPath(rels=["starred_actors"], prob=1.0)],
                ends={"starred_actors": {"Roy Scheider"}})
    got = apply(op, store, planner, cand(op.base, "Jaws"), plan,
                PlainSet(["Roy Scheider"], ["Roy Scheider"], "starred_actors"))
    assert got.answer == [] and got.relation is None
    assert "no relation" in got.notice


def test_a_set_without_values_gives_way_to_the_plans_next_reading(store, planner):
    """"films with [X] released before 1990" planned as X's co-actors (people: no year):
    the filter reads the plan's next path whose members hold years, and says so."""
    op = recognise("what films with [Roy Scheider] were released before 1990")
    people = {"Daniel Day-Lewis", "Dustin Hoffman"}
    plan = Plan(paths=[PlannedPath(rels=["starred_actors", "starred_actors"], prob=0.6),
                       PlannedPath(rels=["starred_actors"], prob=0.4)],
                ends={"starred_actors > starred_actors": people,
                      "starred_actors": {"Jaws"}})
    got = apply(op, store, planner, cand(op.base, "Roy Scheider"), plan,
                PlainSet(sorted(people), sorted(people), "starred_actors > starred_actors"))
    assert got.answer == ["Jaws"] and got.relation == "release_year"
    assert got.path == "starred_actors" and got.members == 1
    assert "next reading" in got.notice and "'starred_actors > starred_actors'" in got.notice
    assert got.listed == sorted(people)  # the plain list is still shown
    # a plan whose readings all lack values keeps saying so
    plan.ends["starred_actors"] = {"Dustin Hoffman"}
    got = apply(op, store, planner, cand(op.base, "Roy Scheider"), plan,
                PlainSet(sorted(people), sorted(people), "starred_actors > starred_actors"))
    assert got.answer == [] and got.relation is None and "no relation" in got.notice


def test_compare_two_entities_by_value(store, planner):
    op = recognise("which was released first, [Heat] or [Alien]")
    got = apply(op, store, planner, cand(op.question, "Heat", "Alien"), Plan(),
                PlainSet([], [], None))
    assert got.answer == ["Alien"] and got.answer_ids == ["Alien"]
    assert got.values == {"Heat": "1995", "Alien": "1979"}
    op = recognise("was [Heat] released before [Alien]")
    got = apply(op, store, planner, cand(op.question, "Heat", "Alien"), Plan(),
                PlainSet([], [], None))
    assert (got.answer, got.answer_type) == (["no"], "yes/no")


def test_compare_two_entities_by_count(store, planner):
    # (the test's matcher is a bag of words: the question says "directed")
    op = recognise("has [Ridley Scott] directed more films than [Steven Spielberg]")
    got = apply(op, store, planner, cand(op.question, "Ridley Scott", "Steven Spielberg"),
                Plan(), PlainSet([], [], None))
    assert got.answer == ["no"] and got.path == "directed_by"
    assert got.values == {"Ridley Scott": "2", "Steven Spielberg": "4"}
    op = recognise("who has directed fewer movies, [Steven Spielberg] or [Ridley Scott]")
    got = apply(op, store, planner, cand(op.question, "Steven Spielberg", "Ridley Scott"),
                Plan(), PlainSet([], [], None))
    assert got.answer == ["Ridley Scott"]


def test_exists_follows_the_planned_path_between_the_two(store, planner):
    for question, want in (("was [Jaws] directed by [Steven Spielberg]", "yes"),
                           ("was [Alien] directed by [Steven Spielberg]", "no")):
        op = recognise(question)
        names = re.findall(r"\[([^\]]+)\]", question)
        got = apply(op, store, planner, cand(op.question, *names), Plan(),
                    PlainSet([], [], None))
        assert got.answer == [want] and got.path == "directed_by"


def test_a_comparison_needs_two_linked_entities(store, planner):
    op = recognise("did Steven Spielberg direct Jawsx")
    got = apply(op, store, planner, cand(op.question, "Steven Spielberg"), Plan(),
                PlainSet([], [], None))
    assert got.answer == [] and "matched one (Steven Spielberg)" in got.notice


def test_mention_groups_prefer_the_spelling_the_question_wrote():
    c = Candidate(question="was Heat released before Alien",
                  seeds=[Seed(id="heat", name="heat"), Seed(id="Heat", name="Heat"),
                         Seed(id="Alien", name="Alien")], anchors=["heat", "Heat", "Alien"])
    assert mention_groups(c) == [("Heat", ["Heat"]), ("Alien", ["Alien"])]


def test_evidence_shows_the_dialects_statement():
    class Neo:
        dialect = "neo4j"
    q = store_query(Neo(), "count_follow", {"ids": [str(i) for i in range(30)], "rel": "r"})
    assert q.cypher == statement("count_follow", "neo4j") and "WITH DISTINCT m" in q.cypher
    assert len(q.params["ids"]) == 10 and q.sizes == {"ids": 30}
