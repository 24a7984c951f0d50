from __future__ import annotations

import numpy as np
import pytest
from retrieval_helpers import BowEmbedder

from talent_core.retrieval.relations import (
    RelationScorer,
    encode_question,
    strip_mentions,
    verbalise_relation,
)
from talent_core.retrieval.seeds import (
    add_vector_seeds,
    name_matches,
    question_spans,
    text_seeds,
)


def test_question_spans_clean_punctuation_and_possessives():
    spans = {s for _, _, s in question_spans("who directed Kennedy's speech?", max_n=2)}
    assert "speech" in spans and "speech?" in spans
    assert "Kennedy" in spans  # possessive removed
    assert "who" not in spans and "of" not in spans  # one-word stopwords are not looked up


def test_name_matches_longest_span_wins(mem_store):
    # "The Matrix" is an entity, "Matrix" alone is not; "Keanu Reeves" names two entities
    # (the actor and MetaQA's lowercase tag "keanu reeves"): both match
    found = name_matches("did Keanu Reeves star in The Matrix", mem_store)
    assert sorted(e.id for e in found) == ["Keanu Reeves", "The Matrix", "keanu reeves"]
    assert name_matches("nothing here at all", mem_store) == []


def test_topic_seeds_anchor_and_sources_merge(mem_store, bow):
    seeds = text_seeds("who directed Gravity", mem_store, ["Gravity"])
    (s,) = seeds.seeds
    assert s.id == "Gravity" and s.sources == ["topic", "name"]
    assert [a.id for a in seeds.anchors()] == ["Gravity"]
    # vector seeds are recorded but do not anchor when a topic did
    add_vector_seeds(seeds, mem_store, bow.encode_one("who directed Gravity"), k_seed=3)
    assert [a.id for a in seeds.anchors()] == ["Gravity"]
    assert any("vector" in x.sources for x in seeds.seeds)


def test_multi_word_name_matches_anchor_before_one_word_ones(mem_store):
    # "Speed" (one word) and "Keanu Reeves" (two words) are both entities: a one-word
    # match written in lower case is taken for a common word, not an anchor
    seeds = text_seeds("did Keanu Reeves star in speed", mem_store)
    assert {s.id for s in seeds.seeds} >= {"Keanu Reeves", "Speed"}
    assert "Speed" not in [a.id for a in seeds.anchors()]
    assert "Keanu Reeves" in [a.id for a in seeds.anchors()]
    # ... written capitalised after the first word, it is a name: both anchor (a yes/no
    # question about the two)
    seeds = text_seeds("did Keanu Reeves star in Speed", mem_store)
    assert {"Keanu Reeves", "Speed"} <= {a.id for a in seeds.anchors()}
    seeds = text_seeds("Speed starred Keanu Reeves", mem_store)  # the first word: no sign
    assert "Speed" not in [a.id for a in seeds.anchors()]
    seeds = text_seeds("who directed Speed", mem_store)
    assert [a.id for a in seeds.anchors()] == ["Speed"]


def test_anchor_fallbacks(mem_store, bow):
    # an unknown topic and no name in the text: fulltext hits anchor
    seeds = text_seeds("gravity movie", mem_store, ["No Such Film"], name_match=False)
    assert seeds.anchors() and all("fulltext" in a.sources for a in seeds.anchors())
    # nothing textual at all: the top vector seed anchors
    seeds = text_seeds("zzz qqq", mem_store, None, fulltext_k=0)
    assert seeds.anchors() == []
    add_vector_seeds(seeds, mem_store, bow.encode_one("Gravity"), k_seed=2, vector_anchors=1)
    assert [a.id for a in seeds.anchors()] == ["Gravity"]
    assert seeds.anchors()[0].sources == ["vector"]


def test_verbalise_and_strip():
    assert verbalise_relation("written_by") == "written by"
    assert verbalise_relation("people.person.place_of_birth") == "people person place of birth"
    assert verbalise_relation("hasGenre") == "has genre"
    assert strip_mentions("who directed [The Matrix]?", ["the matrix"]) == "who directed [ ]?"
    assert strip_mentions("The Matrix", ["The Matrix"]) == "The Matrix"  # never empty


def test_relation_scorer_caches_and_scores():
    emb = BowEmbedder()
    scorer = RelationScorer(emb)
    enc = encode_question(emb, "who directed Gravity", "who directed")
    s = scorer.scores(enc, ["directed_by", "starred_actors", "directed_by"])
    assert set(s) == {"directed_by", "starred_actors"}
    assert s["directed_by"] > s["starred_actors"]
    n_calls = len(emb.calls)
    scorer2 = RelationScorer(emb)  # same model name -> same cache, no re-embedding
    scorer2.scores(enc, ["directed_by"])
    assert len(emb.calls) == n_calls
    assert scorer.scores(enc, []) == {}


def test_encode_question_without_token_model_falls_back_to_sentence():
    emb = BowEmbedder()
    enc = encode_question(emb, "who directed Gravity", "who directed")
    assert enc.tokens.shape == (1, emb.dimension)
    assert np.linalg.norm(enc.vector) == pytest.approx(1.0, abs=1e-5)
    assert enc.vector @ emb.encode_one("who directed Gravity") == pytest.approx(1.0, abs=1e-5)
