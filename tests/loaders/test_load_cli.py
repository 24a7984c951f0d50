"""The `load` / `stats` commands as a user runs them (`talent load` / `talent stats`, run as
`python -m talent_core` in a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

from loader_helpers import BAD, FIXTURES, run_cli


def test_load_then_stats_json(tmp_path: Path):
    r = run_cli(["load", str(FIXTURES / "metaqa" / "kb.txt"), "--format", "metaqa",
                 "--batch-size", "100"], tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "loaded 377" in r.stdout
    committed = [x for x in r.stderr.splitlines() if "committed batch" in x]
    assert len(committed) == 4 and committed[-1].endswith("kb.txt:377")
    s = run_cli(["stats", "--json"], tmp_path)
    assert s.returncode == 0, s.stderr
    got = json.loads(s.stdout)
    assert {k: got[k] for k in ("entities", "relations", "triples")} == {
        "entities": 197,
        "relations": 9,
        "triples": 377,
    }
    # loading the same file again: same counts
    again = run_cli(["load", str(FIXTURES / "metaqa" / "kb.txt"), "--json"], tmp_path)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["new_triples"] == 0 and report["store_after"]["triples"] == 377
    assert json.loads(run_cli(["stats", "--json"], tmp_path).stdout)["triples"] == 377


def test_bad_input_exit_code_and_message(tmp_path: Path):
    r = run_cli(["load", str(BAD / "bad_utf8.txt"), "--format", "metaqa"], tmp_path)
    assert r.returncode == 1
    assert f"error: {BAD / 'bad_utf8.txt'}:3: invalid UTF-8" in r.stderr
    assert json.loads(run_cli(["stats", "--json"], tmp_path).stdout)["triples"] == 0


def test_empty_file_exit_code(tmp_path: Path):
    r = run_cli(["load", str(BAD / "empty.txt"), "--format", "metaqa"], tmp_path)
    assert r.returncode == 1 and "empty file" in r.stderr


def test_skip_with_rejects_file(tmp_path: Path):
    rej = tmp_path / "rejects.jsonl"
    r = run_cli(["load", str(BAD / "mixed_errors.txt"), "--format", "metaqa", "--on-error",
                 "skip", "--rejects", str(rej)], tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["line"] for x in rej.read_text().splitlines()] == [3, 5, 6, 7]
    assert "rejected 4" in r.stdout
    assert json.loads(run_cli(["stats", "--json"], tmp_path).stdout)["triples"] == 5


def test_usage_errors(tmp_path: Path):
    r = run_cli(["load", str(BAD / "mixed_errors.txt"), "--format", "nope"], tmp_path)
    assert r.returncode == 2
    r = run_cli(["load", str(BAD / "mixed_errors.txt"), "-f", "metaqa", "--rejects", "x.jsonl"],
                tmp_path)  # fmt: skip
    assert r.returncode == 2 and "--on-error skip" in r.stderr


def test_rog_questions_file(tmp_path: Path):
    src = FIXTURES / "rog" / "webqsp_toy.jsonl"
    r = run_cli(["load", str(src), "--format", "rog", "--dataset", "toy"], tmp_path)
    assert r.returncode == 0, r.stderr
    q = tmp_path / "questions" / "toy.jsonl"
    assert len(q.read_text(encoding="utf-8").splitlines()) == 35
