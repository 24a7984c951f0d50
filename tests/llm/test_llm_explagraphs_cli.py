from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from tiny_llm import sample_candidate
from typer.testing import CliRunner

from talent_core.errors import DataError
from talent_core.llm.data import read_examples, write_examples
from talent_core.llm.explagraphs import (
    annotate,
    parse_graph,
    read_explagraphs,
    to_candidate,
    to_example,
)
from talent_core.llm.lm import Generation, LoadedLM

TSV = (
    "arg1\targ2\tlabel\tgraph\n"
    "Cannabis should be legal.\tIt's not a bad thing to make marijuana more available.\t"
    "support\t(cannabis; synonym of; marijuana)(legal; causes; more available)"
    "(marijuana; capable of; good thing)(good thing; desires; legal)\n"
    '"Women should not be in combat, ever."\tWomen and men have the same rights.\tcounter\t'
    "(women and men; is a; citizens)(citizens; causes; have same rights)"
    "(have same rights; causes; women)\n"
)


def test_parse_graph() -> None:
    assert parse_graph("(a; is a; b)( b ;causes; c )") == [("a", "is a", "b"), ("b", "causes", "c")]
    with pytest.raises(ValueError, match="not an explanation graph"):
        parse_graph("(a; b)")


def test_read_explagraphs_and_candidate(tmp_path) -> None:
    path = tmp_path / "eg.tsv"
    path.write_text(TSV)
    recs = read_explagraphs(path)
    assert [r.label for r in recs] == ["support", "counter"]
    assert recs[1].arg1 == "Women should not be in combat, ever."
    c = to_candidate(recs[0])
    assert [n.name for n in c.nodes] == ["cannabis", "marijuana", "legal", "more available",
                                         "good thing"]
    assert len(c.edges) == 4 and "Argument 2: It's not a bad thing" in c.question
    ex = to_example(recs[0], ["marijuana"])
    assert ex.answers == ["support"] and ex.retriever_gold == ["marijuana"]
    path.write_text(TSV + "a\tb\tmaybe\t(x; y; z)\n")
    with pytest.raises(DataError, match=r"eg\.tsv:4: label 'maybe'"):
        read_explagraphs(path)


def test_annotation_is_parsed_matched_and_cached(tiny_dir, settings, tmp_path,
                                                 monkeypatch) -> None:
    path = tmp_path / "eg.tsv"
    path.write_text(TSV)
    recs = read_explagraphs(path)
    lm = LoadedLM(str(tiny_dir), {}, settings)
    prompts: list[str] = []

    def fake(prompt: str, adapter, max_new_tokens: int) -> Generation:
        prompts.append(prompt)
        return Generation("marijuana|legal|good thing|not a node|women", False, 1, 1)

    monkeypatch.setattr(lm, "generate", fake)
    cache = tmp_path / "ann.jsonl"
    anns = annotate(recs, lm, cache, progress=False)
    assert anns[0].nodes == ["marijuana", "legal", "good thing"]  # only nodes of the graph
    assert anns[1].nodes == ["women"]
    assert "Gold stance: support" in prompts[0] and "Argument 1: Cannabis" in prompts[0]
    assert "0,cannabis" in prompts[0]

    def boom(*a, **k):
        raise AssertionError("cached annotations must not call the model")

    monkeypatch.setattr(lm, "generate", boom)
    again = annotate(recs, lm, cache, progress=False)
    assert [a.nodes for a in again] == [a.nodes for a in anns]


def test_annotation_with_tiny_model_runs(tiny_dir, settings, tmp_path) -> None:
    path = tmp_path / "eg.tsv"
    path.write_text(TSV)
    lm = LoadedLM(str(tiny_dir), {}, settings)
    anns = annotate(read_explagraphs(path), lm, tmp_path / "a.jsonl", max_new_tokens=6,
                    progress=False)
    assert len(anns) == 2 and all(isinstance(a.raw, str) for a in anns)
    names = {n.name.lower() for n in to_candidate(read_explagraphs(path)[0]).nodes}
    assert set(anns[0].nodes) <= names
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 2


def _app() -> typer.Typer:
    """The `talent` app: its group says TalentErrors (a bad examples file) with exit 2."""
    from talent_core.commands import app

    return app


def test_cli_train_retriever_then_generator(tiny_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TALENT_MODEL_CACHE_DIR", str(tmp_path / "cache"))
    from talent_core.config import get_settings

    get_settings.cache_clear()
    c = sample_candidate()
    from talent_core.llm.data import TrainingExample

    examples = tmp_path / "train.jsonl"
    write_examples(examples, [TrainingExample(question=c.question, candidate=c,
                                              answers=["James Cameron"])] * 2)
    runner = CliRunner()
    r = runner.invoke(_app(), ["train", "retriever", str(examples), "-o", str(tmp_path / "r"),
                               "--base-model", str(tiny_dir), "--max-steps", "1",
                               "--grad-accum", "1", "--lam", "0.01", "--dataset", "toy"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 1 and summary["kind"] == "retriever"
    assert json.loads((tmp_path / "r" / "talent_meta.json").read_text())["dataset"] == "toy"
    r = runner.invoke(_app(), ["train", "generator", str(examples), "-o", str(tmp_path / "g"),
                               "--retriever", str(tmp_path / "r"), "--max-steps", "1",
                               "--grad-accum", "1", "--retriever-max-new-tokens", "4"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["kind"] == "generator"
    r = runner.invoke(_app(), ["train", "generator", str(examples), "-o", str(tmp_path / "g2")])
    assert r.exit_code == 2 and "exactly one of --retriever" in r.output
    get_settings.cache_clear()


def test_cli_bad_examples_exit_2(tiny_dir, tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    r = CliRunner().invoke(_app(), ["train", "retriever", str(bad), "-o", str(tmp_path / "o"),
                                    "--base-model", str(tiny_dir)])
    assert r.exit_code == 2 and "bad.jsonl:1: candidate" in r.output
    assert not (tmp_path / "o").exists()


def test_cli_annotate_writes_examples(tiny_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TALENT_BASE_MODEL", str(tiny_dir))
    from talent_core.config import get_settings

    get_settings.cache_clear()
    tsv = tmp_path / "eg.tsv"
    tsv.write_text(TSV)
    out = tmp_path / "eg_examples.jsonl"
    r = CliRunner().invoke(_app(), ["annotate-explagraphs", str(tsv), "--cache",
                                    str(tmp_path / "ann.jsonl"), "--examples-out", str(out),
                                    "--max-new-tokens", "4"])
    get_settings.cache_clear()
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["records"] == 2
    exs = read_examples(out)
    assert [e.answers for e in exs] == [["support"], ["counter"]]
    assert all(e.gold_nodes is not None for e in exs)


@pytest.mark.data
def test_real_explagraphs_file_parses() -> None:
    path = Path(__file__).resolve().parents[3] / "shared" / "data" / "explagraphs" / \
        "train_dev_sample.tsv"
    if not path.is_file():
        pytest.skip("../shared/data is absent")
    recs = read_explagraphs(path)
    assert len(recs) == 2000 and {r.label for r in recs} == {"support", "counter"}
    assert all(to_candidate(r).nodes for r in recs)
