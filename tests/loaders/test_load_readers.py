"""Format readers on the project's fixtures: what each row becomes (ids, names, relations)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loader_helpers import BAD, FIXTURES

from talent_core.errors import LoadError
from talent_core.loaders.base import BadRow, Record, Row
from talent_core.loaders.explagraphs import ExplaGraphsReader, example_id, parse_graph
from talent_core.loaders.io import LineSource, iter_json_array
from talent_core.loaders.metaqa import MetaQAReader
from talent_core.loaders.ntriples import NTriplesReader, local_name, unescape
from talent_core.loaders.rog import RoGFileReader, RoGParquetReader
from talent_core.loaders.triples import TriplesReader, parse_columns


def items(reader):
    try:
        return list(reader)
    finally:
        reader.close()


def rows(reader):
    return [i for i in items(reader) if isinstance(i, Row)]


# --- line source ---------------------------------------------------------------------------


def test_line_source_numbers_crlf_bom_and_last_line_without_newline(tmp_path: Path):
    p = tmp_path / "x.txt"
    p.write_bytes(b"\xef\xbb\xbfa|b|c\r\nd|e|f\n\ng|h|i")
    with LineSource(p) as src:
        got = [(src.line, t) for t in src]
    assert got == [(1, "a|b|c"), (2, "d|e|f"), (3, ""), (4, "g|h|i")]


def test_line_source_overlong_line_is_skipped_in_constant_memory(tmp_path: Path):
    p = tmp_path / "x.txt"
    p.write_bytes(b"short\n" + b"y" * 300_000 + b"\nafter\n")
    out = []
    with LineSource(p, max_line_length=100) as src:
        while True:
            try:
                out.append(next(src))
            except StopIteration:
                break
            except Exception as e:  # noqa: BLE001 - collecting the LineError
                out.append((e.line, e.reason.split(" (")[0]))
    assert out == ["short", (2, "line longer than the maximum of 100 bytes"), "after"]


def _lines_one_by_one(data: bytes, skip: str) -> list[tuple[int, str]]:
    """What `LineSource` with `skip_blank` must return, computed line by line."""
    out = []
    lines = data.split(b"\n")
    for i, raw in enumerate(lines, 1):
        last = i == len(lines)  # the text after the last newline (no terminator)
        if last and not raw:
            break
        text = (raw if last or not raw.endswith(b"\r") else raw[:-1]).decode()
        blank = not text.strip(" \t") if skip == "blank" else not text
        if not (blank and not last):
            out.append((i, text))
    return out


@pytest.mark.parametrize("gz", [False, True])
def test_line_source_skips_blank_runs_with_the_same_lines_and_numbers(tmp_path: Path, gz):
    """Runs of blank lines are consumed a buffer at a time (a gzip bomb of newlines is not
    read line by line in Python): the lines returned and their numbers are those of reading
    every line, whatever the run lengths, buffer boundaries, CRLF or lone CRs."""
    import gzip
    import random

    rnd = random.Random(26)
    pieces = [b"\n", b"\r\n", b" \n", b"\t \r\n", b" \r \n", b"\r", b"a|b|c\n", b"x\r\n",
              b"\n" * 20_000, b" \n" * 5000, b"\r\n" * 7000, b"y"]  # fmt: skip
    for trial in range(12):
        data = b"".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 100)))
        p = tmp_path / ("t.txt.gz" if gz else "t.txt")
        p.write_bytes(gzip.compress(data) if gz else data)
        for skip in ("blank", "empty"):
            with LineSource(p) as src:
                src.skip_blank = skip
                got = [(src.line, t) for t in src]
            assert got == _lines_one_by_one(data, skip), (trial, skip)


def test_json_array_streaming_reports_element_lines(tmp_path: Path):
    p = tmp_path / "a.json"
    p.write_text('[\n {"a": 1},\n {"b":\n  2}, {"c": 3}\n]\n')
    with LineSource(p) as src:
        got = list(iter_json_array(src))
    assert got == [(2, {"a": 1}), (3, {"b": 2}), (4, {"c": 3})]


# --- metaqa ----------------------------------------------------------------------------------


def test_metaqa_fixture_rows():
    got = rows(MetaQAReader(FIXTURES / "metaqa" / "kb.txt"))
    text = (FIXTURES / "metaqa" / "kb.txt").read_text(encoding="utf-8")
    assert len(got) == text.count("\n")
    first = got[0]
    assert (first.line, first.head, first.relation, first.tail) == (
        1,
        "The Matrix",
        "directed_by",
        "Lana Wachowski",
    )
    assert first.head_name is None  # ids are the names
    assert {r.relation for r in got} == {
        "directed_by", "written_by", "starred_actors", "release_year", "in_language",
        "has_genre", "has_tags", "has_imdb_votes", "has_imdb_rating",
    }  # fmt: skip


def test_metaqa_wrong_delimiter_says_so():
    got = items(MetaQAReader(BAD / "metaqa_tabs.txt"))
    assert all(isinstance(i, BadRow) for i in got)
    assert got[0].line == 1
    assert "expected 3 fields" in got[0].reason and "wrong delimiter" in got[0].reason


# --- triples ---------------------------------------------------------------------------------


def test_triples_csv_header_synonyms_and_quoted_commas():
    got = rows(TriplesReader(FIXTURES / "triples" / "sample.csv"))
    assert len(got) == 26
    quoted = [r for r in got if r.relation == "said to be the same as"]
    assert quoted[0].head == "Lovelace, Ada" and quoted[0].tail == "Ada Lovelace"
    long_title = [r for r in got if r.tail.startswith("On Computable Numbers")]
    assert long_title[0].tail.endswith("with an Application to the Entscheidungsproblem")
    assert long_title[0].line == 13


def test_triples_tsv_column_mapping_with_display_names():
    cols = parse_columns(
        "head=subj,relation=pred,tail=obj,head_name=subj_label,tail_name=obj_label"
    )
    got = rows(TriplesReader(FIXTURES / "triples" / "ids_with_labels.tsv", columns=cols))
    assert got[0][1:6] == ("person/0001", "spouse", "person/0002", "Ada Lovelace",
                           "William King-Noel")  # fmt: skip


def test_triples_positional_columns_without_header(tmp_path: Path):
    p = tmp_path / "t.tsv"
    p.write_text("x\ta\tb\tc\ny\td\te\tf\n")
    got = rows(TriplesReader(p, columns=parse_columns("head=1,relation=2,tail=3")))
    assert [(r.line, r.head, r.relation, r.tail) for r in got] == [
        (1, "a", "b", "c"),
        (2, "d", "e", "f"),
    ]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("head=a,tail=b", "lacks relation"),
        ("head=a,relation=1,tail=b", "mixes names and positions"),
        ("head=a,rel=b,tail=c", "unknown column role"),
        ("head", "not ROLE=COLUMN"),
    ],
)
def test_bad_column_mappings(spec: str, message: str):
    with pytest.raises(ValueError, match=message):
        parse_columns(spec)


def test_triples_delimiter_sniffed(tmp_path: Path):
    p = tmp_path / "t.txt"
    p.write_text("head;relation;tail\na;b;c\n")
    assert [r[1:4] for r in rows(TriplesReader(p))] == [("a", "b", "c")]


def test_triples_undetectable_delimiter(tmp_path: Path):
    p = tmp_path / "t.txt"
    p.write_text("head relation tail\na b c\n")
    with pytest.raises(LoadError, match=r"t.txt:1: cannot detect the delimiter"):
        TriplesReader(p)


def test_triples_multiline_quoted_field_keeps_first_line_number(tmp_path: Path):
    p = tmp_path / "t.csv"
    p.write_text('head,relation,tail\na,"multi\nline",c\nd,e,f\n')
    got = rows(TriplesReader(p))
    assert [(r.line, r.relation) for r in got] == [(2, "multi\nline"), (4, "e")]


# --- ntriples --------------------------------------------------------------------------------


def test_ntriples_fixture_terms():
    got = rows(NTriplesReader(FIXTURES / "ntriples" / "sample.nt"))
    assert len(got) == 28
    by = {(r.head_name, r.relation, r.tail_name): r for r in got}
    r = by[("Blade Runner", "director", "Ridley Scott")]
    assert r.head == "http://example.org/film/Blade_Runner"
    assert r.tail == "http://example.org/person/Ridley_Scott"
    year = by[("Blade Runner", "releaseYear", "1982")]
    assert year.tail == '"1982"^^<http://www.w3.org/2001/XMLSchema#gYear>'
    en = by[("Blade Runner", "label", "Blade Runner")]
    assert en.tail == '"Blade Runner"@en'
    de = by[("Blade Runner", "label", "Der Blade Runner")]
    assert de.tail == '"Der Blade Runner"@de'
    amelie = [r for r in got if r.head.endswith("Am%C3%A9lie")]
    assert {r.head_name for r in amelie} == {"Amélie"}  # percent-decoded local name
    quote = next(r for r in amelie if r.relation == "quote")
    assert quote.tail_name == 'She said "Times are hard for dreamers."\tThe end.\\n'
    label = next(r for r in amelie if r.relation == "label")
    assert label.tail_name == "Le Fabuleux Destin d'Amélie Poulain"
    assert next(r for r in amelie if r.relation == "mood").tail_name == "\U0001f3ac whimsical"
    book = by[("Do Androids Dream of Electric Sheep?", "author", "Philip K. Dick")]
    assert book.head.endswith("Sheep%3F")
    nom = next(r for r in got if r.relation == "award")
    assert nom.head == "_:sample:nom1" and nom.head_name == "nom1"
    assert by[("Blade Runner", "nomination", "nom1")].tail == "_:sample:nom1"
    # `<s><p><o>.` without spaces is valid N-Triples
    assert ("Blade Runner", "genre", "Science fiction") in by


def test_ntriples_relation_names_iri():
    got = rows(NTriplesReader(FIXTURES / "ntriples" / "sample.nt", relation_names="iri"))
    assert "http://example.org/ont#director" in {r.relation for r in got}


def test_ntriples_syntax_errors_name_the_problem():
    got = items(NTriplesReader(BAD / "ntriples_bad.nt"))
    bad = {b.line: b.reason for b in got if isinstance(b, BadRow)}
    assert sorted(bad) == [2, 3, 4, 5, 6]
    assert "malformed literal" in bad[2]
    assert "literals are only allowed as objects" in bad[3]
    assert "missing final '.'" in bad[4]
    assert "language tag" in bad[5]
    assert "lone surrogate" in bad[6]
    assert [r.line for r in got if isinstance(r, Row)] == [1, 7]


def test_unescape_and_local_name():
    assert unescape(r"a\tb\"c\\d\u00e9\U0001F600") == 'a\tb"c\\dé\U0001f600'
    assert unescape(r"\uD83D\uDE00") == "\U0001f600"
    assert local_name("http://ex.org/ns#birth_place") == "birth place"
    assert local_name("http://ex.org/ns#birth_place", spaces=False) == "birth_place"
    assert local_name("http://ex.org/people/") == "people"
    assert local_name("urn:isbn:0451450523") == "0451450523"
    assert local_name("http://ex.org/ns#") == "ns"


# --- rog ------------------------------------------------------------------------------------


def test_rog_jsonl_records_then_rows():
    got = items(RoGFileReader(FIXTURES / "rog" / "webqsp_toy.jsonl"))
    recs = [i for i in got if isinstance(i, Record)]
    rs = [i for i in got if isinstance(i, Row)]
    assert len(recs) == 35
    assert recs[0].data["id"] == "WebQToy-001" and recs[0].data["answer"] == ["Honolulu"]
    assert set(recs[0].data) == {
        "id", "question", "answer", "q_entity", "a_entity", "graph_size", "source",
    }  # fmt: skip
    assert any(r.head.startswith("m.0") for r in rs)
    assert all(isinstance(i, (Record, Row)) for i in got)
    assert got[0] == recs[0] and isinstance(got[1], Row) and got[1].line == 1


def test_rog_json_array_and_parquet_match_jsonl(tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = FIXTURES / "rog" / "webqsp_toy.jsonl"
    recs = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    arr = tmp_path / "toy.json"
    arr.write_text(json.dumps(recs, indent=2), encoding="utf-8")
    pqf = tmp_path / "toy.parquet"
    pq.write_table(pa.Table.from_pylist(recs), pqf, row_group_size=8)

    def triples(reader):
        return [(r.head, r.relation, r.tail) for r in rows(reader)]

    want = triples(RoGFileReader(src))
    assert triples(RoGFileReader(arr)) == want
    assert triples(RoGParquetReader(pqf)) == want
    pr = RoGParquetReader(pqf)
    got = items(pr)
    assert [i.line for i in got if isinstance(i, Record)] == list(range(1, 36))


def test_rog_bad_records():
    got = items(RoGFileReader(BAD / "rog_bad.jsonl"))
    bad = [(b.line, b.reason) for b in got if isinstance(b, BadRow)]
    assert bad[0][0] == 2 and bad[0][1].startswith("invalid JSON")
    assert bad[1] == (3, "record lacks field(s) graph")
    assert bad[2][0] == 4 and "graph[1] is not a [head, relation, tail]" in bad[2][1]
    # the empty head of graph[2] parses; validation (base.validate_row) rejects it
    assert [r.line for r in got if isinstance(r, Row)] == [1, 4, 4, 5]
    assert [r.data["id"] for r in got if isinstance(r, Record)] == ["ok-1", "bad-triple", "ok-2"]


def test_rog_parquet_missing_graph_column(tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "x.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "a", "question": "q"}]), p)
    with pytest.raises(LoadError, match="missing columns: graph"):
        RoGParquetReader(p)


def test_rog_malformed_json_array_is_a_file_error(tmp_path: Path):
    p = tmp_path / "x.json"
    p.write_text('[{"question": "q", "graph": []},\n {"question": ]')
    r = RoGFileReader(p)
    with pytest.raises(LoadError, match=r"x.json:2: invalid JSON"):
        items(r)


# --- explagraphs ----------------------------------------------------------------------------


def test_explagraphs_examples_are_namespaced():
    got = items(ExplaGraphsReader(FIXTURES / "explagraphs" / "sample.tsv"))
    recs = [i for i in got if isinstance(i, Record)]
    rs = [i for i in got if isinstance(i, Row)]
    assert len(recs) == 10
    quoted = recs[5].data
    assert (
        quoted["arg2"] == 'Uniforms stop students from expressing themselves, a "right" they have.'
    )
    assert quoted["label"] == "counter" and quoted["answer"] == ["counter"]
    assert quoted["graph"][0] == ["uniforms", "not capable of", "self expression"]
    eid = example_id(quoted["arg1"], quoted["arg2"])
    assert quoted["id"] == eid and quoted["node_ids"][0] == f"{eid}/uniforms"
    # "good thing" appears in three examples: three nodes, one name
    good = {r.head for r in rs if r.head_name == "good thing"} | {
        r.tail for r in rs if r.tail_name == "good thing"
    }
    assert len(good) == 3


def test_explagraphs_global_concepts_merge():
    got = rows(ExplaGraphsReader(FIXTURES / "explagraphs" / "sample.tsv", concepts="global"))
    assert {r.tail for r in got if r.tail_name == "good thing"} == {"good thing"}


def test_explagraphs_bad_rows():
    got = items(ExplaGraphsReader(BAD / "explagraphs_bad.tsv"))
    bad = {b.line: b.reason for b in got if isinstance(b, BadRow)}
    assert sorted(bad) == [3, 4, 5]
    assert "label 'maybe'" in bad[3]
    assert "has 2 parts" in bad[4]
    assert "missing columns" in bad[5]
    assert len([r for r in got if isinstance(r, Record)]) == 2


def test_parse_graph():
    assert parse_graph(" (a; b; c) (d;e;f) ") == [("a", "b", "c"), ("d", "e", "f")]
    for bad in ("", "(a; b)", "(a; b; c) junk", "(a; ; c)"):
        with pytest.raises(ValueError):
            parse_graph(bad)
