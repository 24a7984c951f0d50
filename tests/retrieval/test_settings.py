"""Retrieval settings: validated overrides (Pipeline and CLI), one declaration of the hops
bounds, CLI options generated from RetrievalConfig, typed questions read like file ones, and
a dataset's stopwords chosen by the question format."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from talent_core.config import Settings
from talent_core.errors import RetrievalSettingsError
from talent_core.pipeline import Pipeline
from talent_core.questions import FORMAT_STOPWORDS, parse_question, read_questions
from talent_core.retrieval.config import (
    MAX_HOPS,
    MIN_HOPS,
    RetrievalConfig,
    apply_overrides,
    field_bounds,
)
from talent_core.retrieval.seeds import STOPWORDS, text_seeds


@pytest.fixture
def pipe(mem_store, bow) -> Pipeline:
    return Pipeline(settings=Settings(_env_file=None), store=mem_store, embedder=bow,
                    adapters="none")


def test_pipeline_rejects_bad_overrides_with_the_field_named(pipe):
    with pytest.raises(RetrievalSettingsError, match=r"k_nodes: .*greater than or equal to 0"):
        pipe.retrieve("who directed [Gravity]", k_nodes=-5)
    with pytest.raises(RetrievalSettingsError,
                       match=r"hopz: unknown setting \(known: method, k_nodes"):
        pipe.retrieve("who directed [Gravity]", hopz=9)
    with pytest.raises(RetrievalSettingsError, match=r"hops: .*less than or equal to 3"):
        pipe.ask("who directed [Gravity]", mode="retrieval", hops=9)
    assert pipe.retrieval_config(hops=1).hops == 1 and pipe.retrieval.hops == 3


def test_apply_overrides_lists_every_problem():
    with pytest.raises(RetrievalSettingsError) as e:
        apply_overrides(RetrievalConfig(), k_nodes=-5, hopz=9)
    assert [f for f, _ in e.value.problems] == ["k_nodes", "hopz"]
    assert apply_overrides(RetrievalConfig()) == RetrievalConfig()


def test_hops_bounds_come_from_the_config_field():
    from talent_core.store.base import MAX_HOPS as STORE_MAX_HOPS

    assert field_bounds("hops") == (MIN_HOPS, MAX_HOPS) == (1, STORE_MAX_HOPS)
    assert field_bounds("k_nodes") == (0, None)


def test_beam_is_its_own_setting_and_defaults_to_the_old_beam():
    c = RetrievalConfig()
    assert c.beam == c.k_edges == 10
    for name in ("k_edges", "beam", "path_frontier"):
        assert RetrievalConfig.model_fields[name].description.split(":")[0] in (
            "paper rule", "default rule")


def test_typed_question_is_read_like_a_file_question(pipe, tmp_path):
    path = tmp_path / "qa.txt"
    path.write_text("who directed [Gravity]\tAlfonso Cuarón\n")
    rec = next(read_questions(path, "metaqa"))
    assert parse_question("who directed [Gravity]") == (rec.question, rec.topic_entities)
    assert parse_question("[A] and [B]", ["B", "C"]) == ("A and B", ["A", "B", "C"])
    cand = pipe.retrieve("who directed [Gravity]")
    assert cand.question == "who directed Gravity"  # no brackets reach the embedder / LLM
    assert any(s.name == "Gravity" and "topic" in s.sources for s in cand.seeds)


def test_dataset_stopwords_come_with_the_question_format(mem_store, bow):
    assert not set(FORMAT_STOPWORDS["metaqa"]) & STOPWORDS  # not generic
    words = text_seeds("films", mem_store, stopwords=FORMAT_STOPWORDS["metaqa"])
    assert words.seeds == []
    metaqa = Pipeline(settings=Settings(_env_file=None), store=mem_store, embedder=bow,
                      adapters="none")
    rog = Pipeline(settings=Settings(_env_file=None), store=mem_store, embedder=bow,
                   adapters="none", question_format="rog")
    assert set(FORMAT_STOPWORDS["metaqa"]) <= set(metaqa.retrieval_config().stopwords)
    assert rog.retrieval_config().stopwords == []


runner = CliRunner()


@pytest.mark.parametrize("args, option", [
    (["--k-nodes", "-5"], "--k-nodes"),
    (["--hops", "9"], "--hops"),
    (["--prizes", "nope"], "--prizes"),
    (["--node-sim-share", "2"], "--node-sim-share"),
])
@pytest.mark.parametrize("command", ["retrieve", "ask"])
def test_cli_rejects_bad_retrieval_options(command, args, option):
    from talent_core.commands import app

    r = runner.invoke(app, [command, "who directed [Gravity]", *args])
    assert r.exit_code == 2, r.output
    assert f"error: {option}: " in r.output


def test_cli_retrieval_options_are_generated_from_the_config():
    import typer.main

    from talent_core.commands import app

    group = typer.main.get_command(app)
    for name in ("retrieve", "ask", "examples", "eval"):
        opts = {o for p in group.commands[name].params for o in p.opts}  # type: ignore[attr-defined]
        for field in ("k_nodes", "k_edges", "beam", "hops", "edge_cost", "fanout", "prizes"):
            assert "--" + field.replace("_", "-") in opts, (name, field)
