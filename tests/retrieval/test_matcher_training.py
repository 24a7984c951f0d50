"""Training the question <-> path matcher (talent_core.training.matcher, issue 45): pairs
from label records, MetaQA question types and a store's own paths (--self), hard
negatives, and a LoRA fit that the query path (numpy, no torch) reads back."""

from __future__ import annotations

import random

import numpy as np
import pytest
from retrieval_helpers import BowEmbedder, kb, memory_store

from talent_core.errors import DataError
from talent_core.planning.matcher import Pair, load_matcher, path_words
from talent_core.planning.self_train import (
    agent_noun,
    store_pairs,
    walk_directions,
    write_question,
)
from talent_core.training.contrast import negative as _negative
from talent_core.training.contrast import reorderings
from talent_core.training.matcher import (
    FitSettings,
    fit_matcher,
    metaqa_pairs,
    metaqa_type_path,
    mine_negatives,
    read_pairs,
    webqsp_pairs,
)
from talent_core.training.path_labels import PathLabelRecord


def test_metaqa_question_types_name_their_paths():
    assert metaqa_type_path("movie_to_director") == ("directed_by",)
    assert metaqa_type_path("actor_to_movie_to_director") == ("starred_actors", "directed_by")
    assert metaqa_type_path("movie_to_writer_to_movie_to_year") == (
        "written_by", "written_by", "release_year")
    assert metaqa_type_path("tag_to_movie") == ("has_tags",)
    with pytest.raises(ValueError):
        metaqa_type_path("movie_to_spaceship")


def test_metaqa_pairs_strip_the_topic_and_contrast_the_same_start(tmp_path):
    f = tmp_path / "q.txt"
    f.write_text("who directed [Heat]\tMichael Mann\n"
                 "what films did [Tom Hanks] act in\tBig\n", encoding="utf-8")
    types = {"who directed [Heat]\tMichael Mann": "movie_to_director",
             "what films did [Tom Hanks] act in\tBig": "actor_to_movie",
             "x\ty": "movie_to_writer", "z\tw": "actor_to_movie_to_director"}
    pairs = metaqa_pairs([f], types)
    assert pairs[0].text == "who directed" and pairs[0].gold == [("directed_by",)]
    assert ("written_by",) in pairs[0].negatives and ("directed_by",) not in pairs[0].negatives
    assert pairs[1].negatives == [("starred_actors", "directed_by")]  # an actor's other path
    bad = tmp_path / "bad.txt"
    bad.write_text("who wrote [Heat]\tX\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.txt:1: not a line"):
        metaqa_pairs([bad], types)
    with pytest.raises(DataError, match="--metaqa-types"):
        read_pairs([f], None, [])


def record(**kw) -> PathLabelRecord:
    base = {"id": "q1", "question": "where was Justin Bieber born", "q_entity": ["Justin Bieber"],
            "inferential_chain": ["people.person.place_of_birth"],
            "ground_paths": [["people.person.place_of_birth"], ["people.person.gender"]]}
    return PathLabelRecord.model_validate({**base, **kw})


def test_webqsp_pairs_take_the_chain_agreeing_paths_and_never_a_gold_negative():
    (pair,) = webqsp_pairs([record()])
    assert pair.text == "where was born"
    assert pair.gold == [("people.person.place_of_birth",)]
    assert pair.negatives == [("people.person.gender",)]
    assert webqsp_pairs([record(ground_paths=[], inferential_chain=[])]) == []
    rng = random.Random(0)
    pool = {"people": [("people.person.place_of_birth",), ("people.person.spouse_s",)]}
    drawn = {_negative(pair, rng, pool) for _ in range(300)}
    assert ("people.person.place_of_birth",) not in drawn
    assert ("people.person.gender",) in drawn  # the record's own other path
    assert any(len(t) == 2 and t[0] == "people.person.place_of_birth" for t in drawn)  # longer


KG = kb("""
Heat|directed_by|Michael Mann
Heat|starred_actors|Al Pacino
Insider|starred_actors|Al Pacino
Insider|directed_by|Michael Mann
Ali|directed_by|Michael Mann
""")


def test_self_training_writes_questions_from_the_stores_paths():
    s = memory_store(KG, BowEmbedder())
    q = write_question(("starred_actors", "directed_by"), "Heat", random.Random(1))
    assert "Heat" in q and "starred actors" in q and "directed by" in q
    pairs = store_pairs(s, anchors=10, seed=0)
    assert pairs and all(p.source == "self" for p in pairs)
    for p in pairs:
        assert p.gold[0] not in p.negatives
        assert not any(name in p.text for name in ("Heat", "Insider", "Michael Mann"))
    assert {len(p.gold[0]) for p in pairs} >= {1, 2}


def test_a_self_question_names_every_relation_and_reads_a_repeat_as_sharing_or_two_steps():
    readings = set()
    for seed in range(40):
        rng = random.Random(seed)
        q = write_question(("has_genre",), "Heat", rng)
        assert "genre" in q and "has genre" not in q  # the auxiliary dropped
        q = write_question(("directed_by", "directed_by", "in_language"), "Heat", rng)
        assert "Heat" in q and "directed" in q and "language" in q
        if not q.startswith("Heat "):  # the keyword form lists each relation
            shared = any(w in q for w in ("share", "same", "also", "other"))
            assert shared or q.count("directed") == 2  # "directed by the ones that directed"
            readings.add(shared)
    assert readings == {True, False}


def test_a_self_question_reads_each_relation_the_way_its_triple_goes():
    s = memory_store(KG, BowEmbedder())
    rng = random.Random(0)
    assert walk_directions(s, "Heat", ("directed_by",), rng) == (True,)
    assert walk_directions(s, "Michael Mann", ("directed_by",), rng) == (False,)
    # out to the director and back to his other films, never back to Heat itself
    assert walk_directions(s, "Heat", ("directed_by", "directed_by"), rng) == (True, False)
    assert walk_directions(s, "Ali", ("starred_actors",), rng) is None  # Ali has no actor
    words = frozenset({"director"})
    along = {write_question(("directed_by",), "Heat", random.Random(k), words, (True,))
             for k in range(80)}
    against = {write_question(("directed_by",), "Mann", random.Random(k), words, (False,))
               for k in range(80)}
    assert any("the director of Heat" in q for q in along)
    assert not any("directed by Heat" in q or "director is Heat" in q for q in along)
    assert any("directed by Mann" in q for q in against)
    assert not any("director of Mann" in q or "that directed Mann" in q for q in against)
    # a repeat out and back reads as sharing from the side it starts on
    out_back = {write_question(("directed_by", "directed_by"), "Heat", random.Random(k), words,
                               (True, False)) for k in range(200)}
    assert any("same director as Heat" in q for q in out_back)
    assert not any("co-directors" in q for q in out_back)
    back_out = {write_question(("directed_by", "directed_by"), "Mann", random.Random(k), words,
                               (False, True)) for k in range(200)}
    assert any("co-directors of Mann" in q for q in back_out)
    assert not any("same director as Mann" in q for q in back_out)
    # the same direction twice is a chain, never read as sharing
    chain = {write_question(("parent", "parent"), "Ann", random.Random(k), words, (True, True))
             for k in range(100)}
    assert not any(w in q for q in chain for w in ("share", "same", "other", "also"))


def test_an_agent_noun_is_written_only_where_the_encoders_vocabulary_holds_it():
    words = frozenset({"director", "writer", "producer", "starr", "star", "actor"})
    assert agent_noun("directed", words) == "director"  # "directer" is no word of it
    assert agent_noun("written", words) == "writer"
    assert agent_noun("produced", words) == "producer"
    assert agent_noun("starred", words) is None  # not "starr", a name
    assert agent_noun("edited", words) is None  # "editor" is not in this vocabulary
    assert agent_noun("acted", words) == "actor"
    forms = {write_question(("directed_by",), "Heat", random.Random(k), words)
             for k in range(60)}
    assert any("director" in q for q in forms) and any("directed by" in q for q in forms)
    assert not any("director" in q for k in range(60)
                   for q in [write_question(("directed_by",), "Heat", random.Random(k))])
    shared = {write_question(("directed_by", "directed_by"), "Heat", random.Random(k), words)
              for k in range(200)}
    assert any("co-directors" in q or "same director" in q for q in shared)


def test_mined_negatives_are_the_encoders_nearest_paths_that_are_not_gold():
    vecs = {"who directed": [1.0, 0.0], path_words(("directed_by",)): [1.0, 0.0],
            path_words(("written_by",)): [0.9, 0.1], path_words(("has_genre",)): [0.0, 1.0],
            path_words(("starred_actors",)): [0.5, 0.5]}

    def encode(texts):
        v = np.array([vecs[t] for t in texts])
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    pair = Pair("who directed", [("directed_by",)], [], "metaqa")
    vocab = [("directed_by",), ("has_genre",), ("starred_actors",), ("written_by",)]
    assert mine_negatives(encode, [pair], vocab, 2) == [[("written_by",), ("starred_actors",)]]


def test_self_pairs_are_contrasted_with_their_own_relations_reordered():
    assert reorderings(("a", "a", "b")) == [("a", "a"), ("a", "b"), ("a", "b", "a"),
                                            ("b", "a", "a")]
    assert reorderings(("a",)) == []
    pair = Pair("genres of the films that share the director", [("d", "d", "g")],
                [("s",)], "self")
    rng = random.Random(0)
    drawn = {_negative(pair, rng, {"": [("d", "d", "g"), ("s",)]}) for _ in range(300)}
    assert {("g", "d", "d"), ("d", "g", "d"), ("d", "d")} <= drawn
    assert ("d", "d", "g") not in drawn and () not in drawn


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_lora_fit_is_read_back_by_the_numpy_query_path(tmp_path):
    pairs = [Pair("who directed", [("directed_by",)], [("starred_actors",)], "metaqa"),
             Pair("who starred in", [("starred_actors",)], [("directed_by",)], "metaqa")]
    settings = FitSettings(epochs=1, batch=2, rank=2, alpha=4.0, lr=1e-2)
    meta = fit_matcher(pairs, tmp_path / "m", name="toy", base_model="minilm",
                       settings=settings, val=pairs)
    assert meta["lora_rank"] == 2 and meta["training"]["steps"] == 1
    assert meta["validation"]["questions"] == 2
    trained = load_matcher(str(tmp_path / "m"), "minilm", None)
    assert trained.kind == "matcher (toy)"
    from talent_core.embedding_numpy import NumpyBertEmbedder

    base = NumpyBertEmbedder("minilm")
    text = path_words(("directed_by",))
    moved = float(np.abs(trained.embedder.encode([text]) - base.encode([text])).max())
    assert moved > 1e-4  # the delta is applied
    again = fit_matcher(pairs, tmp_path / "m2", name="toy2", base_model="minilm",
                        settings=FitSettings(epochs=1, batch=2, lr=0.0, mine=1, mine_from=0),
                        init=tmp_path / "m")  # its own negatives mined, too
    assert again["trained_on"]["started_from"] == str(tmp_path / "m")
    start = load_matcher(str(tmp_path / "m2"), "minilm", None)
    np.testing.assert_allclose(start.embedder.encode([text]), trained.embedder.encode([text]),
                               atol=1e-5)  # lr 0: the factors it started from, unchanged
