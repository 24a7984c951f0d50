"""The CLI as a user runs it, on the embedded store with the toy KG and real MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from talent_core.commands import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
runner = CliRunner()


def run(*args: str):
    result = runner.invoke(app, list(args))
    return result


def test_stats_json(use_toy):
    r = run("stats", "--json")
    assert r.exit_code == 0, r.output
    stats = json.loads(r.stdout)
    kb = [ln.split("|") for ln in (FIXTURES / "metaqa" / "kb.txt").read_text().splitlines()
          if ln.strip()]
    assert stats["triples"] == len({tuple(t) for t in kb})
    assert stats["relations"] == len({t[1] for t in kb})
    assert stats["entities"] == len({t[0] for t in kb} | {t[2] for t in kb})


def test_retrieve_json_contains_answer(use_toy):
    r = run("retrieve", "who directed Gravity", "--topic", "Gravity", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) >= {"seeds", "nodes", "edges", "truncated", "timings_ms"}
    assert set(out["timings_ms"]) >= {"embed", "seeds", "neighbourhood", "pcst", "total"}
    names = {n["name"] for n in out["nodes"]}
    assert "Alfonso Cuarón" in names and "Gravity" in names
    ids = {n["id"] for n in out["nodes"]}
    assert all(e["src"] in ids and e["dst"] in ids for e in out["edges"])
    assert any(s["name"] == "Gravity" and "topic" in s["sources"] for s in out["seeds"])


def test_retrieve_questions_file_one_line_each(use_toy):
    r = run("retrieve", "--questions", str(FIXTURES / "metaqa" / "qa_1hop.txt"),
            "--format", "metaqa", "--limit", "3")
    assert r.exit_code == 0, r.output
    lines = [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]
    assert len(lines) == 3
    assert all({"id", "question", "nodes", "edges"} <= set(d) for d in lines)


def test_retrieve_rejects_bad_input(use_toy, tmp_path):
    assert run("retrieve").exit_code != 0  # neither a question nor a file
    bad = tmp_path / "bad.txt"
    bad.write_text("a question without answers\n")
    r = run("retrieve", "--questions", str(bad), "--format", "metaqa")
    assert r.exit_code != 0
    assert "bad.txt:1" in r.output


def test_eval_retrieval_mode(use_toy):
    r = run("eval", str(FIXTURES / "metaqa" / "qa_1hop.txt"), "--format", "metaqa",
            "--mode", "retrieval")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["n"] > 0
    assert 0.0 <= summary["candidate"]["hit"] <= 1.0
    # the toy 1-hop questions are answerable from the KG: S should usually hold the answer
    assert summary["candidate"]["hit"] >= 0.5


def test_ask_json_with_tiny_model(use_toy, tmp_path):
    from tiny_llm import tiny_llama

    model = tiny_llama(tmp_path / "tiny")
    r = run("ask", "who directed Gravity", "--topic", "Gravity", "--base-model", str(model),
            "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) >= {"answer", "candidate", "selected", "out_of_candidate", "edges",
                        "timings_ms"}
    assert out["candidate"], "S must not be empty for a known topic entity"
    assert {"retriever", "generator"} <= set(out["timings_ms"])
    for o in out["out_of_candidate"]:
        assert set(o) == {"name", "grounded", "id", "kg_name"}
        assert o["grounded"] == (o["id"] is not None)
    # no adapters exist for the tiny model: the frozen model answers, and we say so
    assert out["frozen"] == ["retriever", "generator"]
    assert "frozen base model" in r.stderr


def test_ask_ranked_answers_are_kg_nodes_with_kg_casing(use_toy, tmp_path):
    from tiny_llm import tiny_llama

    model = tiny_llama(tmp_path / "tiny")
    # the language model alone (the bundled planner, which serves the toy KG's MetaQA
    # relations, would add its planned paths' ends: tests/e2e/test_planner_e2e.py)
    r = run("ask", "who directed Gravity", "--topic", "Gravity", "--base-model", str(model),
            "--decode", "ranked", "--json", "--planner", "none")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["decode"] == "ranked" and out["answer"]
    kg = {n["name"]: n["id"] for n in out["candidate"]}
    # the answers are nodes of S, spelled as the KG spells them (not lower-cased)
    assert all(a in kg for a in out["answer"])
    assert all(r["name"] in kg and kg[r["name"]] == r["id"] for r in out["ranked"])
    scores = [r["score"] for r in out["ranked"]]
    assert scores == sorted(scores, reverse=True)
    assert out["answer"][0] == out["ranked"][0]["name"]
    assert out["retriever_ranked"]  # the ranked retriever scored every node of S
    selected = {n["name"] for n in out["selected"]}
    assert {r["name"] for r in out["ranked"]} <= {n.lower() for n in selected} | selected
    r = run("ask", "who directed Gravity", "--base-model", str(model), "--decode", "beam")
    assert r.exit_code == 2 and "--decode must be free or ranked" in r.output


def test_ask_json_carries_the_evidence_paths_the_ui_shows(use_toy, tmp_path):
    """`evidence`: per answer, its id and paths from a seed of S over S's edges (hops with
    names and ids, and as text), the UI export's `answers`; without --json the same paths
    are printed as `evidence:` lines."""
    from tiny_llm import tiny_llama

    model = tiny_llama(tmp_path / "tiny")
    args = ("ask", "who directed Gravity", "--topic", "Gravity", "--base-model", str(model),
            "--decode", "ranked", "--planner", "none")
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    ev = out["evidence"]
    assert [e["answer"] for e in ev] == out["answer"] and ev
    kg = {n["id"]: n for n in out["candidate"]}
    seeds = {i for i, n in kg.items() if n["seed"]}
    assert any(e["evidence"] for e in ev), "a ranked answer is a node of S: it has a path"
    for e in ev:
        assert e["id"] in kg and kg[e["id"]]["name"] == e["answer"]
        assert len(e["evidence"]) == len(e["evidence_text"]) <= 3
        for hops, text in zip(e["evidence"], e["evidence_text"], strict=True):
            node = e["id"]  # walk back from the answer: each hop touches the node reached
            for h in reversed(hops):
                assert node in (h["src_id"], h["dst_id"])
                assert (h["src"], h["dst"]) == (kg[h["src_id"]]["name"],
                                                kg[h["dst_id"]]["name"])
                node = h["src_id"] if h["dst_id"] == node else h["dst_id"]
            assert node in seeds
            assert text.startswith(kg[node]["name"]) and e["answer"] in text
    r = run(*args)
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("evidence: ")]
    assert lines == [f"evidence: {e['answer']}: {t}" for e in ev for t in e["evidence_text"]]


def test_ask_rejects_missing_adapter_dir(use_toy, tmp_path):
    r = run("ask", "who directed Gravity", "--retriever", str(tmp_path / "nope"))
    assert r.exit_code != 0
    assert "not an adapter directory" in r.output


@pytest.mark.parametrize("mode", ["no-retriever"])
def test_pipeline_no_retriever_has_no_selection(use_toy, tmp_path, mode):
    from tiny_llm import tiny_llama

    from talent_core.pipeline import Pipeline

    pipe = Pipeline(base_model=str(tiny_llama(tmp_path / "tiny")))
    try:
        ans = pipe.ask("who directed Gravity", ["Gravity"], mode=mode)
    finally:
        pipe.close()
    assert ans.selection is None
    assert ans.candidate.nodes
    node_ids = {n.id for n in ans.candidate.nodes}
    assert all(e.src in node_ids or e.dst in node_ids for e in ans.edges)


def test_bad_questions_exit_2_with_a_one_line_error(use_toy):
    """Issue 15: a 100k-character question, invalid UTF-8 from argv and a control
    character are refused before any model or store work, with rc 2 and no traceback."""
    for q in ("x" * 100_000, "who directed \udce9", "who directed \x1b[31mGravity"):
        r = run("retrieve", q)
        assert r.exit_code == 2, r.output
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
        assert "question" in r.stderr and "\x1b" not in r.stderr
        assert len(r.stderr) < 200


def test_ask_with_a_graph_prompt_generator(use_toy, tmp_path):
    """`--generator-type graph-prompt`: refused with a clear message while no such generator
    is trained; with one (a GNN soft prompt over the MiniLM vectors of the context's names,
    trained 2 steps on the tiny model) the answer says which generator answered."""
    from tiny_llm import sample_candidate, tiny_llama

    from talent_core.llm.data import TrainingExample
    from talent_core.training.llm import train_generator
    from talent_core.training.trainer import TrainConfig

    model = tiny_llama(tmp_path / "tiny")
    r = run("ask", "who directed Gravity", "--base-model", str(model),
            "--generator-type", "graph-prompt")
    assert r.exit_code == 2 and "no trained graph-prompt generator" in r.output
    c = sample_candidate()
    examples = [TrainingExample(question="who directed [Titanic]", candidate=c,
                                answers=["James Cameron"])] * 2
    out = tmp_path / "adapters" / "generator-graph"
    train_generator(examples, TrainConfig(output_dir=out, base_model=str(model),
                                          graph_prompt=True, max_steps=2, grad_accum=1,
                                          save_every=0, progress=False), None, source="none")
    r = run("ask", "who directed Gravity", "--topic", "Gravity", "--base-model", str(model),
            "--adapters", str(tmp_path / "adapters"), "--generator-type", "graph-prompt",
            "--json")
    assert r.exit_code == 0, r.output
    ans = json.loads(r.stdout)
    assert ans["generator"] == "graph-prompt" and ans["answer"]
    r = run("ask", "who directed Gravity", "--topic", "Gravity", "--base-model", str(model),
            "--generator", str(out), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["generator"] == "graph-prompt"
    r = run("ask", "who directed Gravity", "--generator-type", "gnn")
    assert r.exit_code == 2 and "--generator-type must be" in r.output


@pytest.mark.parametrize("flag,bulk", [([], True), (["--no-bulk"], False)])
def test_load_bulk_flag(tmp_path, monkeypatch, flag, bulk):
    """`talent load` writes an empty graph with GRAPH.BULK unless --no-bulk; same counts."""
    from talent_core.config import get_settings

    monkeypatch.setenv("TALENT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TALENT_STORE", "embedded")
    get_settings.cache_clear()
    try:
        r = run("load", str(FIXTURES / "metaqa" / "kb.txt"), "--format", "metaqa", "--json",
                "--no-progress", *flag)
        assert r.exit_code == 0, r.output
        rep = json.loads(r.stdout)
        assert (rep["bulk_batches"] > 0) is bulk
        assert rep["store_after"]["triples"] == 377
    finally:
        run("server", "stop")
        get_settings.cache_clear()


def test_ask_follow_up_reads_the_previous_answers(use_toy, tmp_path):
    """`talent ask` keeps its turn in the data dir; `talent ask --follow-up` reads "them" as
    its answers from a new process; a question without --follow-up starts again."""
    from tiny_llm import tiny_llama

    from talent_core.commands.conversations import read_turns
    from talent_core.config import get_settings

    model = tiny_llama(tmp_path / "tiny")
    first = run("ask", "which films did [Keanu Reeves] star in", "--base-model", str(model),
                "--json")
    assert first.exit_code == 0, first.output
    turn = json.loads(first.stdout)["turn"]
    assert {"id": "Keanu Reeves", "name": "Keanu Reeves"} in turn["topic"]
    data_dir = get_settings().data_dir
    assert [t.question for t in read_turns(data_dir, "default")] == [turn["question"]]
    assert (data_dir / "conversations" / "default.json").stat().st_mode & 0o777 == 0o600
    r = run("ask", "-f", "who directed them?", "--base-model", str(model), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    reading = out["reading"]
    assert reading["source"] in ("answers", "topic") and reading["text"].startswith(
        "reading 'them' as")
    anchors = {n["id"] for n in out["candidate"] if n["seed"]}
    assert {e["id"] for e in reading["entities"]} <= anchors
    assert len(read_turns(data_dir, "default")) == 2
    r = run("ask", "-f", "what about [Gravity]?", "--base-model", str(model), "--json")
    assert r.exit_code == 0, r.output
    about = json.loads(r.stdout)
    assert about["reading"]["asked_as"] == "who directed [Gravity]?"  # "them" replaced
    assert about["question"] == "who directed Gravity?"
    assert {n["id"] for n in about["candidate"] if n["seed"]} >= {"Gravity"}
    plain = run("ask", "who directed them?", "--base-model", str(model))
    assert plain.exit_code == 0 and "reading 'them'" not in plain.output
    assert len(read_turns(data_dir, "default")) == 1
    bad = run("ask", "-f", "who directed them?", "--conversation", "../x")
    assert bad.exit_code == 2 and "conversation name" in bad.output
