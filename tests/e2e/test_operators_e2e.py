"""Operators as a user meets them: `talent ask` on the embedded store with the toy KG, the
bundled planner and a random tiny LM (the operator, not the LM, decides): a count, a
filter, a superlative, a comparison and a yes/no, typed answers in --json with the store
query (FalkorDB's Cypher) and its parameters; the printed lines. Gold from the toy KB."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from talent_core.commands import app

KB = Path(__file__).resolve().parents[1] / "fixtures" / "metaqa" / "kb.txt"
runner = CliRunner()


def toy_kb() -> tuple[dict[str, set[str]], dict[str, int]]:
    films: dict[str, set[str]] = defaultdict(set)
    year: dict[str, int] = {}
    for line in KB.read_text(encoding="utf-8").splitlines():
        h, r, t = line.split("|")
        if r == "directed_by":
            films[t].add(h)
        elif r == "release_year":
            year[h] = int(t)
    return films, year


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_llm import tiny_llama

    return str(tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny"))


def ask(tiny: str, question: str, *extra: str):
    r = runner.invoke(app, ["ask", question, "--base-model", tiny, "--decode", "ranked",
                            *extra])
    assert r.exit_code == 0, r.output
    return r


def test_count_filter_and_superlative_over_the_planned_set(use_toy, tiny):
    films, year = toy_kb()
    out = json.loads(ask(tiny, "how many movies did [Kathryn Bigelow] direct", "--json").stdout)
    op = out["operation"]
    assert out["answer"] == [str(len(films["Kathryn Bigelow"]))]
    assert (op["op"], op["answer_type"], op["path"]) == ("count", "number", "directed_by")
    assert sorted(op["listed"]) == sorted(films["Kathryn Bigelow"])
    q = op["queries"][0]
    assert q["name"] == "count_follow" and "count(m)" in q["cypher"]
    assert q["params"] == {"ids": ["Kathryn Bigelow"], "rel": "directed_by",
                           "exclude": ["Kathryn Bigelow"]}

    out = json.loads(ask(tiny, "which films directed by [Kathryn Bigelow] were released "
                               "after 2000", "--json").stdout)
    kept = {f for f in films["Kathryn Bigelow"] if year[f] > 2000}
    assert set(out["answer"]) == kept and out["operation"]["relation"] == "release_year"
    assert out["operation"]["values"] == {f: str(year[f]) for f in kept}

    out = json.loads(ask(tiny, "what is the earliest movie directed by [Kathryn Bigelow]",
                         "--json").stdout)
    assert out["answer"] == [min(films["Kathryn Bigelow"], key=year.get)]

    printed = ask(tiny, "how many movies did [Kathryn Bigelow] direct").stdout
    assert f"count: {len(films['Kathryn Bigelow'])} movies" in printed
    assert "store query count_follow" in printed


def test_comparison_and_yes_no_need_no_language_model(use_toy, tiny):
    _, year = toy_kb()
    out = json.loads(ask(tiny, "which was released first, [Memento] or [Inception]",
                         "--json").stdout)
    assert out["answer"] == [min(("Memento", "Inception"), key=year.get)]
    assert out["operation"]["answer_type"] == "entities"
    assert "generator" not in out["timings_ms"]  # the store answered
    out = json.loads(ask(tiny, "did [Christopher Nolan] direct [Memento]", "--json").stdout)
    assert out["answer"] == ["yes"] and out["operation"]["path"] == "directed_by"
    out = json.loads(ask(tiny, "did [Kathryn Bigelow] direct [Memento]", "--json").stdout)
    assert out["answer"] == ["no"]
