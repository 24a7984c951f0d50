"""The Load page's sources table (issue 33): each source with its counts; Remove asks for a
confirmation, then unloads the source (AppTest, no browser)."""

from __future__ import annotations

from pathlib import Path

from hash_embedder import HashEmbedder
from streamlit.testing.v1 import AppTest

from talent_core.config import Settings
from talent_core.loaders.api import load_path

APP = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def test_load_page_lists_and_removes_sources(tmp_path, page_store):
    data, store = page_store
    for name, rows in (("one.txt", ["A|r|B", "B|r|C"]), ("two.txt", ["B|r|C", "C|s|D"])):
        (tmp_path / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
        load_path(tmp_path / name, "metaqa", store=store, embedder=HashEmbedder(16),
                  settings=Settings(data_dir=data), progress=False)  # fmt: skip
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page("views/load.py")
    at.run()
    assert not at.exception, at.exception
    table = at.dataframe[-1].value
    assert list(table["name"]) == ["one.txt", "two.txt"]
    assert list(table["only this source"]) == [1, 1]
    assert [o for o in at.selectbox(key="load_as").options] == [
        at.selectbox(key="load_as").options[0], "replace one.txt", "replace two.txt"]
    at.selectbox(key="remove_choice").set_value("one.txt")
    at.button(key="remove_source").click()
    at.run()
    assert any("Remove source 'one.txt'?" in w.value.replace("\\", "") for w in at.warning)
    assert store.stats().triples == 3  # nothing removed before the confirmation
    at.button(key="remove_confirm").click()
    at.run()
    assert not at.exception, at.exception
    assert any("removed 'one.txt'" in s.value.replace("\\", "") for s in at.success)
    assert list(at.dataframe[-1].value["name"]) == ["two.txt"]
    s = store.stats()
    assert (s.triples, s.entities, s.relations) == (2, 3, 2)
