"""`talent eval --report DIR`: the report machinery on the toy KG (embedded store, real
MiniLM) and the tiny random LLM; pure parts (options, sampling, rows file, metrics) too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from talent_core.commands import app
from talent_core.evaluation.datasets import Item, select_items
from talent_core.evaluation.metrics import hallucinated, hit_at_any, substring_hit
from talent_core.evaluation.runner import plan, read_rows
from talent_core.evaluation.summary import strip_timings
from talent_core.evaluation.sweep import ReportError, parse_sweep, sweep_points
from talent_core.questions import QARecord
from talent_core.retrieval.config import RetrievalConfig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
METAQA = [str(FIXTURES / "metaqa" / f"qa_{h}hop.txt") for h in (1, 2, 3)]
PLOTS = {"coverage_vs_size.png", "by_hop.png", "by_type.png", "latency.png", "sweep_k.png"}
BUNDLED_RETRIEVER = (Path(__file__).resolve().parents[2] / "talent_core" / "adapters"
                     / "smollm2-135m-instruct" / "retriever")
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, ["eval", *args])


def load(d: Path) -> tuple[dict, list[dict]]:
    report = json.loads((d / "report.json").read_text())
    rows = [json.loads(x) for x in (d / "rows.jsonl").read_text().splitlines()]
    return report, rows


# --- the retrieval-only report: outputs, determinism, resume ------------------------------

RETRIEVAL_ARGS = [*METAQA, "--format", "metaqa", "--methods", "vector,pcst-paper,pcst-default",
                  "--sweep", "k=3,10", "--limit", "9", "--sample-seed", "7"]


def test_retrieval_report_outputs_determinism_and_resume(use_toy, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    r = run(*RETRIEVAL_ARGS, "--report", str(a))
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["rows"] == 9 * 3 * 2
    assert {p.name for p in a.iterdir()} >= {"rows.jsonl", "report.json", "report.md"} | PLOTS
    for png in PLOTS:
        assert (a / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report, rows = load(a)
    assert set(report) >= {"command", "config", "dataset", "code", "packages", "machine",
                           "methods", "definitions", "results", "plots", "run"}
    assert report["dataset"]["questions_by_hop"] == {"1": 3, "2": 3, "3": 3}  # balanced
    assert len(report["dataset"]["files"]) == 3
    assert all(len(f["sha256"]) == 64 for f in report["dataset"]["files"])
    assert report["dataset"]["store"]["triples"] > 0
    assert set(report["packages"]) >= {"torch", "transformers", "peft", "numpy"}
    assert {"platform", "cpu_count", "load_average"} <= set(report["machine"])
    assert "commit" in report["code"]
    assert report["config"]["sample_seed"] == 7 and report["config"]["retrieval"]["k_nodes"] == 10
    groups = {(g["method"], g["label"]): g for g in report["results"]}
    assert set(groups) == {(m, f"k={k}") for m in ("vector", "pcst-paper", "pcst-default")
                           for k in (3, 10)}
    for g in groups.values():
        assert g["n"] == 9 and g["mode"] == "retrieval"
        assert set(g["retrieval"]["nodes"]) >= {"hit", "recall", "precision", "f1", "size"}
        assert set(g["by_hop"]) == {"1", "2", "3"} and g["by_type"]
        assert "total" in g["latency"]
    # vector at equal size: as many nodes as pcst-default's S, question by question
    by_key = {(r["id"], r["method"], r["point"]["k"]): r for r in rows}
    for (qid, method, k), row in by_key.items():
        if method == "vector":
            assert row["nodes"]["size"] <= by_key[(qid, "pcst-default", k)]["nodes"]["size"]
    # the k sweep moves the default rule's size
    assert (groups[("pcst-default", "k=3")]["retrieval"]["nodes"]["size"]
            < groups[("pcst-default", "k=10")]["retrieval"]["nodes"]["size"])
    md = (a / "report.md").read_text()
    for text in ("## Retrieval: the node set of each method", "## Per hop",
                 "## Per question type", "## Latency (ms)", "## Metric definitions",
                 "coverage_vs_size.png", "hallucination rate"):
        assert text in md
    # one per question, k and candidate: pcst's two prize rules and the vector retriever's
    assert report["run"]["retrievals"] == 9 * 3 * 2
    assert all("retrieve_vector" in r["timings_ms"] for r in rows if r["method"] == "vector")

    # the same command twice: identical numbers (timings aside)
    r = run(*RETRIEVAL_ARGS, "--report", str(b))
    assert r.exit_code == 0, r.output
    report_b, rows_b = load(b)
    assert strip_timings(report_b["results"]) == strip_timings(report["results"])
    assert strip_timings(rows_b) == strip_timings(rows)

    # interrupted: 20 complete rows and half a line left; the rerun computes the rest
    lines = (b / "rows.jsonl").read_text().splitlines(keepends=True)
    (b / "rows.jsonl").write_text("".join(lines[:20]) + lines[20][:25])
    r = run(*RETRIEVAL_ARGS, "--report", str(b))
    assert r.exit_code == 0, r.output
    resumed, rows_c = load(b)
    assert resumed["run"]["resumed"] == 20 and resumed["run"]["computed"] == 54 - 20
    assert len(rows_c) == 54
    assert strip_timings(resumed["results"]) == strip_timings(report["results"])

    # a finished report reruns nothing
    r = run(*RETRIEVAL_ARGS, "--report", str(b))
    assert json.loads(r.stdout.strip().splitlines()[-1])["computed"] == 0


def test_eval_without_report_unchanged_and_report_options_need_it(use_toy):
    r = run(METAQA[0], "--format", "metaqa", "--limit", "2")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.strip().splitlines()[-1])["n"] == 2
    r = run(METAQA[0], "--sweep", "k=3")
    assert r.exit_code == 2 and "--sweep need --report" in r.output
    r = run(*METAQA[:2])
    assert r.exit_code == 2 and "several only with --report" in r.output


@pytest.mark.parametrize(("args", "message"), [
    (["--sweep", "k=3,x"], "is not a number"),
    (["--sweep", "k=0"], "k must be whole numbers >= 1"),
    (["--sweep", "k"], "expected NAME=v1,v2"),
    (["--sweep", "colour=1,2"], "unknown sweep 'colour'"),
    (["--sweep", "edge_cost=-1"], "edge_cost"),
    (["--sweep", "k=3", "--sweep", "k=5"], "k swept twice"),
    (["--sweep", f"lambda=0.01:{BUNDLED_RETRIEVER}"], "needs an LLM method"),
    (["--methods", "bogus"], "unknown method 'bogus'"),
    (["--methods", "graph"], "does not apply to --format metaqa"),
    (["--modes", "full"], "--modes applies to the LLM methods"),
    (["--methods", "llm-ranked", "--modes", "fast"], "unknown mode 'fast'"),
    (["--methods", "llm-ranked", "--sweep", "lambda=0.01:/nonexistent"],
     "not a retriever adapter directory"),
    (["--methods", "llm-ranked", "--sweep", "lambda=0.01"], "needs its retriever adapter"),
])
def test_bad_report_options_exit_2(tmp_path, args, message):
    r = run(METAQA[0], "--format", "metaqa", "--report", str(tmp_path / "r"), *args)
    assert r.exit_code == 2, r.output
    assert message in r.output


# --- with the tiny LLM: the LLM methods and modes, ExplaGraphs ------------------------------


def test_llm_report_modes_with_tiny_model(use_toy, tmp_path):
    from tiny_llm import tiny_llama

    model = tiny_llama(tmp_path / "tiny")
    out = tmp_path / "llm"
    r = run(METAQA[0], "--format", "metaqa", "--report", str(out), "--base-model", str(model),
            "--methods", "pcst-default,llm-ranked,llm-free", "--modes",
            "full,no-retriever,frozen", "--limit", "2")
    assert r.exit_code == 0, r.output
    report, rows = load(out)
    assert len(rows) == 2 * (1 + 2 * 3)
    assert report["config"]["base_model"] == str(model)
    groups = {(g["method"], g["mode"]): g for g in report["results"]}
    assert set(groups) == {("pcst-default", "retrieval")} | {
        (m, mode) for m in ("llm-ranked", "llm-free")
        for mode in ("full", "no-retriever", "frozen")}
    for (method, mode), g in groups.items():
        if method == "pcst-default":
            assert "qa" not in g
            continue
        assert set(g["qa"]) == {"hit@1", "hit@any", "substring_hit", "answer_f1"}
        assert {"retriever", "generator"} & set(g["latency"])
        parts = set(g["retrieval"])
        if mode == "no-retriever":
            assert parts == {"nodes", "S"}  # S straight to the generator
        else:
            assert parts == {"nodes", "S", "V̂", "V̂∩S", "V̂\\S"}  # Table 2
            assert set(g["out_of_candidate"] if "out_of_candidate" in g else
                       {"per_question", "grounded", "hallucination_rate"}) == {
                "per_question", "grounded", "hallucination_rate"}
    # the LLM methods read pcst-default's S: the same S (one retrieval per question)
    s_sizes = {r["id"]: r["candidate"]["size"] for r in rows if r["method"] == "pcst-default"}
    assert all(r["candidate"]["size"] == s_sizes[r["id"]] for r in rows)
    assert report["run"]["retrievals"] == 2
    md = (out / "report.md").read_text()
    assert "## Answers" in md and "TaLenT Table 2" in md


def test_explagraphs_report_with_tiny_model(tmp_path):
    from tiny_llm import tiny_llama

    from talent_core.llm.explagraphs import read_explagraphs

    tsv = FIXTURES / "explagraphs" / "sample.tsv"
    recs = read_explagraphs(tsv)
    ann = tmp_path / "ann.jsonl"
    ann.write_text("".join(json.dumps({"id": r.id, "gold_nodes": [r.triples[0][0]]}) + "\n"
                           for r in recs))
    model = tiny_llama(tmp_path / "tiny")
    out = tmp_path / "eg"
    r = run(str(tsv), "--format", "explagraphs", "--report", str(out), "--base-model",
            str(model), "--adapters", "none", "--methods", "graph,llm-ranked",
            "--annotations", str(ann), "--limit", "3")
    assert r.exit_code == 0, r.output
    report, rows = load(out)
    groups = {g["method"]: g for g in report["results"]}
    assert groups["graph"]["retrieval"]["nodes"]["hit"] == 1.0  # pseudo-gold lies in the graph
    assert 0.0 <= groups["llm-ranked"]["qa"]["hit@1"] <= 1.0
    assert all(r["answer"] and r["answer"][0] in ("support", "counter")
               for r in rows if r["method"] == "llm-ranked")  # the label task, ranked
    assert report["dataset"]["store"] is None
    assert "Accuracy" in (out / "report.md").read_text()
    # one example id everywhere: the loader's (what the store and training examples carry)
    from talent_core.loaders.explagraphs import example_id

    assert {row["id"] for row in rows} == {example_id(x.arg1, x.arg2) for x in recs[:3]}


# --- pure parts ---------------------------------------------------------------------------


def _items(hops: dict[int, int]) -> list[Item]:
    return [Item(id=f"{h}:{i}", rec=QARecord(id=f"{h}:{i}", question="q"), hop=h)
            for h, n in hops.items() for i in range(n)]


def test_select_items_seeded_and_balanced_over_hops():
    items = _items({1: 20, 2: 5, 3: 20})
    got = select_items(items, 12, seed=0)
    assert [i.hop for i in got].count(1) == 4 and [i.hop for i in got].count(3) == 4
    assert got == select_items(items, 12, seed=0)
    assert got != select_items(items, 12, seed=1)
    assert [items.index(i) for i in got] == sorted(items.index(i) for i in got)  # file order
    few = select_items(items, 30, seed=0)  # hop 2 has only 5: the others fill in
    assert [i.hop for i in few].count(2) == 5 and len(few) == 30
    assert select_items(items, 3, seed=None) == items[:3]
    assert select_items(items, 3, seed=None, offset=2) == items[2:5]


def test_sweeps_points_and_plan():
    base = RetrievalConfig()
    k = parse_sweep("k=3,5", base)
    cost = parse_sweep("edge-cost=0.25,0.5", base)
    assert (k.values, cost.name, cost.values) == ([3, 5], "edge_cost", [0.25, 0.5])
    assert parse_sweep("prizes=paper,default", base).values == ["paper", "default"]
    with pytest.raises(ReportError, match="prizes"):
        parse_sweep("prizes=bogus", base)
    points = sweep_points([k, cost])
    assert points[0] == {"k": 3, "edge_cost": 0.25} and len(points) == 4
    assert sweep_points([]) == [{}]
    specs = plan(_items({1: 2}), ["vector", "llm-ranked"], ["full", "frozen"],
                 [{"k": 3, "lambda": 0.1}, {"k": 3, "lambda": 0.01}])
    keys = [(s.method, s.mode, tuple(s.point)) for s in specs]
    # the lambda only varies the LLM retriever in mode full
    assert keys.count(("vector", "retrieval", ("k",))) == 2
    assert keys.count(("llm-ranked", "frozen", ("k",))) == 2
    assert keys.count(("llm-ranked", "full", ("k", "lambda"))) == 4


def test_a_retrievers_own_sweep_does_not_multiply_the_other_methods_rows():
    base = RetrievalConfig()
    points = sweep_points([parse_sweep("k=5,10", base), parse_sweep("top-triples=50,100", base),
                           parse_sweep("top_egos=1,3", base)])
    assert len(points) == 8
    specs = plan(_items({1: 1}), ["pcst-default", "subgraphrag", "grag", "llm-ranked@grag"],
                 ["full"], points)
    by = {}
    for s in specs:
        by.setdefault(s.method, []).append(s.point)
    assert by["pcst-default"] == [{"k": 5}, {"k": 10}]
    assert by["subgraphrag"] == [{"top_triples": 50}, {"top_triples": 100}]
    assert by["grag"] == [{"top_egos": 1}, {"top_egos": 3}]
    assert by["llm-ranked@grag"] == [{"top_egos": 1}, {"top_egos": 3}]


def test_read_rows_drops_an_unfinished_line(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text('{"key": "a"}\n{"key": "b"}\n{"key": "c", "x')
    assert [r["key"] for r in read_rows(p)] == ["a", "b"]
    assert p.read_text() == '{"key": "a"}\n{"key": "b"}\n'
    assert read_rows(tmp_path / "missing.jsonl") == []


def test_answer_metrics():
    assert substring_hit("The answer: Paris, France.", ["paris"]) == 1.0
    assert substring_hit("Lyon", ["Paris"]) == 0.0
    assert substring_hit("anything", ["the"]) == 0.0  # an empty normalised gold never hits
    assert hit_at_any(["x", "Paris "], ["paris"]) == 1.0 and hit_at_any([], ["a"]) == 0.0
    # eq. 16: nothing is hallucinated when the answer is right; else V̂ \ S minus gold
    assert hallucinated(["a", "b", "c"], ["a"], ["b"], hit1=1.0) == 0
    assert hallucinated(["a", "b", "c"], ["a"], ["b"], hit1=0.0) == 1


def test_latency_percentile_is_one_definition():
    """Reports and bench/ read one percentile: the sorted values' element at index
    min(n - 1, floor(q/100 * n)), no interpolation."""
    from talent_core.evaluation.latency import latency_summary, percentile, stage_latency

    assert percentile([5, 1, 4, 2, 3], 50) == 3 and percentile([5, 1, 4, 2, 3], 95) == 5
    assert percentile([1, 2, 3, 4], 50) == 3  # the upper middle value
    assert percentile(range(1, 101), 95) == 96 and percentile([], 50) is None
    assert latency_summary([1.4, 2.6, 10.0]) == {"mean_ms": 5, "p50_ms": 3, "p95_ms": 10}
    rows = [{"timings_ms": {"total": 2.0}}, {"timings_ms": {}}, {"timings_ms": {"total": 4.0}}]
    assert stage_latency(rows, "total") == {"mean_ms": 3, "p50_ms": 4, "p95_ms": 4}
    assert stage_latency(rows, "generator") is None


def test_explagraphs_items_carry_the_loaders_example_id(tmp_path):
    """Report items, training examples and the store share one ExplaGraphs example id; an
    annotations file keyed by the older content hash is still read."""
    from talent_core.evaluation.datasets import read_items
    from talent_core.llm.explagraphs import read_explagraphs, to_example
    from talent_core.loaders.explagraphs import ExplaGraphsReader
    from talent_core.loaders.items import Record

    tsv = FIXTURES / "explagraphs" / "sample.tsv"
    stored = [x.data["id"] for x in ExplaGraphsReader(tsv) if isinstance(x, Record)]
    recs = read_explagraphs(tsv)
    assert [i.id for i in read_items([tsv], "explagraphs")] == stored
    assert [to_example(r, None).id for r in recs] == stored
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"id": recs[0].key(), "gold_nodes": ["x"]}) + "\n")
    assert read_items([tsv], "explagraphs", old)[0].retrieval_gold == ["x"]
