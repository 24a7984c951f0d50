"""Bad input, each case in fail mode (file:line: reason, nothing of the batch written) and
in skip mode (every bad row in the rejects file, the rest loaded). Bad gzip data (issue 26:
truncated, not gzip, a CRC error, corrupt deflate data) and a gzip bomb past
`max_decompressed_bytes` are file-level errors: `file: reason`, exit 1, never a traceback."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from loader_helpers import BAD, FIXTURES, FakeStore, run_cli

from talent_core.errors import LoadError
from talent_core.loaders.api import load_path


def load(path, fmt, store, tmp_path: Path, **kw):
    from talent_core.config import Settings

    return load_path(
        path,
        fmt,
        store=store,
        embedder=kw.pop("embedder", HashEmbedder(16)),
        settings=Settings(data_dir=tmp_path / "data"),
        progress=False,
        **kw,
    )


def rejects_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_empty_file(fake_store: FakeStore, tmp_path: Path):
    for on_error in ("fail", "skip"):
        with pytest.raises(LoadError, match=r"empty.txt: empty file"):
            load(BAD / "empty.txt", "metaqa", fake_store, tmp_path, on_error=on_error)
    assert fake_store.calls == []


def test_file_with_only_blank_lines(fake_store: FakeStore, tmp_path: Path):
    with pytest.raises(LoadError, match=r"blank_lines_only.txt: empty input: no data rows"):
        load(BAD / "blank_lines_only.txt", "metaqa", fake_store, tmp_path)
    assert fake_store.triples == set()


def test_missing_file(fake_store: FakeStore, tmp_path: Path):
    with pytest.raises(LoadError, match="no such file"):
        load(tmp_path / "nope.txt", "metaqa", fake_store, tmp_path)


def test_wrong_delimiter_fails_at_line_1_and_writes_nothing(fake_store, tmp_path):
    with pytest.raises(LoadError) as ei:
        load(BAD / "metaqa_tabs.txt", "metaqa", fake_store, tmp_path)
    msg = str(ei.value)
    assert msg.startswith(f"{BAD / 'metaqa_tabs.txt'}:1: expected 3 fields")
    assert "wrong delimiter? the line has tabs" in msg
    assert fake_store.triples == set() and fake_store.entities == {}


def test_fail_writes_nothing_of_the_failing_batch_and_nothing_after(fake_store, tmp_path):
    # batch 1 = lines 1-2 (committed), batch 2 would be lines 3-4: line 3 is bad
    committed = []
    with pytest.raises(LoadError, match=r"metaqa_mixed_delimiters.txt:3: "):
        load(
            BAD / "metaqa_mixed_delimiters.txt",
            "metaqa",
            fake_store,
            tmp_path,
            batch_size=2,
            on_commit=committed.append,
        )
    assert fake_store.triples == {
        ("Alien", "directed_by", "Ridley Scott"),
        ("Alien", "release_year", "1979"),
    }
    assert [c.triples_committed for c in committed] == [2]
    assert committed[0].through_line == 2
    # with one batch for the whole file, nothing at all is written
    store2 = FakeStore()
    with pytest.raises(LoadError):
        load(BAD / "metaqa_mixed_delimiters.txt", "metaqa", store2, tmp_path, batch_size=100)
    assert store2.calls == []


def test_wrong_delimiter_in_csv_header(fake_store, tmp_path):
    with pytest.raises(LoadError) as ei:
        load(BAD / "triples_tsv_header.csv", "triples", fake_store, tmp_path, delimiter=",")
    msg = str(ei.value)
    assert ":1: missing columns" in msg and "wrong delimiter? the header has tabs" in msg


def test_missing_columns_in_header(fake_store, tmp_path):
    with pytest.raises(LoadError, match=r"triples_missing_column.csv:1: missing columns: .*tail"):
        load(BAD / "triples_missing_column.csv", "triples", fake_store, tmp_path)
    with pytest.raises(LoadError, match=r":1: missing columns: header has no tail='obj'"):
        load(
            FIXTURES / "triples" / "sample.csv",
            "triples",
            fake_store,
            tmp_path,
            columns="head=subject,relation=predicate,tail=obj",
        )
    assert fake_store.calls == []


def test_missing_columns_in_a_row(fake_store, tmp_path):
    with pytest.raises(LoadError, match=r"triples_short_rows.csv:3: missing columns"):
        load(BAD / "triples_short_rows.csv", "triples", fake_store, tmp_path)
    assert fake_store.triples == set()
    rej = tmp_path / "rej.jsonl"
    rep = load(
        BAD / "triples_short_rows.csv", "triples", fake_store, tmp_path, on_error="skip",
        rejects=rej,
    )  # fmt: skip
    assert (rep.loaded, rep.rejected) == (2, 1)
    r = rejects_of(rej)
    assert [(x["line"], x["raw"]) for x in r] == [(3, "Ada Lovelace,father")]
    assert r[0]["reason"].startswith("missing columns: expected at least 3 fields, found 2")


def test_bad_utf8(fake_store, tmp_path):
    with pytest.raises(LoadError, match=r"bad_utf8.txt:3: invalid UTF-8 at byte 2"):
        load(BAD / "bad_utf8.txt", "metaqa", fake_store, tmp_path)
    assert fake_store.triples == set()
    rej = tmp_path / "rej.jsonl"
    rep = load(BAD / "bad_utf8.txt", "metaqa", fake_store, tmp_path, on_error="skip", rejects=rej)
    assert (rep.loaded, rep.rejected) == (3, 1)
    (r,) = rejects_of(rej)
    assert r["line"] == 3 and r["raw"] == "Am\\xe9lie|release_year|2001"
    assert ("Amélie", "has_genre", "Comedy") in fake_store.triples


def test_overlong_line(fake_store, tmp_path):
    with pytest.raises(
        LoadError, match=r"overlong_line.txt:2: line longer than the maximum of 1000"
    ):
        load(BAD / "overlong_line.txt", "metaqa", fake_store, tmp_path, max_line_length=1000)
    rej = tmp_path / "rej.jsonl"
    rep = load(
        BAD / "overlong_line.txt", "metaqa", fake_store, tmp_path, max_line_length=1000,
        on_error="skip", rejects=rej,
    )  # fmt: skip
    assert (rep.loaded, rep.rejected) == (2, 1)
    (r,) = rejects_of(rej)
    assert r["line"] == 2 and len(r["raw"]) < 300  # an excerpt, not the 3 kB line
    # the default limit (1 MiB) accepts it
    rep = load(BAD / "overlong_line.txt", "metaqa", FakeStore(), tmp_path)
    assert rep.loaded == 3


def test_self_loops_kept_and_counted_by_default_or_rejected(fake_store, tmp_path):
    rep = load(BAD / "self_loops.txt", "metaqa", fake_store, tmp_path)
    assert (rep.loaded, rep.self_loops, rep.rejected) == (3, 1, 0)
    assert ("Malcolm X", "written_by", "Malcolm X") in fake_store.triples
    store = FakeStore()
    with pytest.raises(LoadError, match=r"self_loops.txt:2: self-loop: head and tail are the same"):
        load(BAD / "self_loops.txt", "metaqa", store, tmp_path, self_loops="reject")
    assert store.triples == set()
    rep = load(
        BAD / "self_loops.txt", "metaqa", store, tmp_path, self_loops="reject", on_error="skip",
        rejects=tmp_path / "r.jsonl",
    )  # fmt: skip
    assert (rep.loaded, rep.rejected) == (2, 1)


@pytest.mark.parametrize("batch_size", [100, 2])
def test_duplicates_are_not_errors(fake_store, tmp_path, batch_size):
    rep = load(BAD / "duplicates.txt", "metaqa", fake_store, tmp_path, batch_size=batch_size)
    assert len(fake_store.triples) == 3 and rep.new_triples == 3 and rep.rejected == 0
    assert rep.rows_read == 6
    if batch_size == 100:
        # within a batch: dropped before writing and counted
        assert (rep.loaded, rep.duplicates) == (3, 3)
    else:
        # across batches: MERGE absorbs them; loaded - new_triples says how many
        assert rep.loaded + rep.duplicates == 6 and rep.loaded - rep.new_triples > 0


def test_empty_names(fake_store, tmp_path):
    with pytest.raises(LoadError, match=r"empty_names.txt:2: empty head"):
        load(BAD / "empty_names.txt", "metaqa", fake_store, tmp_path)
    rej = tmp_path / "rej.jsonl"
    rep = load(
        BAD / "empty_names.txt", "metaqa", fake_store, tmp_path, on_error="skip", rejects=rej
    )
    assert [(r["line"], r["reason"]) for r in rejects_of(rej)] == [
        (2, "empty head"),
        (3, "empty relation"),
        (4, "empty tail"),
        (5, "empty head"),
    ]
    assert (rep.loaded, rep.duplicates, rep.rejected) == (2, 0, 4)
    assert fake_store.triples == {
        ("Alien", "directed_by", "Ridley Scott"),
        ("Alien", "has_genre", "Horror"),
    }


def test_skip_mode_rejects_every_bad_row_and_loads_the_rest(fake_store, tmp_path):
    rej = tmp_path / "out" / "rejects.jsonl"
    rep = load(
        BAD / "mixed_errors.txt", "metaqa", fake_store, tmp_path, on_error="skip", rejects=rej,
        batch_size=3,
    )  # fmt: skip
    rows = rejects_of(rej)
    assert [r["line"] for r in rows] == [3, 5, 6, 7]
    assert rows[0] == {
        "file": str(BAD / "mixed_errors.txt"),
        "line": 3,
        "reason": "expected 3 fields 'head|relation|tail', found 1",
        "raw": "Aliens starred_actors Sigourney Weaver",
    }
    assert rows[2]["reason"] == "empty tail"
    assert (rep.rows_read, rep.rejected) == (10, 4)
    assert len(fake_store.triples) == 5
    assert rep.loaded + rep.duplicates == 6
    assert not (rej.parent / "rejects.jsonl.tmp").exists()


def test_all_rows_rejected_is_an_error_even_in_skip_mode(fake_store, tmp_path):
    with pytest.raises(LoadError, match="no valid rows: all 2 data rows were rejected"):
        load(BAD / "metaqa_tabs.txt", "metaqa", fake_store, tmp_path, on_error="skip",
             rejects=tmp_path / "r.jsonl")  # fmt: skip
    assert len(rejects_of(tmp_path / "r.jsonl")) == 2  # kept: they explain the failure


def test_rog_bad_records(fake_store, tmp_path):
    with pytest.raises(LoadError, match=r"rog_bad.jsonl:2: invalid JSON"):
        load(BAD / "rog_bad.jsonl", "rog", fake_store, tmp_path)
    assert not (tmp_path / "data" / "questions").exists() or not any(
        (tmp_path / "data" / "questions").iterdir()
    )  # nothing half-written
    rej = tmp_path / "rej.jsonl"
    rep = load(BAD / "rog_bad.jsonl", "rog", fake_store, tmp_path, on_error="skip", rejects=rej)
    got = [(r["line"], r["reason"]) for r in rejects_of(rej)]
    assert [g[0] for g in got] == [2, 3, 4, 4]
    assert "graph[1]" in got[2][1] and got[3][1] == "empty head"
    assert rep.loaded == 3 and rep.records == 3
    q = (tmp_path / "data" / "questions" / "rog_bad.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in q] == ["ok-1", "bad-triple", "ok-2"]


def test_ntriples_and_explagraphs_bad_rows_in_skip_mode(fake_store, tmp_path):
    rep = load(BAD / "ntriples_bad.nt", "ntriples", fake_store, tmp_path, on_error="skip",
               rejects=tmp_path / "a.jsonl")  # fmt: skip
    assert (rep.loaded, rep.rejected) == (2, 5)
    rep = load(BAD / "explagraphs_bad.tsv", "explagraphs", fake_store, tmp_path,
               on_error="skip", rejects=tmp_path / "b.jsonl")  # fmt: skip
    assert (rep.records, rep.rejected, rep.loaded) == (2, 3, 4)
    with pytest.raises(LoadError, match=r"explagraphs_bad.tsv:3: label 'maybe'"):
        load(BAD / "explagraphs_bad.tsv", "explagraphs", FakeStore(), tmp_path)


# --- bad gzip data, gzip bombs (issue 26) ---------------------------------------------------


def _gz_kb(path: Path, rows: int = 3000) -> bytes:
    """A .gz MetaQA file with names random enough that the deflate stream is long."""
    rnd = random.Random(7)
    text = "".join(f"e{rnd.getrandbits(48):x}|r{i % 9}|e{rnd.getrandbits(48):x}\n"
                   for i in range(rows))  # fmt: skip
    data = gzip.compress(text.encode(), mtime=0)
    path.write_bytes(data)
    return data


def _corrupt(tmp_path: Path, how: str) -> Path:
    p = tmp_path / "kb.txt.gz"
    data = _gz_kb(p)
    if how == "truncated":
        p.write_bytes(data[: len(data) // 2])
    elif how == "not gzip":
        p.write_bytes(b"a|r|b\nc|r|d\n")  # plain text named .gz
    elif how == "crc":
        p.write_bytes(data[:-8] + bytes(4) + data[-4:])
    else:  # deflate data: the first block's type is the reserved one (0b11)
        p.write_bytes(data[:10] + bytes([data[10] | 0b110]) + data[11:])
    return p


GZ_REASONS = {
    "truncated": r"truncated gzip file \(the compressed data ends before its end marker\)",
    "not gzip": r"not a gzip file, although named \.gz \(Not a gzipped file \(b'a\|'\)\)",
    "crc": r"corrupt gzip data \(CRC check failed",
    "deflate": r"corrupt gzip data \(Error -3 while decompressing data",
}


@pytest.mark.parametrize("how", list(GZ_REASONS))
def test_bad_gzip_is_a_file_error_naming_file_and_reason(tmp_path: Path, how: str):
    p = _corrupt(tmp_path, how)
    store = FakeStore()
    with pytest.raises(LoadError) as e:
        load(p, "metaqa", store, tmp_path, batch_size=500)
    assert e.value.source == str(p) and e.value.line is None
    assert re.match(GZ_REASONS[how] + r".*; read up to line \d+$", e.value.reason), e.value
    read = int(e.value.reason.rsplit(" ", 1)[1])
    # fail mode: the batches before the bad data committed, nothing of the batch it broke
    assert len(store.triples) == read // 500 * 500
    # skip mode: still a file error (the rest cannot be read); the rejects file is kept
    rej = tmp_path / "rej.jsonl"
    with pytest.raises(LoadError, match=GZ_REASONS[how]):
        load(p, "metaqa", FakeStore(), tmp_path, on_error="skip", rejects=rej)
    assert rej.exists() and not (tmp_path / "rej.jsonl.tmp").exists()


@pytest.mark.parametrize("how", ["truncated", "not gzip", "crc"])
def test_cli_bad_gzip_prints_file_and_reason(tmp_path: Path, how: str):
    p = _corrupt(tmp_path, how)
    r = run_cli(["load", str(p), "--format", "metaqa", "--dry-run", "--no-progress"],
                tmp_path / "data")  # fmt: skip
    assert r.returncode == 1 and "Traceback" not in r.stderr and "Aborted" not in r.stderr
    assert re.search(f"error: {re.escape(str(p))}: {GZ_REASONS[how]}", r.stderr), r.stderr


def _settings(tmp_path: Path, **kw):
    from talent_core.config import Settings

    return Settings(data_dir=tmp_path / "data", **kw)


def test_gzip_past_the_decompressed_size_limit_stops(tmp_path: Path):
    p = tmp_path / "kb.txt.gz"
    _gz_kb(p, rows=2000)  # ~60 kB decompressed
    store = FakeStore()
    with pytest.raises(LoadError) as e:
        load_path(p, "metaqa", store=store, embedder=HashEmbedder(16), progress=False,
                  settings=_settings(tmp_path, max_decompressed_bytes=20_000))  # fmt: skip
    msg = str(e.value)
    assert msg.startswith(f"{p}: decompresses to more than 20,000 bytes (stopped after line ")
    assert "TALENT_MAX_DECOMPRESSED_BYTES" in msg
    assert store.triples == set()  # batch size 5000: nothing of the broken batch
    # under the limit it loads
    rep = load_path(p, "metaqa", store=FakeStore(), embedder=HashEmbedder(16), progress=False,
                    settings=_settings(tmp_path, max_decompressed_bytes=100_000))  # fmt: skip
    assert rep.loaded == 2000


def test_gzip_bomb_of_empty_lines_is_limited_and_keeps_line_numbers(tmp_path: Path):
    """A bomb of newlines: the limit counts skipped blank lines too, and a bad line after
    millions of blank ones is reported at its own line number."""
    p = tmp_path / "bomb.txt.gz"
    p.write_bytes(gzip.compress(b"a|r|b\n" + b"\n" * 3_000_000 + b" \t\r\n" * 1000 + b"bad\n"))
    with pytest.raises(LoadError, match=r"bomb.txt.gz:3001002: expected 3 fields"):
        load(p, "metaqa", FakeStore(), tmp_path)
    with pytest.raises(LoadError) as e:
        load_path(p, "metaqa", store=FakeStore(), embedder=HashEmbedder(16), progress=False,
                  settings=_settings(tmp_path, max_decompressed_bytes=1_000_000))  # fmt: skip
    assert "decompresses to more than 1,000,000 bytes" in str(e.value)
    line = int(re.search(r"stopped after line (\d+)", str(e.value))[1])
    assert 1_000_000 <= line < 1_100_000  # the blank lines read so far, counted
    csv = tmp_path / "bomb.csv.gz"  # CSV records: empty lines between them are skipped too
    csv.write_bytes(gzip.compress(b"h,r,t\n" + b"\n" * 2_000_000 + b'a,r,"b\n\nc"\nx,y\n'))
    with pytest.raises(LoadError, match=r"bomb.csv.gz:2000005: missing columns"):
        load(csv, "triples", FakeStore(), tmp_path)
    store, rej = FakeStore(), tmp_path / "rej.jsonl"
    load(csv, "triples", store, tmp_path, on_error="skip", rejects=rej)
    assert store.triples == {("a", "r", "b\n\nc")}  # the empty line inside quotes is kept
    assert [r["line"] for r in rejects_of(rej)] == [2_000_005]


def test_cli_decompressed_size_limit_names_the_setting(tmp_path: Path):
    p = tmp_path / "kb.txt.gz"
    _gz_kb(p, rows=2000)
    r = run_cli(["load", str(p), "--format", "metaqa", "--dry-run", "--no-progress"],
                tmp_path / "data", TALENT_MAX_DECOMPRESSED_BYTES="20000")  # fmt: skip
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"error: {p}: decompresses to more than 20,000 bytes" in r.stderr
    assert "TALENT_MAX_DECOMPRESSED_BYTES" in r.stderr
