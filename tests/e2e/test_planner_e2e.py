"""The relation-path planner as a user trains and uses it: `talent train planner` fits the
question <-> path matcher (a LoRA on MiniLM, one epoch on a handful of label records), then
`talent ask --planner DIR` plans with it (a random tiny LM, so the plan decides); the
zero-shot planner, `--planner none`, the CLI's refusals, and `--self` on the loaded toy
store (which embeds with MiniLM, the matcher's base)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from talent_core.commands import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metaqa"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def record(i: int, question: str, topic: str, path: list[str], split: str = "train") -> str:
    return json.dumps({"id": f"toy-{i}", "split": split, "question": question,
                       "q_entity": [topic], "answer": [], "inferential_chain": path,
                       "ground_paths": [path]})


def write_labels(path: Path) -> Path:
    """A few relation-path label records over the toy KG's relations, two validating."""
    lines = [record(0, "when was Heat released", "Heat", ["release_year"]),
             record(1, "who directed The Matrix", "The Matrix", ["directed_by"]),
             record(2, "who acted in Speed", "Speed", ["starred_actors"]),
             record(3, "what genre is Delicatessen", "Delicatessen", ["has_genre"]),
             record(4, "who directed films starring Keanu Reeves", "Keanu Reeves",
                    ["starred_actors", "directed_by"]),
             record(5, "what year was Speed released", "Speed", ["release_year"], "validation"),
             record(6, "who was the director of Heat", "Heat", ["directed_by"], "validation")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def store_embedding_model() -> str:
    from talent_core.config import get_settings

    return get_settings().embedding_model


@pytest.fixture
def tiny(tmp_path) -> str:
    from tiny_llm import tiny_llama

    return str(tiny_llama(tmp_path / "tiny"))


def ask_args(tiny: str, question: str = "when was [Gravity] released") -> tuple[str, ...]:
    return ("ask", question, "--base-model", tiny, "--decode", "ranked", "--no-retriever",
            "--json")


def test_train_planner_then_ask_with_and_without_it(use_toy, tmp_path, tiny):
    out_dir = tmp_path / "toymatcher"
    labels = write_labels(tmp_path / "labels.jsonl")
    r = run("train", "planner", str(labels), "-o", str(out_dir), "--epochs", "2",
            "--rank", "8", "--alpha", "16", "--mine", "2")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["matcher"] == str(out_dir)
    assert summary["trained_on"]["pairs"] == 5 and summary["trained_on"]["files"] == [
        "labels.jsonl"]
    assert summary["training"]["steps"] == 2  # two epochs of one batch, the second mined
    assert summary["validation"]["questions"] == 2
    meta = json.loads((out_dir / "matcher.json").read_text())
    assert meta["format"] == "talent-path-matcher/1" and meta["name"] == "toymatcher"
    assert (meta["lora_rank"], meta["lora_alpha"]) == (8, 16.0)
    assert meta["settings"]["mine"] == 2
    assert meta["base_model"] == store_embedding_model() == "minilm"
    assert (out_dir / meta["lora"]).is_file() and meta["lora"].startswith("lora-")
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(["matcher.json", meta["lora"]])

    ask = ask_args(tiny)
    r = run(*ask, "--planner", str(out_dir))
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["planner"] == "matcher (toymatcher)"
    assert got["plan"][0]["rels"] == ["release_year"] and got["plan"][0]["ends"] == 1
    # the untrained LM's scores are noise: the one node on the planned path wins
    assert got["answer"][0] == "2013"
    top = got["ranked"][0]
    assert top["prior"] > 0.5 and top["lm_score"] is not None
    assert all(x["prior"] is not None for x in got["ranked"])
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
    assert off["planner"] is None and off["plan"] == []
    assert all(x["prior"] is None for x in off["ranked"])

    r = run(*ask, "--planner", str(tmp_path / "nope"))
    assert r.exit_code == 2 and "planner directory not found" in r.output
    (tmp_path / "empty").mkdir()
    r = run(*ask, "--planner", str(tmp_path / "empty"))
    assert r.exit_code == 2 and "not a matcher directory" in r.output


def test_train_planner_with_its_re_ranker_then_ask(use_toy, tmp_path, tiny):
    """`--rerank`: the path re-ranker fitted after the matcher on the same questions, in
    the matcher directory's reranker/; an ask with that directory plans with both."""
    out_dir = tmp_path / "ranked"
    labels = write_labels(tmp_path / "labels.jsonl")
    r = run("train", "planner", str(labels), "-o", str(out_dir), "--epochs", "1",
            "--rank", "8", "--alpha", "16", "--lr", "2e-4", "--rerank")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["reranker"] == str(out_dir / "reranker")
    meta = json.loads((out_dir / "reranker" / "matcher.json").read_text())
    assert meta["role"] == "reranker" and meta["trained_on"]["pairs"] == 5
    assert meta["settings"]["lr"] == 2e-4  # --lr is the re-ranker's too
    assert meta["trained_on"]["started_from"] == str(out_dir)  # the matcher lends its encoder
    r = run(*ask_args(tiny), "--planner", str(out_dir))
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["planner"] == "matcher (ranked) + re-ranker" and got["plan"]
    assert len(got["plan"]) <= 5  # the re-ranker keeps the matcher's best five
    r = run("train", "planner", "--self", "--rerank")
    assert r.exit_code == 2 and "--rerank and --mine are for labelled questions" in r.output
    r = run("train", "planner", "--self", "--mine", "3")
    assert r.exit_code == 2 and "--mine are for labelled questions" in r.output


def test_a_matcher_of_another_base_model_is_refused(use_toy, tmp_path, tiny):
    from talent_core.planning.matcher import save_matcher

    save_matcher(tmp_path / "other", {"name": "other", "base_model": "bge-small",
                                      "lora_rank": 1, "lora_alpha": 1.0}, {})
    r = run(*ask_args(tiny), "--planner", str(tmp_path / "other"))
    assert r.exit_code == 2
    assert "a matcher of 'bge-small'" in r.output and "'minilm'" in r.output


def test_train_planner_refuses_bad_arguments(use_toy, tmp_path):
    r = run("train", "planner", "-o", str(tmp_path / "p"))
    assert r.exit_code == 2 and "give QUESTIONS" in r.output and "--self" in r.output
    labels = write_labels(tmp_path / "labels.jsonl")
    r = run("train", "planner", str(labels))
    assert r.exit_code == 2 and "--output" in r.output
    r = run("train", "planner", str(labels), "--self")
    assert r.exit_code == 2 and "give no QUESTIONS" in r.output
    for bad_opt in (("--alpha", "0"), ("--lr", "0")):  # 0: nothing learnt, or the default
        r = run("train", "planner", str(labels), "-o", str(tmp_path / "p"), *bad_opt)
        assert r.exit_code == 2 and "must be above 0" in r.output, r.output
        assert not (tmp_path / "p").exists()
    # a MetaQA question file is typed by MetaQA's own qtype files
    q = FIXTURES / "qa_1hop.txt"
    r = run("train", "planner", str(q), "-o", str(tmp_path / "p"))
    assert r.exit_code == 2 and "qa_1hop.txt" in r.output and "--metaqa-types" in r.output
    # a bad label record is named by file:line, and nothing is written
    bad = tmp_path / "bad.jsonl"
    bad.write_text(record(0, "when was Heat released", "Heat", ["release_year"])
                   + '\n{"id": 1, \n', encoding="utf-8")
    r = run("train", "planner", str(bad), "-o", str(tmp_path / "p"))
    assert r.exit_code == 2 and "bad.jsonl:2: invalid JSON" in r.output
    assert not (tmp_path / "p").exists()


def test_train_planner_on_typed_metaqa_files_refuses_overlapping_validation(use_toy, tmp_path):
    types = tmp_path / "MetaQA"
    for hop in (1, 2, 3):
        (types / f"{hop}-hop").mkdir(parents=True)
        shutil.copy(FIXTURES / f"qa_{hop}hop.txt", types / f"{hop}-hop" / "qa_dev.txt")
        shutil.copy(FIXTURES / f"qa_{hop}hop_qtype.txt",
                    types / f"{hop}-hop" / "qa_dev_qtype.txt")
    q = str(FIXTURES / "qa_1hop.txt")
    r = run("train", "planner", q, "--val", q, "--metaqa-types", str(types),
            "-o", str(tmp_path / "p"))
    assert r.exit_code == 2 and "also occur in the training files" in r.output
    assert not (tmp_path / "p").exists()
    # disjoint lines whose templates repeat once the topic is removed are no overlap
    from talent_core.training.matcher import read_pairs

    lines = (FIXTURES / "qa_1hop.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("".join(lines[::2]), encoding="utf-8")
    b.write_text("".join(lines[1::2]), encoding="utf-8")
    train, val = read_pairs([a], types, [b])
    assert {p.text for p in train} & {p.text for p in val}  # shared templates
    assert len(train) + len(val) == len(lines)


def test_zero_shot_planner_plans_from_the_anchors_own_relations(use_toy, tiny):
    """No trained planner needed: the topic entity's relation paths ranked by their words'
    similarity to the question; `ask --json` and the text output say which planner."""
    ask = ask_args(tiny, "what release year does [Gravity] have")[:-1] + ("--planner",
                                                                          "zero-shot")
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


def test_self_trained_matcher_is_the_stores_bundled_planner(tmp_path, monkeypatch, tiny):
    """`train planner --self` writes <data dir>/matcher from the store's own paths; a later
    ask (default --planner bundled) plans with it. A data dir of its own: the session's toy
    data dir stays without a matcher of its own, as the other tests expect."""
    from toy_store import toy_data_dir

    from talent_core.config import get_settings

    with toy_data_dir(tmp_path / "data") as env:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("TALENT_PLANNER", raising=False)
        get_settings.cache_clear()
        try:
            own = Path(env["TALENT_DATA_DIR"]) / "matcher"
            r = run(*ask_args(tiny))  # before: the shipped matcher, or zero-shot without one
            assert r.exit_code == 0, r.output
            before = json.loads(r.stdout)["planner"]
            assert before == "zero-shot" or before.startswith("matcher (")
            assert not own.exists()

            r = run("train", "planner", "--self", "--anchors", "20", "--epochs", "1")
            assert r.exit_code == 0, r.output
            summary = json.loads(r.stdout.strip().splitlines()[-1])
            assert summary["matcher"] == str(own)
            assert summary["trained_on"]["self"] is True and summary["trained_on"]["pairs"] > 0
            assert summary["validation"]["questions"] >= 1
            meta = json.loads((own / "matcher.json").read_text())
            assert meta["name"] == "self" and meta["base_model"] == "minilm"
            assert meta["training"]["questions_s"] >= 0 and meta["training"]["fit_s"] > 0

            r = run(*ask_args(tiny))
            assert r.exit_code == 0, r.output
            got = json.loads(r.stdout)
            assert got["planner"].startswith("matcher (self") and got["plan"]
            assert all(x["prior"] is not None for x in got["ranked"])
        finally:
            get_settings.cache_clear()


def test_self_adapts_the_re_ranker_its_start_has(tmp_path, monkeypatch, use_toy, tiny):
    """`--self --from DIR`: where DIR holds a re-ranker, the adapted matcher gets one too,
    fitted from DIR's on the same store questions; from a start without one, none is
    left behind."""
    from toy_store import toy_data_dir

    from talent_core.config import get_settings

    start = tmp_path / "start"
    labels = write_labels(tmp_path / "labels.jsonl")
    r = run("train", "planner", str(labels), "-o", str(start), "--epochs", "1", "--rank", "4",
            "--alpha", "8", "--rerank")
    assert r.exit_code == 0, r.output
    with toy_data_dir(tmp_path / "data") as env:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        get_settings.cache_clear()
        try:
            own = tmp_path / "own"
            r = run("train", "planner", "--self", "--from", str(start), "-o", str(own),
                    "--anchors", "20", "--epochs", "1")
            assert r.exit_code == 0, r.output
            assert json.loads(r.stdout.strip().splitlines()[-1])["reranker"] == str(
                own / "reranker")
            meta = json.loads((own / "reranker" / "matcher.json").read_text())
            assert meta["role"] == "reranker" and meta["trained_on"]["sources"] == ["self"]
            assert meta["trained_on"]["started_from"] == str(start / "reranker")
            r = run(*ask_args(tiny), "--planner", str(own))
            assert r.exit_code == 0, r.output
            assert json.loads(r.stdout)["planner"] == "matcher (self) + re-ranker"
            shutil.rmtree(start / "reranker")
            r = run("train", "planner", "--self", "--from", str(start), "-o", str(own),
                    "--anchors", "20", "--epochs", "1")
            assert r.exit_code == 0, r.output
            assert not (own / "reranker").exists()  # the start has none: neither has it
        finally:
            get_settings.cache_clear()

