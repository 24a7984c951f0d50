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
    out = answer_stance(pipe, StanceRequest(arg1=A1, arg2=A2, graph=GRAPH))
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
