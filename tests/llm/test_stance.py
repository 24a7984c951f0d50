"""The stance task (talent_core.stance) on the tiny model: a given graph, no graph, bad
input, the frozen fallback for adapters of another task, and the eval metrics."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from talent_core.errors import TextInputError
from talent_core.evaluation.stance import evaluate_stance, stance_metrics
from talent_core.llm.explagraphs import ExplaGraphsRecord, graph_candidate
from talent_core.stance import NO_GRAPH_NOTE, StanceRequest, answer_stance, label_models

GRAPH = ("(cannabis; synonym of; marijuana)(legal; causes; more available)"
         "(Marijuana; capable of; good thing)")
A1, A2 = "Cannabis should be legal.", "It's not a bad thing to make marijuana more available."


@pytest.fixture(scope="module")
def pipe(tiny_dir):
    from talent_core.pipeline import Pipeline
    from talent_core.store.memory import MemoryStore

    p = Pipeline(base_model=str(tiny_dir), store=MemoryStore(), adapters="none")
    yield p
    p.close()


def test_graph_candidate_merges_concepts_without_case() -> None:
    c = graph_candidate("q", [("A", "r", "b"), ("a", "s", "C")])
    assert [n.name for n in c.nodes] == ["A", "b", "C"]
    assert [(e.src, e.dst) for e in c.edges] == [("c0:a", "c1:b"), ("c0:a", "c2:c")]


def test_stance_with_a_given_graph(pipe) -> None:
    out = answer_stance(pipe, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH, mode="full"))
    assert out.label in ("support", "counter") and out.label == out.scores[0].label
    assert sorted(s.label for s in out.scores) == ["counter", "support"]
    assert math.isclose(sum(s.prob for s in out.scores), 1.0, abs_tol=1e-3)
    assert out.graph_source == "given" and out.graph_nodes == 5
    names = {n.name for n in out.answer.candidate.nodes}
    assert set(out.evidence) <= {n.lower() for n in names}
    assert out.frozen == ["retriever", "generator"]
    assert any("frozen base model" in n for n in out.notes)
    assert not any(NO_GRAPH_NOTE in n for n in out.notes)


def test_stance_without_a_graph_says_so(pipe) -> None:
    out = answer_stance(pipe, StanceRequest(arg1=A1, arg2=A2))
    assert out.graph_source == "none" and out.graph_nodes == 0 and out.evidence == []
    assert any(n.startswith(NO_GRAPH_NOTE) for n in out.notes)
    assert out.frozen == ["generator"]  # no retriever ran without a graph
    assert out.answer.selection is None


def test_stance_no_retriever_mode(pipe) -> None:
    out = answer_stance(pipe, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH, mode="no-retriever"))
    assert out.answer.selection is None and out.evidence == []
    assert len(out.evidence_edges) == 3  # the whole graph went to the generator
    assert out.frozen == ["generator"]


def test_a_request_without_a_mode_takes_the_settings_stance_mode(pipe, monkeypatch) -> None:
    assert pipe.settings.stance_mode == "no-retriever"  # the default (validation-chosen)
    out = answer_stance(pipe, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH))
    assert out.answer.selection is None and out.frozen == ["generator"]
    monkeypatch.setattr(pipe, "settings", pipe.settings.model_copy(update={"stance_mode": "full"}))
    out = answer_stance(pipe, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH))
    assert out.answer.selection is not None and out.frozen == ["retriever", "generator"]


@pytest.mark.parametrize("graph,problem", [("(a; b)", "has 2 parts"),
                                           ("(a; r; b) junk", "at character 11"),
                                           ("(a; ; b)", "empty part")])
def test_bad_graph_text_is_a_clear_error(pipe, graph, problem) -> None:
    with pytest.raises(TextInputError, match="^graph: not an explanation graph: .*" + problem):
        answer_stance(pipe, StanceRequest(arg1=A1, arg2=A2, graph=graph))


def test_empty_argument_is_named(pipe) -> None:
    with pytest.raises(TextInputError, match="^argument 2: "):
        answer_stance(pipe, StanceRequest(arg1=A1, arg2="  "))


def test_adapters_of_another_task_give_way_to_the_frozen_model(pipe) -> None:
    r, g = pipe.models
    saved = (r.task, g.task, g.meta)
    try:
        g.meta = SimpleNamespace(task="kgqa")  # as the bundled MetaQA adapters say
        lr, lg, trained = label_models(pipe)
        assert trained == "kgqa" and lr.task == lg.task == "label"
        assert lr.frozen and lg.frozen and lg.lm is g.lm  # same weights, no new load
        out = answer_stance(pipe, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH))
        assert out.adapters_task == "kgqa"
        assert any("no ExplaGraphs (label-task) adapters" in n and "'kgqa'" in n
                   for n in out.notes)
        r.task = g.task = "label"  # label-task models are used as they are
        assert label_models(pipe)[:2] == (r, g)
    finally:
        r.task, g.task, g.meta = saved


def test_stance_metrics() -> None:
    gold = ["support"] * 6 + ["counter"] * 4
    m = stance_metrics(gold, ["support"] * 10)  # a model that leans to one label
    assert m["accuracy"] == 0.6 == m["majority_baseline"]["accuracy"]
    assert m["balanced_accuracy"] == 0.5
    assert m["per_class"]["counter"] == {"n": 4, "accuracy": 0.0}
    pred = ["support"] * 5 + ["counter"] * 5
    m = stance_metrics(gold, pred)
    assert m["accuracy"] == 0.9 and m["balanced_accuracy"] == round((5 / 6 + 1) / 2, 4)
    assert m["predicted"] == {"support": 5, "counter": 5}
    with pytest.raises(ValueError):
        stance_metrics(gold, pred[:3])


def test_evaluate_stance_rows(pipe) -> None:
    recs = [ExplaGraphsRecord(arg1=A1, arg2=A2, label="support",
                              triples=[("cannabis", "synonym of", "marijuana")]),
            ExplaGraphsRecord(arg1="x", arg2="y", label="counter", triples=[("x", "r", "y")])]
    summary, rows = evaluate_stance(pipe, recs, progress=False)
    assert summary["n"] == 2 and [r["gold"] for r in rows] == ["support", "counter"]
    assert summary["accuracy"] == sum(r["correct"] for r in rows) / 2
    assert rows[0]["id"] == recs[0].id and set(rows[0]["scores"]) == {"support", "counter"}
    assert summary["frozen"] == ["retriever", "generator"] and summary["latency_ms"]["p50"] > 0


def _tiny_adapters(tiny_dir, root, task: str, seed: int) -> None:
    """A retriever and a generator adapter (non-zero LoRA) for ``task`` under ``root``."""
    from tiny_llm import tiny_adapters

    tiny_adapters(tiny_dir, root, root / "cache", seed, 0.5, task=task,
                  dataset="explagraphs" if task == "label" else "metaqa")


@pytest.fixture(scope="module")
def bundled(tiny_dir, tmp_path_factory):
    """A package adapter dir for the tiny model: KGQA adapters plus explagraphs/ label ones."""
    root = tmp_path_factory.mktemp("bundled")
    _tiny_adapters(tiny_dir, root, "kgqa", 20)
    _tiny_adapters(tiny_dir, root / "explagraphs", "label", 30)
    return root


def test_shipped_label_adapters_answer_the_stance_task(tiny_dir, bundled, monkeypatch) -> None:
    import talent_core.pipeline as pipeline_mod
    from talent_core.store.memory import MemoryStore

    monkeypatch.setattr(pipeline_mod, "bundled_adapters_dir", lambda base: bundled)
    p = pipeline_mod.Pipeline(base_model=str(tiny_dir), store=MemoryStore())
    try:
        r, g = p.models
        assert r.task == g.task == "kgqa" and not r.frozen  # the KGQA pipeline keeps its own
        lr, lg, trained = label_models(p)
        assert trained == "kgqa" and lr.task == lg.task == "label"
        assert (lr.adapter, lg.adapter) == ("explagraphs-retriever", "explagraphs-generator")
        assert lg.lm is g.lm and lr.meta.task == lg.meta.task == "label"  # same weights
        loaded = dict(g.lm.metas)
        label_models(p)
        assert g.lm.metas == loaded  # attached once
        out = answer_stance(p, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH, mode="full"))
        assert out.frozen == [] and not any("frozen" in n for n in out.notes)
        assert set(out.adapters) == {"retriever", "generator"}
        assert all("explagraphs" in v and "task label" in v for v in out.adapters.values())
        out = answer_stance(p, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH, mode="no-retriever"))
        assert list(out.adapters) == ["generator"] and out.frozen == []
        # the KGQA pipeline still answers with its own adapters
        assert p.models == (r, g) and r.adapter == "retriever"
    finally:
        p.close()


@pytest.mark.parametrize("options,frozen", [({"adapters": "none"}, ["retriever", "generator"]),
                                            ({"frozen_retriever": True}, ["retriever"])])
def test_flags_keep_overriding_the_shipped_label_adapters(tiny_dir, bundled, monkeypatch,
                                                          options, frozen) -> None:
    import talent_core.pipeline as pipeline_mod
    from talent_core.store.memory import MemoryStore

    monkeypatch.setattr(pipeline_mod, "bundled_adapters_dir", lambda base: bundled)
    p = pipeline_mod.Pipeline(base_model=str(tiny_dir), store=MemoryStore(), **options)
    try:
        out = answer_stance(p, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH, mode="full"))
        assert out.frozen == frozen
        assert any("frozen base model" in n for n in out.notes)
        assert out.adapters["retriever"] == "frozen base model"
    finally:
        p.close()


def test_the_package_ships_explagraphs_label_adapters() -> None:
    """The default base model's ExplaGraphs adapters are in the package (and so the wheel:
    pyproject package-data takes adapters/**), trained for the label task on it."""
    from talent_core.config import Settings
    from talent_core.llm.models import read_meta
    from talent_core.stance import bundled_label_dirs

    base = Settings(_env_file=None).base_model
    dirs = bundled_label_dirs(base)
    assert set(dirs) == {"retriever", "generator", "generator-graph"}
    for role, d in dirs.items():
        meta = read_meta(d)
        kind = role.removesuffix("-graph")
        assert (meta.kind, meta.task, meta.dataset) == (kind, "label", "explagraphs")
        assert (d / "graph_prompt.safetensors").is_file() == (role == "generator-graph")
        assert meta.base_model == base and (d / "adapter_model.safetensors").is_file()


def test_choose_label_bias_recentres_a_leaning_model() -> None:
    from talent_core.training.tune import choose_label_bias, label_scores

    # support leads by 1 nat on every row; counter rows by less than support rows
    rows = ([({"support": 0.0, "counter": -0.5}, "counter")] * 4
            + [({"support": 0.0, "counter": -2.0}, "support")] * 6)
    assert label_scores(rows, 0.0) == {"bias": 0.0, "accuracy": 0.6, "balanced_accuracy": 0.5}
    best = choose_label_bias(rows)
    assert 0.5 < best["bias"] <= 2.0  # the smallest offset that separates them
    assert best["accuracy"] == best["balanced_accuracy"] == 1.0
    assert choose_label_bias([({"support": 0.0, "counter": -1.0}, "support")])["bias"] == 0.0


def test_the_label_offset_in_the_metadata_moves_the_scores(tiny_dir, bundled,
                                                          monkeypatch) -> None:
    import talent_core.pipeline as pipeline_mod
    from talent_core.llm.models import read_meta, write_meta
    from talent_core.store.memory import MemoryStore

    monkeypatch.setattr(pipeline_mod, "bundled_adapters_dir", lambda base: bundled)
    gen_dir = bundled / "explagraphs" / "generator"
    saved = read_meta(gen_dir)
    runs = {}
    try:
        for bias in (0.0, 3.0):
            meta = saved.model_copy(deep=True)
            meta.ranking["bias_counter"] = bias
            write_meta(gen_dir, meta)
            p = pipeline_mod.Pipeline(base_model=str(tiny_dir), store=MemoryStore())
            try:
                assert label_models(p)[1].label_bias == {"support": 0.0, "counter": bias}
                out = answer_stance(p, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH,
                                                     mode="no-retriever"))
                runs[bias] = {s.label: s.score for s in out.scores}
            finally:
                p.close()
    finally:
        write_meta(gen_dir, saved)
    assert runs[3.0]["support"] == pytest.approx(runs[0.0]["support"], abs=1e-3)
    assert runs[3.0]["counter"] == pytest.approx(runs[0.0]["counter"] + 3.0, abs=1e-3)


def test_the_graph_prompt_generator_type_answers_with_the_label_generator_graph(
        tiny_dir, bundled, monkeypatch, tmp_path) -> None:
    """``--generator-type graph-prompt``: the stance task takes explagraphs/generator-graph
    (its soft prompt built from the given graph's concepts), the KGQA pipeline its own."""
    import json
    import shutil

    from hash_embedder import HashEmbedder

    import talent_core.pipeline as pipeline_mod
    from talent_core.llm import graph_prompt as gp
    from talent_core.stance import bundled_label_dirs
    from talent_core.store.memory import MemoryStore

    root = tmp_path / "bundled"
    shutil.copytree(bundled, root)
    hidden = json.loads((tiny_dir / "config.json").read_text())["hidden_size"]
    for d in (root / "generator", root / "explagraphs" / "generator"):
        shutil.copytree(d, d.parent / "generator-graph")
        gp.save(gp.build(gp.GraphPromptConfig(llm_hidden=hidden, in_dim=16, hidden=16, heads=2,
                                              proj_hidden=24)), d.parent / "generator-graph")
    monkeypatch.setattr(pipeline_mod, "bundled_adapters_dir", lambda base: root)
    assert set(bundled_label_dirs(str(tiny_dir))) == {"retriever", "generator",
                                                      "generator-graph"}
    p = pipeline_mod.Pipeline(base_model=str(tiny_dir), store=MemoryStore(),
                              embedder=HashEmbedder(16), generator_type="graph-prompt")
    try:
        assert p.models[1].kind == "graph-prompt" and p.models[1].task == "kgqa"
        _, g, _ = label_models(p)
        assert g.adapter == "explagraphs-generator-graph" and g.kind == "graph-prompt"
        out = answer_stance(p, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH))
        assert out.generator == "graph-prompt" and out.frozen == []
        assert "explagraphs/generator-graph" in out.adapters["generator"]
    finally:
        p.close()
