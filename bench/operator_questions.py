"""Operator questions written from a KG, with their gold computed from its triples.

    python bench/operator_questions.py                      # MetaQA: bench/operator_questions.tsv
    python bench/operator_questions.py --webqsp             # bench/operator_questions_webqsp.tsv
    python bench/operator_questions.py --webqsp-fresh  # bench/operator_questions_webqsp_fresh.tsv
    python bench/operator_questions.py --webqsp-third  # bench/operator_questions_webqsp_third.tsv
    python bench/operator_questions.py --webqsp-compare  # ..._webqsp_compare.tsv
    python bench/operator_questions.py --free               # bench/operator_questions_free.tsv

MetaQA (`../shared/data/metaqa/kb.txt`): 50 questions for each of count, filter,
superlative, compare (value and count) and exists, phrasings varied (several templates
per operator), entities drawn with a fixed seed; then 20 more exists questions whose "no"
is harder (the person is linked to the film by another relation: starred in it, asked
whether they directed it), drawn from their own seed (added after the first run). Each
question's split is fixed by a hash of its text: half `dev` (what the operators may be
looked at and tuned on), half `held-out` (never tuned on; the resolving figures). The
WebQSP evidence KG (the 400 dev records' graphs merged, as `talent load dev.jsonl --format
rog` loads them): a count and a yes/no for hand-picked subjects of six multi-valued
relations, `dev` since stop 59 (its misses were read and the operators changed for them;
`held-out` until then). `--webqsp-fresh`: the same for ten other relations, subjects drawn
with a fixed seed from those of the right type (the list of candidates written by hand, the
draw not), all `held-out`: written at stop 59 before the operators' change for the first
set's misses, and asked once after it. `--webqsp-third`: nine more relations (and the army
officers the second set did not draw), written after the second set's run and not run at
stop 59: the held-out set for a change made for the second set's misses (run at stop 60
with the product unchanged). `--webqsp-compare`: two subjects of each relation of those two
sets compared by their counts (a yes/no and a "which" phrasing each), written at stop 60
before any run, all `held-out`. `--free`: the
questions written by hand in an analyst's words (bench/operator_questions_free.json), with
the MetaQA KB's gold.

Gold is the KG's own: a count is the number of distinct nodes a relation reaches (either
direction, as the planner walks); a value is read in the triple's direction (film ->
release year); a film with two release years (MetaQA merges same-titled films) has both,
as the operators read it: a filter keeps it when one year passes, a superlative ranks it
by its largest (smallest) one. Comparisons use films with one year (no tie) and people
with different counts.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
OUT = Path(__file__).resolve().parent
PER_OP = 50

COUNT = {
    "directed_by": ["how many movies did [{x}] direct", "how many films were directed by [{x}]",
                    "what is the number of films directed by [{x}]",
                    "number of movies [{x}] directed"],
    "starred_actors": ["how many movies did [{x}] star in", "how many films has [{x}] acted in",
                       "what is the number of movies starring [{x}]",
                       "how many films feature [{x}]"],
    "written_by": ["how many films did [{x}] write", "how many movies were written by [{x}]",
                   "the number of screenplays [{x}] wrote"],
}
FILTER = {
    "directed_by": ["which films directed by [{x}] came out before {y}",
                    "which movies did [{x}] direct after {y}",
                    "name the films directed by [{x}] released since {y}"],
    "starred_actors": ["which of the movies starring [{x}] were released after {y}",
                       "what films with [{x}] were released before {y}",
                       "which [{x}] movies came out after {y}"],
    "written_by": ["which films written by [{x}] were released after {y}",
                   "movies written by [{x}] released before {y}"],
}
COMPARATOR = {"before": "lt", "after": "gt", "since": "ge"}
SUPERLATIVE = {
    "directed_by": ["what is the latest movie directed by [{x}]",
                    "which is the oldest film directed by [{x}]",
                    "what was the first movie [{x}] directed"],
    "starred_actors": ["which is the earliest film starring [{x}]",
                       "what is the most recent movie [{x}] acted in",
                       "the newest film with [{x}]"],
    "written_by": ["what is the latest film written by [{x}]",
                   "which was the earliest movie written by [{x}]"],
}
MOST = {"latest": True, "most recent": True, "newest": True, "oldest": False,
        "earliest": False, "first": False}
COMPARE_VALUE = ["which was released first, [{a}] or [{b}]",
                 "which came out later, [{a}] or [{b}]",
                 "was [{a}] released before [{b}]",
                 "which movie is older, [{a}] or [{b}]",
                 "was [{a}] released after [{b}]"]
COMPARE_COUNT = {
    "directed_by": ["did [{a}] direct more films than [{b}]",
                    "who directed fewer movies, [{a}] or [{b}]"],
    "starred_actors": ["who has starred in more movies, [{a}] or [{b}]",
                       "did [{a}] act in fewer films than [{b}]"],
}
EXISTS = {
    "directed_by": ["did [{p}] direct [{f}]", "was [{f}] directed by [{p}]"],
    "starred_actors": ["did [{p}] star in [{f}]", "was [{p}] in the cast of [{f}]",
                       "does [{f}] star [{p}]"],
    "written_by": ["did [{p}] write [{f}]", "was [{f}] written by [{p}]"],
}


def split_of(question: str) -> str:
    """A question's fixed split: half dev, half held-out, by a hash of its text."""
    return "held-out" if hashlib.sha256(question.encode()).digest()[0] % 2 else "dev"


def read_kb(path: Path) -> list[tuple[str, str, str]]:
    with open(path, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("|", 2)) for line in f if line.count("|") >= 2]


def year_of(years: dict[str, set[int]], film: str, most: bool) -> int:
    return max(years[film]) if most else min(years[film])


HOLDS = {"gt": lambda v, y: v > y, "lt": lambda v, y: v < y, "ge": lambda v, y: v >= y}

Index = dict[tuple[str, str], set[str]]


def index_kb(kb: list[tuple[str, str, str]]) -> tuple[Index, Index, dict[str, set[int]]]:
    """(rel, person) -> films and (rel, film) -> people over the people relations
    (`COUNT`'s), and film -> release years."""
    films_of: Index = defaultdict(set)
    people_of: Index = defaultdict(set)
    years: dict[str, set[int]] = defaultdict(set)
    for h, r, t in kb:
        if r in COUNT:
            films_of[(r, t)].add(h)
            people_of[(r, h)].add(t)
        elif r == "release_year" and t.isdigit():
            years[h].add(int(t))
    return films_of, people_of, years


def metaqa(kb: list[tuple[str, str, str]], rng: random.Random) -> list[dict]:
    films_of, people_of, years = index_kb(kb)
    rows: list[dict] = []

    def add(op: str, question: str, gold: list[str], kind: str = "entities") -> None:
        rows.append({"op": op, "question": question, "gold": gold, "type": kind})

    def person(rel: str, least: int, most: int) -> str:
        pool = sorted(p for (r, p), fs in films_of.items() if r == rel
                      and least <= len(fs) <= most)
        return rng.choice(pool)

    rels = list(COUNT)
    for i in range(PER_OP):  # count
        rel = rels[i % len(rels)]
        x = person(rel, 2, 40)
        add("count", rng.choice(COUNT[rel]).format(x=x), [str(len(films_of[(rel, x)] - {x}))],
            "number")
    done = 0
    while done < PER_OP:  # filter
        rel = rels[done % len(rels)]
        x = person(rel, 4, 60)
        dated = {f: ys for f in films_of[(rel, x)] if (ys := years.get(f))}
        every = sorted({y for ys in dated.values() for y in ys})
        if len(every) < 3:
            continue
        y = rng.choice(every[1:-1])
        template = rng.choice(FILTER[rel])
        word = next(w for w in COMPARATOR if f" {w} " in template)
        cmp = COMPARATOR[word]
        keep = sorted(f for f, ys in dated.items() if any(HOLDS[cmp](v, y) for v in ys))
        if not keep or len(keep) == len(dated):
            continue
        add("filter", template.format(x=x, y=y), keep)
        done += 1
    done = 0
    while done < PER_OP:  # superlative
        rel = rels[done % len(rels)]
        x = person(rel, 3, 60)
        dated = [f for f in films_of[(rel, x)] if years.get(f)]
        if len(dated) < 3:
            continue
        template = rng.choice(SUPERLATIVE[rel])
        most = next(v for w, v in MOST.items() if w in template)
        best = (max if most else min)(year_of(years, f, most) for f in dated)
        add("superlative", template.format(x=x),
            sorted(f for f in dated if year_of(years, f, most) == best))
        done += 1
    single = sorted(f for f, ys in years.items() if len(ys) == 1 and not f.isdigit())
    every_film = {rel: sorted({f for (r, _), fs in films_of.items() if r == rel for f in fs})
                  for rel in rels}
    for i in range(PER_OP):  # compare: 30 by value, 20 by count
        if i < 30:
            while True:
                a, b = rng.sample(single, 2)
                ya, yb = next(iter(years[a])), next(iter(years[b]))
                if ya != yb:
                    break
            template = COMPARE_VALUE[i % len(COMPARE_VALUE)]
            q = template.format(a=a, b=b)
            first = a if ya < yb else b
            if template.startswith("was"):
                before = "before" in template
                add("compare", q, ["yes" if (ya < yb) == before else "no"], "yes/no")
            else:
                later = "later" in template
                add("compare", q, [(b if first == a else a) if later else first])
        else:
            rel = ("directed_by", "starred_actors")[i % 2]
            while True:
                a, b = person(rel, 3, 50), person(rel, 3, 50)
                na, nb = len(films_of[(rel, a)] - {a}), len(films_of[(rel, b)] - {b})
                if a != b and na != nb:
                    break
            template = COMPARE_COUNT[rel][i // 2 % 2]
            more = "more" in template
            if template.startswith("did"):
                add("compare", template.format(a=a, b=b),
                    ["yes" if (na > nb) == more else "no"], "yes/no")
            else:
                add("compare", template.format(a=a, b=b),
                    [a if (na > nb) == more else b])
    for i in range(PER_OP):  # exists: half true, half false
        rel = rels[i % len(rels)]
        p = person(rel, 2, 40)
        if i % 2 == 0:
            f = rng.choice(sorted(films_of[(rel, p)] - {p}))
        else:
            while (f := rng.choice(every_film[rel])) in films_of[(rel, p)] or f == p:
                pass
        add("exists", rng.choice(EXISTS[rel]).format(p=p, f=f),
            ["yes" if p in people_of[(rel, f)] else "no"], "yes/no")
    hard = random.Random(4848)  # its own stream: the questions above stay as they were
    linked = [(p, f, r, other) for (r, p), fs in sorted(films_of.items()) for f in sorted(fs)
              for other in rels if other != r and p not in people_of[(other, f)]
              and other in EXISTS and f != p]
    for p, f, _r, other in hard.sample(linked, 20):
        # a person linked to the film by another relation (starred in it, asked whether
        # they directed it): "no" unless the KG holds both
        add("exists", hard.choice(EXISTS[other]).format(p=p, f=f), ["no"], "yes/no")
    return rows


# written by hand in an analyst's words, in two batches (what each was written after: its
# "about"): per batch [question, op, spec], the gold from the KB by `free_gold`
FREE_FILE = OUT / "operator_questions_free.json"


def free_questions() -> list[tuple[str, str, str, tuple]]:
    """(split, question, op, spec) of every hand-written question of FREE_FILE, batch by
    batch."""
    batches = json.loads(FREE_FILE.read_text(encoding="utf-8"))
    return [(split, question, op, tuple(spec)) for split in ("free-1", "free-2")
            for question, op, spec in batches[split]["questions"]]


def free_gold(kb: list[tuple[str, str, str]]) -> list[dict]:
    """The hand-written questions (FREE_FILE) with their gold from the KB (the operators'
    semantics: a film's years all count, the largest for "latest", the smallest for
    "first")."""
    films_of, _, years = index_kb(kb)
    rows = []
    for split, question, op, spec in free_questions():
        if op == "count":
            gold, kind = [str(len(films_of[spec]))], "number"
        elif op == "filter":
            rel, x, cmp, y = spec
            gold = sorted(f for f in films_of[(rel, x)] if any(HOLDS[cmp](v, y)
                                                                 for v in years[f]))
            kind = "entities"
        elif op == "superlative":
            rel, x, most = spec
            dated = [f for f in films_of[(rel, x)] if years[f]]
            best = (max if most else min)(year_of(years, f, most) for f in dated)
            gold, kind = sorted(f for f in dated if year_of(years, f, most) == best), "entities"
        elif op == "compare":
            what, a, b, most, yes_no = spec
            if what == "value":
                va, vb = (year_of(years, a, most), year_of(years, b, most))
            else:
                va, vb = len(films_of[(what, a)]), len(films_of[(what, b)])
            first = (va > vb) if most else (va < vb)
            gold = ["yes" if first else "no"] if yes_no else [a if first else b]
            kind = "yes/no" if yes_no else "entities"
        else:
            rel, p, f = spec
            gold, kind = ["yes" if f in films_of[(rel, p)] else "no"], "yes/no"
        rows.append({"op": op, "question": question, "gold": gold, "type": kind,
                     "split": split})
    return rows


WEBQSP_SUBJECTS = {  # written by hand: the evidence KG reverses some records' triples, so
    # which end of a relation is its subject cannot be read from the triples alone
    "people.person.profession": (
        "how many professions does [{x}] have", "is [{y}] a profession of [{x}]",
        ["Mark Twain", "Eminem", "Niall Ferguson", "Stephen Covey", "F. Scott Fitzgerald",
         "Thomas Edison", "Jack London", "Nikolai Gogol"]),
    "music.artist.genre": (
        "how many genres does [{x}] play", "does [{x}] play [{y}]",
        ["Jimi Hendrix", "Van Halen", "Eminem", "Nick Lachey", "Amy Grant", "Craig Jones"]),
    "location.country.languages_spoken": (
        "how many languages are spoken in [{x}]", "is [{y}] spoken in [{x}]",
        ["Egypt", "Pakistan", "Argentina", "France", "Sweden", "Italy", "Indonesia"]),
    "travel.travel_destination.tourist_attractions": (
        "how many tourist attractions does [{x}] have",
        "is [{y}] a tourist attraction in [{x}]",
        ["San Francisco", "Sydney", "Sacramento", "Salt Lake City", "Paris", "Toronto"]),
    "book.author.works_written": (
        "how many books did [{x}] write", "did [{x}] write [{y}]",
        ["Louis Sachar", "Laura Ingalls Wilder", "Nikolai Gogol", "John Irving",
         "Suzanne Collins"]),
    "olympics.olympic_participating_country.olympics_participated_in": (
        "how many olympic games has [{x}] taken part in", "did [{x}] take part in the [{y}]",
        ["Argentina", "Greece", "Denmark", "Bulgaria", "China", "Germany"]),
}


WEBQSP_FRESH = {  # the subjects of the right type among those with >= 2 named values over
    # the relation (as heads of its triples), written by hand; up to 6 drawn per relation.
    # Only relations between different kinds of things: the evidence KG holds some triples
    # reversed ("Prince Arthur" children "Albert, Prince Consort"; "Argentina" contains
    # "Americas"), so a child / parent, an influence or a containment cannot be asked
    "location.country.form_of_government": (
        "how many forms of government does [{x}] have",
        "is [{y}] a form of government of [{x}]",
        ["Greenland", "Iraq", "Japan", "Libya", "Malaysia"]),
    "military.military_person.participated_in_conflicts": (
        "how many wars did [{x}] fight in", "did [{x}] fight in the [{y}]",
        ["Adolph von Steinwehr", "Alfred Iverson, Jr.", "Alpheus S. Williams",
         "Charles Griffin", "Daniel Butterfield", "Dwight D. Eisenhower",
         "Edward Lloyd Thomas", "Edward Porter Alexander", "George Sykes", "Goode Bryan",
         "Harry T. Hays", "James B. McPherson", "John C. Caldwell", "John Newton",
         "Jubal Early", "Ralph Pomeroy Buckland", "Richard S. Ewell", "Stonewall Jackson",
         "William Barksdale"]),
    "sports.sports_team.championships": (
        "how many championships have the [{x}] won", "did the [{x}] win the [{y}]",
        ["Baltimore Ravens", "Boston Bruins", "Los Angeles Dodgers", "New York Knicks"]),
    "music.artist.label": (
        "how many record labels has [{x}] been signed to", "was [{x}] signed to [{y}]",
        ["Joey Jordison", "Pink Floyd", "Slipknot", "Van Halen"]),
    "music.group_member.instruments_played": (
        "how many instruments does [{x}] play", "does [{x}] play the [{y}]",
        ["Joey Jordison", "Johnny Depp", "Louis Armstrong", "Mick Harris"]),
    "travel.travel_destination.tour_operators": (
        "how many tour operators go to [{x}]", "does [{y}] run tours to [{x}]",
        ["Italy", "Japan", "Slovakia"]),
    "people.deceased_person.cause_of_death": (
        "how many causes of death are listed for [{x}]",
        "was [{y}] a cause of death of [{x}]",
        ["Adolf Hitler", "Jacqueline Kennedy Onassis", "Jesse James", "Joan Crawford",
         "Larry Hagman"]),
    "visual_art.visual_artist.associated_periods_or_movements": (
        "how many art movements was [{x}] part of", "was [{x}] part of the [{y}] movement",
        ["Andy Warhol", "Henri Rousseau", "Marc Chagall"]),
    "organization.organization.founders": (
        "how many founders does the [{x}] have", "was [{y}] a founder of the [{x}]",
        ["European Union", "UNESCO", "United Nations", "World Trade Organization"]),
    "geography.river.basin_countries": (
        "how many countries does the [{x}] flow through", "does the [{x}] flow through [{y}]",
        ["Bodva", "Po", "River Severn", "Uruguay River"]),
}
WEBQSP_THIRD = {  # written at stop 59 after the second set's run, and not run then: the
    # held-out set for a change made for the second set's misses (the same rules)
    "military.military_person.participated_in_conflicts": (
        "how many battles did [{x}] take part in", "was [{x}] at the [{y}]",
        ["Adolph von Steinwehr", "Alfred Iverson, Jr.", "Alpheus S. Williams", "George Sykes",
         "Goode Bryan", "James B. McPherson", "John C. Caldwell", "Jubal Early",
         "Ralph Pomeroy Buckland", "Richard S. Ewell", "Stonewall Jackson",
         "William Barksdale", "Edward Lloyd Thomas"]),
    "film.film.genre": (
        "how many genres does the film [{x}] have", "is [{x}] a [{y}] film",
        ["A Caribbean Mystery", "Evil under the Sun", "Murder with Mirrors", "Shubho Mahurat",
         "The Man in the Brown Suit"]),
    "music.composer.compositions": (
        "how many songs did [{x}] compose", "did [{x}] compose [{y}]",
        ["Joey Jordison", "Justin Bieber", "Pink Floyd"]),
    "location.location.nearby_airports": (
        "how many airports are near [{x}]", "is [{y}] an airport near [{x}]",
        ["Daytona Beach", "New York City", "Rome"]),
    "meteorology.cyclone_affected_area.cyclones": (
        "how many cyclones have hit [{x}]", "did [{y}] hit [{x}]", ["China", "Japan"]),
    "biology.breed_origin.breeds_originating_here": (
        "how many breeds come from [{x}]", "does the [{y}] come from [{x}]",
        ["England", "Italy"]),
    "sports.sports_team.colors": (
        "how many colors do the [{x}] have", "is [{y}] a color of the [{x}]",
        ["Dallas Cowboys", "New York Giants"]),
    "book.written_work.subjects": (
        "how many subjects does the book [{x}] cover", "is the book [{x}] about [{y}]",
        ["Forever Liesl: A Memoir of The Sound of Music", "Letters from the field, 1925-1975",
         "Sea of Glory: America's Voyage of Discovery, the U.S. Exploring Expedition, "
         "1838-1842", "The Beckham Experiment",
         "What Death of Osama Bin Laden Indicates About Barack Obama's Leadership"]),
    "people.person.nationality": (
        "how many nationalities does [{x}] have", "was [{x}] a citizen of [{y}]",
        ["James VI and I", "John Lloyd"]),
}
PER_RELATION = 6  # subjects drawn per relation of WEBQSP_FRESH / WEBQSP_THIRD
WEBQSP_COMPARE = {  # written at stop 60 before any run: two subjects of a relation of the
    # held-out sets compared by their counts, a yes/no and a "which" phrasing per relation
    "location.country.form_of_government": (
        "does [{a}] have more forms of government than [{b}]",
        "which country has fewer forms of government, [{a}] or [{b}]"),
    "military.military_person.participated_in_conflicts": (
        "did [{a}] fight in more wars than [{b}]", "who fought in fewer wars, [{a}] or [{b}]"),
    "sports.sports_team.championships": (
        "have the [{a}] won more championships than the [{b}]",
        "which team has won fewer championships, the [{a}] or the [{b}]"),
    "music.artist.label": (
        "has [{a}] been signed to more record labels than [{b}]",
        "who has been on fewer record labels, [{a}] or [{b}]"),
    "music.group_member.instruments_played": (
        "does [{a}] play more instruments than [{b}]",
        "who plays fewer instruments, [{a}] or [{b}]"),
    "travel.travel_destination.tour_operators": (
        "do more tour operators go to [{a}] than to [{b}]",
        "which country do fewer tour operators go to, [{a}] or [{b}]"),
    "people.deceased_person.cause_of_death": (
        "are more causes of death listed for [{a}] than for [{b}]",
        "who has fewer causes of death listed, [{a}] or [{b}]"),
    "visual_art.visual_artist.associated_periods_or_movements": (
        "was [{a}] part of more art movements than [{b}]",
        "who belonged to fewer art movements, [{a}] or [{b}]"),
    "organization.organization.founders": (
        "does the [{a}] have more founders than the [{b}]",
        "which has fewer founders, the [{a}] or the [{b}]"),
    "geography.river.basin_countries": (
        "does the [{a}] flow through more countries than the [{b}]",
        "which river flows through fewer countries, the [{a}] or the [{b}]"),
    "film.film.genre": (
        "does the film [{a}] have more genres than [{b}]",
        "which film has fewer genres, [{a}] or [{b}]"),
    "music.composer.compositions": (
        "did [{a}] compose more songs than [{b}]", "who composed fewer songs, [{a}] or [{b}]"),
    "location.location.nearby_airports": (
        "are there more airports near [{a}] than near [{b}]",
        "which city has fewer airports nearby, [{a}] or [{b}]"),
    "meteorology.cyclone_affected_area.cyclones": (
        "have more cyclones hit [{a}] than [{b}]",
        "which country has been hit by fewer cyclones, [{a}] or [{b}]"),
    "biology.breed_origin.breeds_originating_here": (
        "do more breeds come from [{a}] than from [{b}]",
        "which country do fewer breeds come from, [{a}] or [{b}]"),
    "sports.sports_team.colors": (
        "do the [{a}] have more colors than the [{b}]",
        "which team has fewer colors, the [{a}] or the [{b}]"),
    "book.written_work.subjects": (
        "does the book [{a}] cover more subjects than [{b}]",
        "which book covers fewer subjects, [{a}] or [{b}]"),
    "people.person.nationality": (
        "does [{a}] have more nationalities than [{b}]",
        "who has fewer nationalities, [{a}] or [{b}]"),
}


def relation_ends(records: list[dict]) -> dict[tuple[str, str], set[str]]:
    """(node, relation) -> the nodes it reaches over the relation, either direction (as
    the planner walks), over the records' graphs merged."""
    ends: dict[tuple[str, str], set[str]] = defaultdict(set)
    for h, r, t in {tuple(x) for rec in records for x in rec["graph"]}:
        ends[(h, r)].add(t)
        ends[(t, r)].add(h)
    return ends


def webqsp(records: list[dict], rng: random.Random,
           subjects_of: dict[str, tuple[str, str, list[str]]] = WEBQSP_SUBJECTS
           ) -> list[dict]:
    """A count and a yes/no question for each subject of multi-valued relations (a
    person's professions, a country's languages, ...); gold: the KG's nodes over the
    relation from the subject (either direction, as the planner walks), a "no" drawn from
    the other subjects' values."""
    ends = relation_ends(records)
    rows: list[dict] = []
    for rel, (count, exists, subjects) in subjects_of.items():
        values = sorted({y for x in subjects for y in ends[(x, rel)] if not y.startswith("m.")})
        for x in subjects:
            mine = {y for y in ends[(x, rel)] if not y.startswith("m.")}
            if len(mine) < 2:
                continue
            rows.append({"op": "count", "question": count.format(x=x),
                         "gold": [str(len(ends[(x, rel)] - {x}))], "type": "number"})
            others = sorted(set(values) - mine - {x})
            if rng.random() < 0.5 or not others:
                y, yes = rng.choice(sorted(mine)), "yes"
            else:
                y, yes = rng.choice(others), "no"
            rows.append({"op": "exists", "question": exists.format(x=x, y=y), "gold": [yes],
                         "type": "yes/no"})
    return rows


def webqsp_compare(records: list[dict], rng: random.Random) -> list[dict]:
    """Two subjects of each WEBQSP_COMPARE relation (its candidates in WEBQSP_FRESH /
    WEBQSP_THIRD) with different counts over it (the count questions' gold), asked once in
    each phrasing (a relation whose subjects all have one count is not asked); gold: yes /
    no, or the subject with more (fewer)."""
    ends = relation_ends(records)
    subjects = {rel: sorted(set(xs)) for rel, (_, _, xs) in
                [*WEBQSP_FRESH.items(), *WEBQSP_THIRD.items()]}
    rows: list[dict] = []
    for rel, templates in WEBQSP_COMPARE.items():
        n = {x: len(ends[(x, rel)] - {x}) for x in subjects[rel]}
        pairs = [(a, b) for a in sorted(n) for b in sorted(n) if a < b and n[a] != n[b]]
        for template in templates if pairs else ():  # (all of one count: none to ask)
            a, b = rng.choice(pairs)
            if rng.random() < 0.5:
                a, b = b, a
            more = " more " in template
            if template.split()[0] in ("which", "who"):
                rows.append({"op": "compare", "question": template.format(a=a, b=b),
                             "gold": [a if (n[a] > n[b]) == more else b], "type": "entities"})
            else:
                rows.append({"op": "compare", "question": template.format(a=a, b=b),
                             "gold": ["yes" if (n[a] > n[b]) == more else "no"],
                             "type": "yes/no"})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--webqsp", action="store_true", help="the WebQSP evidence KG's set")
    ap.add_argument("--webqsp-fresh", action="store_true",
                    help="the WebQSP evidence KG's second set (other relations), held out")
    ap.add_argument("--webqsp-third", action="store_true",
                    help="the WebQSP evidence KG's third set (other relations), held out")
    ap.add_argument("--webqsp-compare", action="store_true",
                    help="the WebQSP evidence KG's comparisons by count, held out")
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--free", action="store_true",
                    help="the hand-written questions in an analyst's words (FREE_FILE)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    if args.free:
        rows = free_gold(read_kb(DATA / "metaqa" / "kb.txt"))
        out = OUT / "operator_questions_free.tsv"
    elif args.webqsp or args.webqsp_fresh or args.webqsp_third or args.webqsp_compare:
        with open(DATA / "webqsp-evidence" / "dev.jsonl", encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        if args.webqsp_compare:
            rows, split = webqsp_compare(records, rng), "held-out"
            out = OUT / "operator_questions_webqsp_compare.tsv"
        elif args.webqsp:
            rows, split = webqsp(records, rng), "dev"
            out = OUT / "operator_questions_webqsp.tsv"
        else:
            chosen = WEBQSP_FRESH if args.webqsp_fresh else WEBQSP_THIRD
            drawn = {rel: (c, e, sorted(rng.sample(xs, min(PER_RELATION, len(xs)))))
                     for rel, (c, e, xs) in chosen.items()}
            rows, split = webqsp(records, rng, drawn), "held-out"
            out = OUT / ("operator_questions_webqsp_fresh.tsv" if args.webqsp_fresh
                         else "operator_questions_webqsp_third.tsv")
        for r in rows:
            r["split"] = split
    else:
        rows = metaqa(read_kb(DATA / "metaqa" / "kb.txt"), rng)
        out = OUT / "operator_questions.tsv"
        for r in rows:
            r["split"] = split_of(r["question"])
    with open(out, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["id", "split", "op", "type", "question", "gold"])
        for i, r in enumerate(rows):
            w.writerow([f"op-{i:03d}", r["split"], r["op"], r["type"], r["question"],
                        "|".join(r["gold"])])
    by = defaultdict(lambda: defaultdict(int))
    for r in rows:
        by[r["op"]][r["split"]] += 1
    print(out, {k: dict(v) for k, v in by.items()})


if __name__ == "__main__":
    main()
