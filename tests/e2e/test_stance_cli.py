"""`talent ask --stance` and `talent eval --format explagraphs` (no --report) as a user runs
them, on the toy KG with the tiny model (the frozen base model answers, and says so)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from talent_core.commands import app

runner = CliRunner()
GRAPH = "(gravity; directed by; alfonso cuaron)(alfonso cuaron; capable of; directing)"
TSV = ("arg1\targ2\tlabel\tgraph\n"
       "Cannabis should be legal.\tMarijuana is harmless.\tsupport\t"
       "(cannabis; synonym of; marijuana)(marijuana; is a; harmless)\n"
       "Women should not be in combat.\tWomen and men have the same rights.\tcounter\t"
       "(women and men; is a; citizens)(citizens; causes; have same rights)\n"
       "Guns should be banned.\tGuns protect people.\tcounter\t(guns; used for; protection)\n")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_llm import tiny_llama

    return str(tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny"))


def run(*args: str):
    return runner.invoke(app, list(args))


def test_ask_stance_with_a_graph_json(use_toy, tiny):
    r = run("ask", "--stance", "Gravity is a good film.", "Cuaron directed it well.",
            "--graph", GRAPH, "--base-model", tiny, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["label"] in ("support", "counter") and out["graph_source"] == "given"
    assert {s["label"] for s in out["scores"]} == {"support", "counter"}
    assert out["graph_nodes"] == 3 and "answer" not in out
    assert out["frozen"] and any("frozen base model" in n for n in out["notes"])


def test_ask_stance_text_without_a_graph_uses_the_kg(use_toy, tiny):
    r = run("ask", "--stance", "Gravity was directed by Alfonso Cuarón.",
            "Alfonso Cuarón made Gravity.", "--base-model", tiny)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("note: no graph given: the candidate")
    assert "retrieved from the KG" in r.stdout and "stance: " in r.stdout
    assert "frozen: " in r.stdout


def test_ask_stance_bad_input(use_toy, tiny):
    r = run("ask", "--stance", "a", "b", "--graph", "(a; b)", "--base-model", tiny)
    assert r.exit_code == 2, r.output
    assert "graph: not an explanation graph: triple 1 '(a; b)' has 2 parts" in r.stderr
    r = run("ask", "who directed Gravity", "--stance", "a", "b")
    assert r.exit_code != 0 and "either a QUESTION or --stance" in r.output
    r = run("ask", "who directed Gravity", "--graph", "(a; r; b)")
    assert r.exit_code != 0 and "--graph needs --stance" in r.output
    r = run("ask")
    assert r.exit_code != 0 and "give a QUESTION" in r.output


def test_eval_explagraphs_without_report(use_toy, tiny, tmp_path):
    path = tmp_path / "eg.tsv"
    path.write_text(TSV)
    rows = tmp_path / "rows.jsonl"
    r = run("eval", str(path), "--format", "explagraphs", "--base-model", tiny, "--limit", "2",
            "--offset", "1", "--rows", str(rows))
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["n"] == 2 and s["mode"] == "no-retriever"  # the stance task's default mode
    assert s["majority_baseline"] == {"label": "counter", "accuracy": 1.0}
    assert s["per_class"]["support"] == {"n": 0, "accuracy": None}
    assert set(s) >= {"accuracy", "balanced_accuracy", "predicted", "latency_ms", "frozen"}
    got = [json.loads(ln) for ln in rows.read_text().splitlines()]
    assert [g["gold"] for g in got] == ["counter", "counter"]
    assert "frozen base model" in r.stderr
    r = run("eval", str(path), "--format", "explagraphs", "--base-model", tiny, "--limit", "1",
            "--mode", "full")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["mode"] == "full"
    # the file name says the format; there is nothing to retrieve
    r = run("eval", str(path), "--mode", "retrieval", "--base-model", tiny)
    assert r.exit_code != 0 and "must be full or no-retriever" in r.output
    path.write_text(TSV + "a\tb\tmaybe\t(x; y; z)\n")
    r = run("eval", str(path), "--format", "explagraphs", "--base-model", tiny)
    assert r.exit_code != 0 and "eg.tsv:5: label 'maybe'" in r.output


def test_eval_explagraphs_report_has_the_stance_metrics(tiny, tmp_path, caplog):
    path = tmp_path / "eg.tsv"
    path.write_text(TSV)
    out = tmp_path / "rep"
    r = run("eval", str(path), "--format", "explagraphs", "--report", str(out),
            "--base-model", tiny, "--methods", "llm-ranked")
    assert r.exit_code == 0, r.output
    report = json.loads((out / "report.json").read_text())
    (g,) = report["results"]
    assert g["stance"]["n"] == 3 and g["stance"]["accuracy"] == round(g["qa"]["hit@1"], 4)
    assert g["stance"]["majority_baseline"] == {"label": "counter", "accuracy": 0.6667}
    assert report["config"]["generator_dir"] is None  # the frozen model answered, not MetaQA's
    assert "no label-task adapters: the frozen base model answers" in caplog.text
    md = (out / "report.md").read_text()
    assert "| balanced | support | counter | majority baseline |" in md
    assert "66.7 (counter)" in md
