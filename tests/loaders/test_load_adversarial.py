"""Adversarial input (issue 15): every case fails loudly with file:line, or loads exactly;
nothing is lost silently, nothing is half-written, no traceback reaches the user.

Cases: a stray CSV quote (bounded, the rest of the file still loads), rows with too many
fields, control characters and lone surrogates in names, a BOM inside a concatenated file,
deeply nested JSON, data after a JSON array, a .jsonl whose first line is an array, and a
`--rejects` path naming a directory (refused before the store is touched)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from loader_helpers import FakeStore, run_cli

from loaders.api import load_path
from loaders.base import BadRow, LoadError, Row
from loaders.triples import TriplesReader, parse_columns


def load(path, fmt, store, tmp_path: Path, **kw):
    from talent_core.config import Settings

    return load_path(
        path,
        fmt,
        store=store,
        embedder=HashEmbedder(16),
        settings=Settings(data_dir=tmp_path / "data"),
        progress=False,
        **kw,
    )


def rejects_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def items(reader) -> list:
    try:
        return list(reader)
    finally:
        reader.close()


# --- 1. a stray quote in CSV triples ---------------------------------------------------


def _stray_quote_csv(tmp_path: Path, good: int = 6000) -> Path:
    p = tmp_path / "stray.csv"
    rows = ["head,relation,tail", 'x0,r,"y0']  # line 2: a quote that never closes
    rows += [f"e{i},r{i % 7},e{i + 1}" for i in range(good)]
    p.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return p


def test_stray_quote_costs_one_row_in_skip_mode(tmp_path: Path):
    store = FakeStore()
    p = _stray_quote_csv(tmp_path)
    rej = tmp_path / "rej.jsonl"
    rep = load(p, "triples", store, tmp_path, on_error="skip", rejects=rej, batch_size=1000)
    assert rep.rejected == 1
    assert rep.loaded == 6000 and len(store.triples) == 6000  # before: 514 of 6000 kept
    (r,) = rejects_of(rej)
    assert r["file"] == str(p) and r["line"] == 2
    assert "unterminated quoted field" in r["reason"] and "stray" in r["reason"]
    assert r["raw"].startswith('x0,r,"y0')


def test_stray_quote_fails_at_its_line_in_fail_mode(tmp_path: Path):
    store = FakeStore()
    p = _stray_quote_csv(tmp_path, good=100)
    with pytest.raises(LoadError, match=r"stray.csv:2: unterminated quoted field"):
        load(p, "triples", store, tmp_path)
    assert store.triples == set()


def test_stray_quote_at_end_of_file_and_in_the_middle(tmp_path: Path):
    p = tmp_path / "t.csv"
    lines = ["h,r,t", "a,b,c", 'd,"e,f', "g,h,i", 'j,k,"l', "m,n,o"]
    p.write_text("\n".join(lines) + "\n")
    got = items(TriplesReader(p))
    assert [(x.line, type(x).__name__) for x in got] == [
        (2, "Row"), (3, "BadRow"), (4, "Row"), (5, "BadRow"), (6, "Row"),
    ]  # fmt: skip
    assert [x.head for x in got if isinstance(x, Row)] == ["a", "g", "m"]


def test_quoted_field_length_is_bounded_in_bytes(tmp_path: Path):
    p = tmp_path / "t.csv"
    lines = ["h,r,t", 'a,b,"' + "x" * 60, "y" * 60, 'z",w', "p,q,s"]
    p.write_text("\n".join(lines) + "\n")
    got = items(TriplesReader(p, max_line_length=100))
    bad = [x for x in got if isinstance(x, BadRow)]
    assert bad[0].line == 2 and "unterminated quoted field" in bad[0].reason
    assert [x.head for x in got if isinstance(x, Row)] == ["p"]


def test_legitimate_multiline_field_within_bounds_is_kept(tmp_path: Path):
    p = tmp_path / "t.csv"
    p.write_text('h,r,t\na,note,"two\nlines"\nb,r,c\n')
    store = FakeStore()
    rep = load(p, "triples", store, tmp_path)
    assert ("a", "note", "two\nlines") in store.triples and rep.multiline_rows == 1
    got = items(TriplesReader(p, max_record_lines=1))
    assert [type(x).__name__ for x in got] == ["BadRow", "BadRow", "Row"]  # 2, 3, 4


# --- 2. too many fields -------------------------------------------------------------------


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_row_with_too_many_fields_is_a_bad_row(tmp_path: Path, on_error: str):
    p = tmp_path / "t.csv"
    p.write_text("head,relation,tail\na,r,b\nAda, Countess of Lovelace,r,c\nd,r,e\n")
    store = FakeStore()
    rej = tmp_path / "rej.jsonl"
    if on_error == "fail":
        with pytest.raises(LoadError, match=r"t.csv:3: too many fields: expected 3"):
            load(p, "triples", store, tmp_path)
        assert store.triples == set()
        return
    rep = load(p, "triples", store, tmp_path, on_error="skip", rejects=rej)
    assert store.triples == {("a", "r", "b"), ("d", "r", "e")} and rep.rejected == 1
    (r,) = rejects_of(rej)
    assert r["line"] == 3 and r["reason"].startswith("too many fields: expected 3")


def test_field_count_without_header_and_with_optional_columns(tmp_path: Path):
    p = tmp_path / "t.tsv"
    p.write_text("a\tr\tb\nc\tr\td\textra\ne\tr\tf\n")
    got = items(TriplesReader(p, columns=parse_columns("head=0,relation=1,tail=2")))
    assert [(x.line, type(x).__name__) for x in got] == [(1, "Row"), (2, "BadRow"), (3, "Row")]
    p.write_text("h\tr\tt\th_name\nx\tr\ty\tX\nz\tr\tw\n")
    cols = parse_columns("head=h,relation=r,tail=t,head_name=h_name")
    got = items(TriplesReader(p, columns=cols))
    assert isinstance(got[0], Row) and got[0].head_name == "X"
    assert isinstance(got[1], BadRow) and got[1].reason.startswith("missing fields: expected 4")


# --- 3. control characters and lone surrogates in names ----------------------------------


@pytest.mark.parametrize("name", ["a\x01b", "a\x1b[31mb", "a\x7fb", "a\x9bb", "a\x00b"])
def test_control_character_names_are_rejected_up_front(tmp_path: Path, name: str):
    p = tmp_path / "kb.txt"
    p.write_text(f"x|r|y\n{name}|r|z\nu|r|v\n", encoding="utf-8")
    store = FakeStore()
    with pytest.raises(LoadError, match=r"kb.txt:2: head contains .*U\+00|NUL"):
        load(p, "metaqa", store, tmp_path)
    assert store.triples == set()  # nothing of the batch
    rej = tmp_path / "rej.jsonl"
    rep = load(p, "metaqa", store, tmp_path, on_error="skip", rejects=rej)
    assert rep.rejected == 1 and store.triples == {("x", "r", "y"), ("u", "r", "v")}
    assert all("\x01" not in k and "\x1b" not in k for k in store.entities)
    assert rejects_of(rej)[0]["raw"] == f"{name}|r|z"  # the rejects file keeps it exactly


def test_whitespace_controls_inside_names_are_kept(tmp_path: Path):
    p = tmp_path / "t.tsv"
    p.write_text('h\tr\tt\n"a\tb"\tr\t"c\rd"\n')
    store = FakeStore()
    load(p, "triples", store, tmp_path)
    assert store.triples == {("a\tb", "r", "c\rd")}


def test_display_name_with_control_character_is_rejected(tmp_path: Path):
    p = tmp_path / "t.csv"
    p.write_text("head,relation,tail,head_name\nq1,r,q2,Ada\x07\n", encoding="utf-8")
    with pytest.raises(LoadError, match=r"t.csv:2: head name contains a control character U\+0007"):
        load(p, "triples", FakeStore(), tmp_path)


# --- 4. a BOM inside a concatenated file ------------------------------------------------


def test_bom_of_a_concatenated_file_is_not_part_of_a_key(tmp_path: Path):
    bom = "\ufeff"
    p = tmp_path / "cat.csv"
    p.write_text(f"{bom}head,relation,tail\na1,r,b1\n{bom}head,relation,tail\na2,r,b2\n")
    store = FakeStore()
    rep = load(p, "triples", store, tmp_path)
    assert store.triples == {("a1", "r", "b1"), ("a2", "r", "b2")} and rep.rejected == 0
    m = tmp_path / "kb.txt"
    m.write_text(f"{bom}a1|r|b1\n{bom}a2|r|b2\n")
    store = FakeStore()
    load(m, "metaqa", store, tmp_path)
    assert store.triples == {("a1", "r", "b1"), ("a2", "r", "b2")}
    assert not any(bom in k for k in store.entities)


# --- 5. JSON ------------------------------------------------------------------------------


def _rog(i: int, graph: list | None = None, question: str | None = None) -> dict:
    return {
        "id": f"q{i}",
        "question": question or f"question {i}",
        "answer": [f"b{i}"],
        "q_entity": [f"a{i}"],
        "a_entity": [f"b{i}"],
        "graph": graph if graph is not None else [[f"a{i}", "rel", f"b{i}"]],
    }


def test_deeply_nested_jsonl_line_is_a_bad_row(tmp_path: Path):
    p = tmp_path / "deep.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    p.write_text("\n".join([json.dumps(_rog(1)), deep, json.dumps(_rog(2))]) + "\n")
    store = FakeStore()
    with pytest.raises(LoadError, match=r"deep.jsonl:2: invalid JSON: nested more than"):
        load(p, "rog", store, tmp_path)
    rej = tmp_path / "rej.jsonl"
    rep = load(p, "rog", store, tmp_path, on_error="skip", rejects=rej)
    assert rep.rejected == 1 and rep.records == 2 and len(store.triples) == 2


def test_deeply_nested_json_array_element_is_a_clear_error(tmp_path: Path):
    p = tmp_path / "deep.json"
    p.write_text("[" + json.dumps(_rog(1)) + ", " + "[" * 100_000 + "]" * 100_000 + "]")
    for mode in ("fail", "skip"):
        with pytest.raises(LoadError, match=r"deep.json:1: invalid JSON: element nested"):
            load(p, "rog", FakeStore(), tmp_path, on_error=mode, rejects=None)


@pytest.mark.parametrize("where", ["graph", "question", "answer"])
def test_lone_surrogate_is_a_bad_row_not_a_traceback(tmp_path: Path, where: str):
    p = tmp_path / "s.jsonl"
    bad = (
        _rog(2, graph=[["a2", "rel", "\ud800x"]]) if where == "graph"
        else _rog(2, question="who is \ud800") if where == "question"
        else {**_rog(2), "answer": ["\udfff"]}
    )  # fmt: skip
    # json.dumps escapes the surrogate as \ud800: the file is valid UTF-8
    p.write_text("\n".join(json.dumps(r) for r in (_rog(1), bad, _rog(3))) + "\n")
    with pytest.raises(LoadError, match=r"s.jsonl:2: .*lone surrogate U\+D[8F]"):
        load(p, "rog", FakeStore(), tmp_path)
    store = FakeStore()
    rej = tmp_path / "rej.jsonl"
    side = tmp_path / "q.jsonl"
    rep = load(p, "rog", store, tmp_path, on_error="skip", rejects=rej, side_output_path=side)
    assert rep.rejected == 1 and ("a1", "rel", "b1") in store.triples
    (r,) = rejects_of(rej)  # valid JSON; the surrogate reads back as written
    assert r["line"] == 2 and "surrogate" in r["reason"]
    questions = [json.loads(x) for x in side.read_text(encoding="utf-8").splitlines()]
    assert [q["id"] for q in questions] == (
        ["q1", "q2", "q3"] if where == "graph" else ["q1", "q3"]
    )


def test_data_after_the_json_array_is_an_error(tmp_path: Path):
    p = tmp_path / "a.json"
    p.write_text(json.dumps([_rog(1)]) + "\n" + json.dumps([_rog(2)]) + "\n")
    for mode in ("fail", "skip"):
        with pytest.raises(LoadError, match=r"a.json:2: data after the end of the top-level"):
            load(p, "rog", FakeStore(), tmp_path, on_error=mode)
    p.write_text(json.dumps([_rog(1)]) + "\n\n  \n")  # trailing whitespace is fine
    store = FakeStore()
    load(p, "rog", store, tmp_path)
    assert store.triples == {("a1", "rel", "b1")}


def test_jsonl_whose_first_line_is_an_array_keeps_the_later_records(tmp_path: Path):
    p = tmp_path / "x.jsonl"
    p.write_text("\n".join([json.dumps([_rog(1)]), json.dumps(_rog(2)), json.dumps(_rog(3))]))
    with pytest.raises(LoadError, match=r"x.jsonl:1: record is a JSON list"):
        load(p, "rog", FakeStore(), tmp_path)
    store = FakeStore()
    rep = load(p, "rog", store, tmp_path, on_error="skip", rejects=tmp_path / "r.jsonl")
    assert rep.records == 2 and store.triples == {("a2", "rel", "b2"), ("a3", "rel", "b3")}


def test_rejects_naming_a_directory_fails_before_anything_is_written(tmp_path: Path):
    p = tmp_path / "kb.txt"
    p.write_text("a|r|b\n")
    store = FakeStore()
    d = tmp_path / "somedir"
    d.mkdir()
    with pytest.raises(LoadError, match="rejects file: is a directory"):
        load(p, "metaqa", store, tmp_path, on_error="skip", rejects=d)
    assert store.calls == [] and store.dimension is None  # not even the schema


def test_dataset_name_cannot_leave_the_questions_folder(tmp_path: Path):
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(_rog(1)) + "\n")
    with pytest.raises(LoadError, match="--dataset"):
        load(p, "rog", FakeStore(), tmp_path, dataset="../../escaped")
    assert not (tmp_path / "escaped.jsonl").exists()


# --- the CLI: clear messages, no traceback, escaped terminal output -----------------------


def test_cli_rejects_directory_and_prints_control_characters_escaped(tmp_path: Path):
    d = tmp_path / "rejdir"
    d.mkdir()
    kb = tmp_path / "kb.txt"
    kb.write_text("a|r|b\n")
    r = run_cli(["load", str(kb), "--format", "metaqa", "--on-error", "skip", "--rejects",
                 str(d), "--no-progress"], tmp_path / "data")  # fmt: skip
    assert r.returncode == 1 and "is a directory" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "data" / "falkordb.sock").exists()  # the store was never started
    kb.write_text("a\x1b]0;pwned\x07|r|b\n", encoding="utf-8")
    r = run_cli(["load", str(kb), "--format", "metaqa", "--no-progress"], tmp_path / "data")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "U+001B" in r.stderr and "\\x1b]0;pwned\\x07" in r.stderr
    sur = tmp_path / "s.jsonl"
    sur.write_text(json.dumps(_rog(1, graph=[["\ud800", "r", "b"]])) + "\n")
    r = run_cli(["load", str(sur), "--format", "rog", "--no-progress"], tmp_path / "data")
    assert r.returncode == 1 and "Traceback" not in r.stderr and "U+D800" in r.stderr
