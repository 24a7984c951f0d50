"""Adversarial input (issue 15): every case fails loudly with file:line, or loads exactly;
nothing is lost silently, nothing is half-written, no traceback reaches the user.

Cases: a stray CSV quote (bounded, the rest of the file still loads), rows with too many
fields, control characters and lone surrogates in names, a BOM inside a concatenated file,
deeply nested JSON, data after a JSON array, a .jsonl whose first line is an array, and a
`--rejects` path naming a directory (refused before the store is touched).

Issue 26: a `--rejects` (or side output) that is the input is refused before anything is
written (exit 2), rejects files and their new folders are owner-only, and a full disk (the
rejects file's, or the store's: its server exits on a short AOF write) stops the load with
`file: ... no space left on device`, exit 2, no traceback and no restart-and-retry loop."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from loader_helpers import FakeStore, run_cli, small_tmpfs

from talent_core.errors import LoadError, OutputError
from talent_core.loaders.api import load_path
from talent_core.loaders.base import BadRow, Row
from talent_core.loaders.triples import TriplesReader, parse_columns


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


# --- issue 26: outputs that are the input, owner-only outputs, a full disk -----------------


def _kb_with_bad_rows(path: Path, rows: int = 2000, every: int = 10) -> bytes:
    """A MetaQA file whose every `every`-th row is bad (the rejects file gets rows)."""
    lines = [f"bad row {i}" if i % every == every - 1 else f"e{i}|r{i % 5}|e{i + 1}"
             for i in range(rows)]  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path.read_bytes()


def _rejects_naming_the_input(tmp_path: Path, kb: Path, how: str) -> Path:
    if how == "same path":
        return kb
    if how == "hard link":
        os.link(kb, tmp_path / "link.jsonl")
        return tmp_path / "link.jsonl"
    if how == "symlink":
        (tmp_path / "sym.jsonl").symlink_to(kb)
        return tmp_path / "sym.jsonl"
    if how == "dir/..":
        return tmp_path / "nowhere" / ".." / kb.name
    assert how == "its .tmp"  # the rejects are written to <rejects>.tmp first
    return kb.with_name(kb.name.removesuffix(".tmp"))


@pytest.mark.parametrize("how", ["same path", "hard link", "symlink", "dir/..", "its .tmp"])
def test_rejects_file_that_is_the_input_is_refused(tmp_path: Path, how: str):
    kb = tmp_path / ("kb.txt.tmp" if how == "its .tmp" else "kb.txt")
    before = _kb_with_bad_rows(kb)
    rejects = _rejects_naming_the_input(tmp_path, kb, how)
    store = FakeStore()
    with pytest.raises(OutputError, match=r"rejects file: .* is the input file .*kb\.txt"):
        load(kb, "metaqa", store, tmp_path, on_error="skip", rejects=rejects)
    assert kb.read_bytes() == before  # before: replaced by the rejects (or truncated)
    assert store.calls == [] and store.dimension is None  # refused before any write
    assert not (tmp_path / "nowhere").exists()


def test_side_output_that_is_the_input_is_refused(tmp_path: Path):
    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps(_rog(1)) + "\n")
    before = p.read_bytes()
    with pytest.raises(OutputError, match="side output file: .* is the input file"):
        load(p, "rog", FakeStore(), tmp_path, side_output_path=p)
    assert p.read_bytes() == before


def test_cli_rejects_naming_the_input_exits_2_and_keeps_it(tmp_path: Path):
    kb = tmp_path / "kb.txt"
    before = _kb_with_bad_rows(kb, rows=20_001)  # the 20,001-line file
    r = run_cli(["load", str(kb), "--format", "metaqa", "--on-error", "skip", "--rejects",
                 str(kb), "--no-progress"], tmp_path / "data")  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert f"error: {kb}: rejects file: {kb} is the input file" in r.stderr
    assert "Traceback" not in r.stderr
    assert kb.read_bytes() == before
    assert not (tmp_path / "data" / "falkordb.sock").exists()  # the store was never started


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_rejects_file_and_its_new_folders_are_owner_only(tmp_path: Path):
    kb = tmp_path / "kb.txt"
    _kb_with_bad_rows(kb, rows=50)
    rejects = tmp_path / "out" / "deeper" / "rej.jsonl"
    old = os.umask(0o022)  # the usual umask: files 0644, folders 0755
    try:
        rep = load(kb, "metaqa", FakeStore(), tmp_path, on_error="skip", rejects=rejects)
    finally:
        os.umask(old)
    assert rep.rejected == 5
    assert _mode(rejects) == 0o600  # before: 0644 (world-readable KG text)
    assert _mode(rejects.parent) == 0o700 and _mode(tmp_path / "out") == 0o700


def _full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every output file the loader opens writes to /dev/full (ENOSPC on write)."""
    from talent_core.loaders import base as loader_base

    def opener(path: str, flags: int) -> int:
        return os.open("/dev/full", os.O_WRONLY)

    monkeypatch.setattr(loader_base, "owner_only", opener)


@pytest.mark.parametrize("rows", [50, 20_000])  # fails at the final flush / while loading
def test_rejects_file_on_a_full_disk_stops_with_a_clear_error(tmp_path, monkeypatch, rows):
    kb = tmp_path / "kb.txt"
    _kb_with_bad_rows(kb, rows=rows)
    rejects = tmp_path / "rej.jsonl"
    _full_disk(monkeypatch)
    with pytest.raises(OutputError) as e:
        load(kb, "metaqa", FakeStore(), tmp_path, on_error="skip", rejects=rejects)
    assert str(e.value) == (
        f"{rejects}: rejects file: cannot write {rejects}.tmp: no space left on device"
    )
    assert not rejects.exists() and not Path(f"{rejects}.tmp").exists()


def test_store_out_of_space_stops_the_load_naming_the_file(tmp_path: Path):
    class FullStore(FakeStore):
        def upsert_triples(self, edges):
            if any(c[0] == "triples" for c in self.calls):  # the second batch
                raise OSError(errno.ENOSPC, "no space left on device: the server stopped",
                              "/data/appendonlydir")  # fmt: skip
            super().upsert_triples(edges)

    kb = tmp_path / "kb.txt"
    _kb_with_bad_rows(kb, rows=300, every=10**9)
    store = FullStore()
    with pytest.raises(OutputError) as e:
        load(kb, "metaqa", store, tmp_path, batch_size=100)
    assert str(e.value) == "/data/appendonlydir: no space left on device: the server stopped"
    assert len(store.triples) == 100  # the batch committed before it stays


def _server_log(data_dir: Path, *runs: list[str]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    text = ""
    for lines in runs:
        text += "1:C 02 Dec 2026 16:16:44.239 * oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo\n"
        text += "".join(f"1:M 02 Dec 2026 16:16:45.402 # {x}\n" for x in lines)
    (data_dir / "falkordb.log").write_text(text)


SHORT_WRITE = "Short write while writing to the AOF file: (nwritten=2068422, expected=2724432)"


def test_embedded_store_does_not_restart_a_server_that_died_of_a_full_disk(tmp_path: Path):
    """The server exits on a short AOF write (appendfsync always); the store used to
    restart it and retry, and the retry died with a ConnectionError traceback."""
    import redis

    from talent_core.store.falkordb import FalkorDBStore

    data = tmp_path / "data"
    _server_log(data, ["Ready to accept connections unix"],
                [SHORT_WRITE, "Can't recover from AOF write error when the AOF fsync policy "
                 "is 'always'. Exiting..."])  # fmt: skip
    store = FalkorDBStore(data)
    connects = []

    class Gone:
        def query(self, *a, **k):
            raise redis.ConnectionError("Connection closed by server.")

    def connect():
        connects.append(1)
        return Gone()

    store._connect = connect  # type: ignore[method-assign]
    with pytest.raises(OSError) as e:
        store._call(lambda g: g.query("RETURN 1"))
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(
        store.data_dir / "appendonlydir"
    )
    assert "no space left on device" in str(e.value) and SHORT_WRITE in str(e.value)
    assert connects == [1]  # no restart, no retry


def test_disk_full_is_read_from_the_servers_last_run_only(tmp_path: Path):
    from talent_core.store.falkordb import disk_full_error
    from talent_core.store.falkordb_server import EmbeddedServer

    data = tmp_path / "data"
    _server_log(data, [SHORT_WRITE], ["Ready to accept connections unix"])
    assert disk_full_error(EmbeddedServer(data)) is None  # an old run's, space since freed
    _server_log(data, ["Ready to accept connections unix"],
                ["Error writing to the AOF file: No space left on device"])  # fmt: skip
    assert disk_full_error(EmbeddedServer(data)).errno == errno.ENOSPC


@pytest.mark.parametrize("bulk", ["--bulk", "--no-bulk"])
def test_cli_load_into_a_full_disk_names_it_and_stops(tmp_path: Path, bulk: str):
    """A real full disk: the data dir on a 2 MB tmpfs, a load whose AOF needs more."""
    kb = tmp_path / "kb.txt"
    kb.write_text(
        "".join(
            f"entity number {i} with a longish name|relation_{i % 50}|other "
            f"entity {i * 7 % 39999} also long\n"
            for i in range(40_000)
        )
    )
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        data = disk / "data"
        r = run_cli(["load", str(kb), "--format", "metaqa", bulk, "--no-progress"], data)
        log = (data / "falkordb.log").read_text()
    assert r.returncode == 2, r.stderr
    assert f"error: {data / 'appendonlydir'}: no space left on device" in r.stderr
    assert "Short write while writing to the AOF file" in r.stderr  # the server's reason
    assert "Traceback" not in r.stderr
    assert log.count("Redis is starting") == 1  # before: restarted and retried (3 starts)


def test_cli_rejects_on_a_full_disk_names_the_file(tmp_path: Path):
    kb = tmp_path / "kb.txt"
    _kb_with_bad_rows(kb, rows=6000, every=1)  # ~150 kB of rejects
    kb.write_text("a|r|b\n" + kb.read_text())
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        rejects = disk / "sub" / "rej.jsonl"
        r = run_cli(["load", str(kb), "--format", "metaqa", "--on-error", "skip", "--rejects",
                     str(rejects), "--dry-run", "--no-progress"], tmp_path / "data")  # fmt: skip
        left = sorted(p.name for p in rejects.parent.iterdir())
    assert r.returncode == 2, r.stderr
    assert (
        f"error: {rejects}: rejects file: cannot write {rejects}.tmp: no space left on "
        "device" in r.stderr
    )
    assert "Traceback" not in r.stderr and left == []  # nothing half-written left behind
