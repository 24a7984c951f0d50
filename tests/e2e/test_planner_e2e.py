"""The relation-path planner as a user trains and uses it: `talent train planner` on the toy
MetaQA questions, then `talent ask --planner DIR` (a random tiny LM, so the plan decides)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from talent_core.commands import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metaqa"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_train_planner_then_ask_with_and_without_it(use_toy, tmp_path):
    from tiny_llm import tiny_llama

    out_dir = tmp_path / "planner"
    # "when was [Gravity] released" is not a training question; two of its template are
    r = run("train", "planner", str(FIXTURES / "qa_1hop.txt"), str(FIXTURES / "qa_2hop.txt"),
            str(FIXTURES / "qa_3hop.txt"), "-o", str(out_dir), "--format", "metaqa")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["paths"] >= 10 and summary["training"]["questions"] == 50
    assert summary["training"]["type_acc"] > 0.9  # it fits its training questions
    meta = json.loads((out_dir / "planner.json").read_text())
    assert ["release_year"] in meta["paths"] and meta["embedding_model"] == "minilm"

    model = str(tiny_llama(tmp_path / "tiny"))
    ask = ("ask", "when was [Gravity] released", "--base-model", model, "--decode", "ranked",
           "--no-retriever", "--json")
    r = run(*ask, "--planner", str(out_dir))
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["plan"][0]["rels"] == ["release_year"] and got["plan"][0]["ends"] == 1
    # the untrained LM's scores are noise: the one node on the planned path wins
    assert got["answer"][0] == "2013"
    top = got["ranked"][0]
    assert top["prior"] > 0.5 and top["lm_score"] is not None
    assert all(r["prior"] is not None for r in got["ranked"])
    t = got["timings_ms"]  # the stages do not overlap: the planner is not generator time
    assert t["planner"] > 0 and t["generator"] > 0
    assert t["planner"] + t["generator"] + t.get("retrieve_total", 0) <= t["total"] + 1e-6

    # full mode: the retriever's V-hat may leave 2013 out; the planned path's end joins the
    # candidate answers all the same
    r = run(*[a for a in ask if a != "--no-retriever"], "--planner", str(out_dir))
    assert r.exit_code == 0, r.output
    full = json.loads(r.stdout)
    assert full["selected"] is not None and full["answer"][0] == "2013"

    r = run(*ask, "--planner", "none")
    assert r.exit_code == 0, r.output
    off = json.loads(r.stdout)
    assert off["plan"] == [] and all(r["prior"] is None for r in off["ranked"])

    r = run(*ask, "--planner", str(tmp_path / "nope"))
    assert r.exit_code == 2 and "planner directory not found" in r.output
    (tmp_path / "empty").mkdir()
    r = run(*ask, "--planner", str(tmp_path / "empty"))
    assert r.exit_code == 2 and "not a planner directory" in r.output


def test_train_planner_refuses_overlapping_validation(use_toy, tmp_path):
    q = str(FIXTURES / "qa_1hop.txt")
    r = run("train", "planner", q, "--val", q, "-o", str(tmp_path / "p"))
    assert r.exit_code == 2 and "also occur in the training files" in r.output
    assert not (tmp_path / "p").exists()


def test_zero_shot_planner_plans_from_the_anchors_own_relations(use_toy, tmp_path):
    """No trained planner needed: the topic entity's relation paths ranked by their words'
    similarity to the question; `ask --json` and the text output say which planner."""
    from tiny_llm import tiny_llama

    model = str(tiny_llama(tmp_path / "tiny"))
    ask = ("ask", "what release year does [Gravity] have", "--base-model", model,
           "--decode", "ranked", "--no-retriever", "--planner", "zero-shot")
    r = run(*ask, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["planner"] == "zero-shot"
    assert got["plan"][0]["rels"] == ["release_year"] and got["answer"][0] == "2013"
    assert "2013" in {n["name"] for n in got["candidate"]}  # the planned end joined S
    r = run(*ask)
    assert r.exit_code == 0 and "planned relation paths (zero-shot planner)" in r.output
    r = run(*ask, "--json", "--plan-join", "0", "--planner", "none")
    assert r.exit_code == 0 and json.loads(r.stdout)["planner"] is None
