"""Issue 44 (10): a source name is checked when a load records it (no control character, no
lone surrogate, at most 200 characters, not a bare number), with one error line and nothing
written; `talent sources` keeps a row per source whatever a stored name holds; the API, its
client and the Load page address a source by its id, so any name can be removed."""

from __future__ import annotations

import json

import pytest
from test_sources import TRIPLES, write_kb

from talent_core.loaders.sources import list_sources
from talent_core.models import SourceRecord


@pytest.mark.parametrize(("name", "problem"), [
    ("two\nlines", "a control character U+000A at position 3"),
    ("tab\there", "a control character U+0009 at position 3"),
    ("c1\x9bcsi", "a control character U+009B at position 2"),
    ("bidi\u202eflip", "an invisible formatting character U+202E at position 4"),
    ("bad \udcff byte", "a lone surrogate U+DCFF at position 4"),
    ("x" * 201, "is 201 characters long; the maximum is 200"),
    ("1234", "is a number"),
    (" padded", "leading or trailing whitespace"),
])  # fmt: skip
def test_a_bad_source_name_is_refused_before_anything_is_written(cli, tmp_path, name,
                                                                  problem):
    before = cli.store.stats()
    kb = write_kb(tmp_path / "three.txt", [("a", "r", "b")])
    r = cli(["load", str(kb), "--format", "metaqa", "--source", name, "--no-progress"])
    assert r.exit_code == 1, (r.output, r.exception)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: source name ") and problem in lines[0]
    assert "Traceback" not in r.output
    assert cli.store.stats() == before
    assert [s.name for s in list_sources(cli.store).sources] == ["part1.txt", "part2.txt"]
    r = cli(["load", str(kb), "--format", "metaqa", "--replace", "part2.txt", "--source", name,
             "--no-progress"])  # fmt: skip
    assert r.exit_code == 1 and problem in r.stderr and cli.store.stats() == before


def test_a_good_name_with_a_slash_loads(cli, tmp_path):
    kb = write_kb(tmp_path / "three.txt", [("a", "r", "b")])
    r = cli(["load", str(kb), "--format", "metaqa", "--source", "kg/2024 v2", "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "kg/2024 v2" in [s.name for s in list_sources(cli.store).sources]


def test_the_sources_table_keeps_one_row_per_source(cli):
    """A name stored before names were checked (a newline, an escape sequence) is shown
    escaped in its own row."""
    cli.store.put_source(SourceRecord(id=7, name="two\nlines\x1b[31m"))
    r = cli(["sources"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert len(lines) == 1 + 3 + 1, r.stdout  # header, 3 sources, the store's totals
    assert lines[3].split()[:3] == ["7", "two\\nlines\\x1b[31m", "complete"]
    assert "\x1b" not in r.stdout
    got = json.loads(cli(["sources", "--json"]).stdout)
    assert got["sources"][2]["name"] == "two\nlines\x1b[31m"


def test_client_removes_by_id_or_by_name(monkeypatch):
    from talent_core.api.client import ApiClient

    calls = []
    client = ApiClient("http://127.0.0.1:9", "tk_x")
    change = {"source": "s", "source_id": 3, "action": "unload"}
    monkeypatch.setattr(client, "_call", lambda method, path, *a, **k: (
        calls.append((method, path)) or change))
    client.remove_source(3)
    client.remove_source("kg/a b.txt")
    assert calls == [("DELETE", "/v1/sources/3"), ("DELETE", "/v1/sources?name=kg%2Fa%20b.txt")]


def test_load_page_removes_a_source_with_a_slash_by_id(tmp_path, page_store):
    """The Load page (local store) removes a source whose name holds `/`."""
    from pathlib import Path

    from hash_embedder import HashEmbedder
    from streamlit.testing.v1 import AppTest

    from talent_core.config import Settings
    from talent_core.loaders.api import load_path

    data, store = page_store
    kb = write_kb(tmp_path / "kb.txt", TRIPLES[:3])
    load_path(kb, "metaqa", store=store, embedder=HashEmbedder(16), source="kg/one",
              settings=Settings(data_dir=data), progress=False)  # fmt: skip
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app" / "main.py"),
                           default_timeout=180)  # fmt: skip
    at.switch_page("views/load.py")
    at.run()
    at.selectbox(key="remove_choice").set_value("kg/one")
    at.button(key="remove_source").click()
    at.run()
    at.button(key="remove_confirm").click()
    at.run()
    assert not at.exception, at.exception
    assert any("removed 'kg/one'" in s.value.replace("\\", "") for s in at.success)
    assert store.stats().triples == 0 and list_sources(store).sources == []
