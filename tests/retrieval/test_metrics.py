from __future__ import annotations

import pytest

from talent_core.evaluation.metrics import (
    answer_key,
    hit_at_1,
    macro_average,
    name_set,
    retrieval_scores,
)


def test_normalise_name():
    assert answer_key("  The   Matrix\t") == "the matrix"
    assert answer_key("ＡＢＣ") == "abc"  # NFKC folds full-width letters
    assert answer_key("Matrix") != answer_key("The Matrix")
    assert answer_key("Björk") == "björk"  # accents are kept
    assert name_set(["A", " a ", "", "  ", "B"]) == {"a", "b"}


def test_scores_one_question():
    s = retrieval_scores(["Tom Hanks", "tom  hanks", "Meg Ryan", "Paris"], ["TOM HANKS", "Rita"])
    # predicted {tom hanks, meg ryan, paris}; gold {tom hanks, rita}
    assert s.hit == 1.0
    assert s.size == 3.0
    assert s.recall == pytest.approx(1 / 2)
    assert s.precision == pytest.approx(1 / 3)
    assert s.f1 == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))


def test_scores_misses_and_empties():
    miss = retrieval_scores(["a", "b"], ["c"])
    assert (miss.hit, miss.recall, miss.precision, miss.f1, miss.size) == (0, 0, 0, 0, 2)
    empty_pred = retrieval_scores([], ["c"])
    assert (empty_pred.hit, empty_pred.precision, empty_pred.size) == (0, 0, 0)
    empty_gold = retrieval_scores(["a"], [])
    assert (empty_gold.hit, empty_gold.recall) == (0, 0)


def test_macro_average():
    rows = [retrieval_scores(["a"], ["a"]), retrieval_scores(["a", "b", "c"], ["z"])]
    m = macro_average(rows)
    assert m["n"] == 2
    assert m["hit"] == pytest.approx(0.5)
    assert m["precision"] == pytest.approx(0.5)
    assert m["size"] == pytest.approx(2.0)
    assert macro_average([])["hit"] == 0.0


def test_hit_at_1():
    assert hit_at_1(["Paris", "London"], ["paris"]) == 1.0
    assert hit_at_1(["London", "Paris"], ["paris"]) == 0.0
    assert hit_at_1(["", "  Paris "], ["PARIS"]) == 1.0  # empty answers are skipped
    assert hit_at_1([], ["paris"]) == 0.0
