"""`GraphReader.relations_at` under the contract (every store): the relation types on a
node's edges in either direction, uncapped (the planner's first relations; issue 29)."""

from __future__ import annotations

from test_store_contract import load_nb, load_people


def test_relations_at_both_directions_and_uncapped(read_store):
    load_nb(read_store)
    assert read_store.relations_at(["c"]) == {"r2", "r3", "r6"}  # b-r2->c, c-r3->d, c-r6->a
    assert read_store.relations_at(["H"]) == {"r5", "genre_of"}  # 20 leaves: one type
    assert read_store.relations_at(["a", "e"]) == {"r1", "r5", "r6", "r4"}
    assert read_store.relations_at(["nowhere"]) == set()
    assert read_store.relations_at([]) == set()


def test_relations_at_freebase_names(read_store):
    load_people(read_store)
    assert read_store.relations_at(["m.0abc"]) == {"film.film.starring",
                                                    "people.person.place_of_birth"}


def test_entity_ids_pages_in_id_order(read_store):
    load_nb(read_store)
    every = read_store.entity_ids("", 10_000)
    assert every == sorted(every) and {"a", "c", "H"} <= set(every)
    first, rest = read_store.entity_ids("", 2), read_store.entity_ids(every[1], 10_000)
    assert first == every[:2] and rest == every[2:]
    assert read_store.entity_ids(every[-1], 5) == []
    assert read_store.entity_ids("", 0) == []


def test_entity_ids_pages_every_id(read_store):
    """Pages of one id through accented names give every id once: FalkorDB's range index
    orders "José Rivera" and "Joseph" unlike its ORDER BY, which skipped ids there."""
    names = ["José Rivera", "Joseph Gordon", "Jose", "Josf", "Zoë", "Zoe", "apple", "Émile",
             "Ender", "Amélie", "Amelia", "Ñu", "Nu"]
    read_store.upsert_entities([(n, n, None) for n in names])
    got, after = [], ""
    while page := read_store.entity_ids(after, 1):
        got += page
        after = page[-1]
        assert len(got) <= len(names)
    assert got == sorted(names)
