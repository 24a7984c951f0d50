"""The four pages of the UI (Ask, Explore, Load, Evaluate), driven headless with AppTest on
the toy MetaQA KG (real MiniLM embeddings); the Load page writes into a store of its own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _app(timeout: int = 180) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.run()
    assert not at.exception, at.exception
    return at


def ask(at: AppTest, question: str, mode: str) -> AppTest:
    """Ask ``question`` on the Ask page in ``mode``; returns the page after the run."""
    at.radio(key="mode").set_value(mode)
    at.text_input(key="question").input(question)
    at.button(key="ask").click()
    at.run()
    return at


def explore(query: str) -> AppTest:
    """The Explore page after searching ``query``."""
    at = _page("views/explore.py")
    at.text_input(key="explore_query").input(query)
    at.run()
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def _page(path: str) -> AppTest:
    """The app switched to the page ``path``, run without errors."""
    at = _app()
    at.switch_page(path)
    at.run()
    _ok(at)
    return at


def _texts(at: AppTest) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption]
                     + [w.value for w in at.warning] + [i.value for i in at.info])


def double_clicks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The graph component stood in for: a KG id appended to the returned list is reported
    double-clicked (an expansion asked for) by the next draw that holds that node, once."""
    import talent_core.ui.common as common

    click: list[str] = []
    stamp = iter(range(1, 100))

    def fake(elements, **kw):
        want = click.pop() if click else None
        ids = [n["data"]["id"] for n in elements["nodes"] if n["data"]["kg_id"] == want]
        return {"action": "expand", "node": ids[0], "timestamp": next(stamp)} if ids else None

    monkeypatch.setattr(common, "_component", fake)
    return click


def test_no_stray_magic_output(use_toy):
    """The page shows no `None` from a module-level expression (Streamlit magic)."""
    at = _app()
    assert all(m.value.strip() != "None" for m in at.markdown)
    assert [m.label for m in at.metric] == ["entities", "relations", "triples"]


def test_ask_full_answer_with_evidence_graph_export_and_history(use_toy, tmp_path,
                                                                 monkeypatch):
    """Full mode on the tiny model: every answer is written with its evidence path(s) (or
    says it has none), the graph component and its legend are drawn, JSON and CSV
    downloads are offered, and the question enters the session history."""
    from tiny_llm import tiny_llama

    from talent_core.config import get_settings

    monkeypatch.setenv("TALENT_BASE_MODEL", str(tiny_llama(tmp_path / "tiny")))
    get_settings.cache_clear()
    at = ask(_app(), "who directed [Gravity]", "full")
    assert not at.exception, at.exception
    text = _texts(at)
    assert "Answer:" in text
    ranked = at.dataframe[0].value
    answers = list(ranked[ranked["chosen"]]["answer"])
    assert answers
    for a in answers:  # each answer has a line: its path(s), or "no path"
        assert any(m.value.startswith(a.replace("-", "\\-").replace(".", "\\."))
                   for m in at.markdown), (a, text)
    kinds = {type(e).__name__ + ":" + str(getattr(e, "type", "")) for e in at.main}
    assert kinds  # the page rendered
    downloads = at.get("download_button")
    assert len(downloads) == 2
    assert at.button(key="hist0").label.startswith("who directed Gravity")
    assert any("text generator" in c.value for c in at.caption)  # which generator answered


def test_ask_graph_prompt_generator_missing_is_said(use_toy, tmp_path):
    """Choosing the graph-prompt generator where none is trained (an adapters directory
    without generator-graph/; the bundled one ships): a plain error, no crash."""
    at = _app()
    at.selectbox(key="adapters").set_value("directory…")
    at.run()
    next(t for t in at.text_input if t.label.startswith("Directory with")).input(str(tmp_path))
    at.selectbox(key="generator_type").set_value("graph-prompt")
    at.run()
    assert not at.exception, at.exception
    assert any("no trained graph" in e.value and "prompt generator" in e.value
               for e in at.error), [e.value for e in at.error]


def test_ask_names_a_missing_entity_and_the_closest(use_toy):
    """A bracketed name the KG does not hold is said plainly, with the closest names."""
    at = ask(_app(), "what movies did [Tom Hanks] star in", "retrieval")
    _ok(at)
    warn = [w.value for w in at.warning if "not in the KG" in w.value]
    assert warn and "Tom Hanks" in warn[0] and "Closest names" in warn[0], warn


def test_ask_example_question_and_retrieval_graph(use_toy):
    """Retrieval mode: no answer line, the candidate table and the S caption."""
    at = ask(_app(), "who directed [Gravity]", "retrieval")
    _ok(at)
    assert "Answer:" not in _texts(at)
    assert "Alfonso Cuarón" in set(at.dataframe[0].value["name"])
    assert any(c.value.startswith("S (pcst)") for c in at.caption)


def test_explore_finds_an_entity_shows_its_neighbourhood_and_carries_it_to_ask(use_toy):
    at = explore("Gravity")
    _ok(at)
    assert at.selectbox(key="explore_pick").value == 0  # the exact match first
    edges = at.dataframe[0].value
    assert "Alfonso Cuarón" in set(edges["dst"]) | set(edges["src"])
    rels = at.multiselect[0]
    assert "directed_by" in rels.value
    rels.set_value(["directed_by"])
    at.run()
    assert set(at.dataframe[0].value["rel"]) == {"directed_by"}
    at.button(key="explore_ask").click()
    at.run()
    _ok(at)
    assert at.text_input(key="topic").value == "Gravity"
    assert any("carried from Explore" in i.value for i in at.info)


def test_explore_says_what_an_expansion_added(use_toy, monkeypatch):
    """A double-click (the component stood in for): on the centre, whose neighbours are all
    drawn, the page says so (it said "N nodes/edges added" with nothing new on screen); on a
    neighbour, how many of its neighbours were added."""
    click = double_clicks(monkeypatch)
    at = explore("Gravity")
    _ok(at)
    click.append("Gravity")
    at.run()  # the click on the centre, and the rerun it asks for
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert any(c.startswith("every neighbour of the node you opened is drawn already")
               for c in captions), captions
    click.append("Alfonso Cuarón")
    at.run()  # a click on a neighbour
    notes = [c.value.replace("\\", "") for c in at.caption if "added around" in c.value]
    assert notes and int(notes[0].split()[0]) > 0, [c.value for c in at.caption]


def test_ask_says_what_an_expansion_added(use_toy, monkeypatch):
    """Ask's graph, a double-click (the component stood in for): the toast counts the
    neighbours added to the drawing (it counted nodes/edges of the extra set, drawn or not);
    the same node again says every neighbour is drawn already."""
    click = double_clicks(monkeypatch)
    at = ask(_app(), "who directed [Gravity]", "retrieval")
    _ok(at)
    click.append("Alfonso Cuarón")
    at.run()
    toasts = [t.value.replace("\\", "") for t in at.toast]
    assert toasts and "neighbour(s) added around" in toasts[-1], toasts
    assert int(toasts[-1].split()[0]) > 0
    click.append("Alfonso Cuarón")
    at.run()
    toasts = [t.value.replace("\\", "") for t in at.toast]
    assert toasts[-1].startswith("every neighbour of the node you opened is drawn already"), \
        toasts


@pytest.fixture
def empty_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, empty embedded store of its own (the Load tests write)."""
    from talent_core.config import get_settings
    from talent_core.store.falkordb_server import EmbeddedServer

    data = tmp_path / "store"
    monkeypatch.setenv("TALENT_DATA_DIR", str(data))
    monkeypatch.setenv("TALENT_STORE", "embedded")
    get_settings.cache_clear()
    yield data
    get_settings.cache_clear()
    EmbeddedServer.for_dir(data).stop()


def _load(at: AppTest, name: str, content: bytes, on_error: str = "fail") -> None:
    at.switch_page("views/load.py")
    at.run()
    at.file_uploader(key="upload").set_value((name, content, "text/plain"))
    at.run()
    at.radio(key="on_error").set_value(on_error)
    at.button(key="load").click()
    at.run()
    assert not at.exception, at.exception


def test_load_bad_file_fails_with_file_and_line(empty_store):
    at = _app()
    assert any("is empty" in w.value for w in at.warning)  # the empty store is said
    _load(at, "../../kb.txt", (FIXTURES / "bad" / "mixed_errors.txt").read_bytes())
    errors = [e.value for e in at.error]
    assert errors and errors[0].startswith("kb\\.txt\\:3\\:"), errors  # safe name, file:line
    assert any("metaqa" in c.value for c in at.caption)  # auto-detected format


def test_load_skip_shows_counts_rejects_and_download(empty_store):
    at = _app()
    _load(at, "kb.txt", (FIXTURES / "bad" / "mixed_errors.txt").read_bytes(), "skip")
    assert not at.error, [e.value for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["triples loaded"].replace(",", "")) > 0
    assert int(metrics["rejected"]) >= 3
    rejects = at.dataframe[1].value
    assert {"line", "reason", "raw"} <= set(rejects.columns) and 3 in set(rejects["line"])
    assert len(at.get("download_button")) == 1


def test_load_good_file_fills_the_store(empty_store):
    at = _app()
    _load(at, "kb.txt", (FIXTURES / "metaqa" / "kb.txt").read_bytes())
    assert not at.error, [e.value for e in at.error]
    assert any("Loaded: kb.txt" in s.value.replace("\\", "") for s in at.success)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["rejected"] == "0"


def test_load_answering_at_once_leaves_the_vectors_to_the_fill_behind(empty_store,
                                                                      monkeypatch):
    """"answer at once": the graph is written without its names' vectors, the fill behind
    starts (stood in for here) and the page says so."""
    import talent_core.loaders.vectors as vectors
    from talent_core.config import get_settings
    from talent_core.store import open_store

    started: list[object] = []
    monkeypatch.setattr(vectors, "fill_in_background",
                        lambda settings: (started.append(settings) or 77, Path("v.log")))
    at = _app()
    at.switch_page("views/load.py")
    at.run()
    at.checkbox(key="vectors_later").check()
    _load(at, "kb.txt", (FIXTURES / "metaqa" / "kb.txt").read_bytes())
    assert not at.error, [e.value for e in at.error]
    assert len(started) == 1
    notes = [i.value.replace("\\", "") for i in at.info]
    assert any("entity vectors: embedding" in n and "pid 77" in n for n in notes), notes
    store = open_store(get_settings())
    try:
        stats = store.stats()
        assert stats.entities > 0 and stats.entities_with_embedding == 0
    finally:
        store.close()


def test_a_failed_answer_at_once_load_fills_what_it_committed(empty_store, monkeypatch):
    """"answer at once" and a bad row after two committed batches: the error names the
    line, and the fill behind starts for the names written before it (and says so)."""
    import talent_core.loaders.vectors as vectors
    from talent_core.config import get_settings

    started: list[object] = []
    monkeypatch.setattr(vectors, "fill_in_background",
                        lambda settings: (started.append(settings) or 78, Path("v.log")))
    monkeypatch.setenv("TALENT_BATCH_SIZE", "2")
    get_settings.cache_clear()
    at = _app()
    at.switch_page("views/load.py")
    at.run()
    at.checkbox(key="vectors_later").check()
    rows = "".join(f"Film {i}|directed_by|Person {i}\n" for i in range(4)) + "Film 9|x\n"
    _load(at, "kb.txt", rows.encode())
    assert any("kb.txt:5" in e.value.replace("\\", "") for e in at.error), at.error
    assert len(started) == 1
    notes = [i.value.replace("\\", "") for i in at.info]
    assert any("entity vectors: embedding" in n and "pid 78" in n for n in notes), notes


def test_evaluate_runs_a_small_report_and_compares_saved_ones(use_toy):
    at = _page("views/evaluate.py")
    at.radio(key="eval_src").set_value("upload a question file")
    at.run()
    at.file_uploader(key="eval_upload").set_value(
        ("qa_1hop.txt", (FIXTURES / "metaqa" / "qa_1hop.txt").read_bytes(), "text/plain"))
    at.multiselect(key="eval_methods").set_value(["vector", "pcst-default"])
    at.number_input(key="eval_limit").set_value(3)
    at.text_input(key="eval_name").input("pytest-report")
    at.run()
    at.button(key="eval_run").click()
    at.run()
    _ok(at)
    assert any("rows" in s.value for s in at.success), [s.value for s in at.success]
    table = at.dataframe[0].value
    assert set(table["method"]) == {"vector", "pcst-default"} and (table["n"] == 3).all()
    assert "QA hit@1" not in table.columns  # retrieval-only methods: no "None" QA column
    out = Path(use_toy["TALENT_DATA_DIR"]) / "reports" / "pytest-report"
    assert json.loads((out / "report.json").read_text())["run"]["rows"] == 6
    picked = at.multiselect(key="eval_compare")
    assert len(picked.value) == 2  # two saved reports side by side


def test_report_table_marks_what_a_method_does_not_measure():
    """A retrieval-only method beside a QA one: its QA cells read "—", not "None"; a column no
    row measured is left out."""
    from talent_core.ui.views.evaluate import NOT_MEASURED, shown

    rows = [{"method": "pcst-default", "hit": 0.9, "QA hit@1": None, "latency mean ms": None},
            {"method": "llm-ranked", "hit": 0.9, "QA hit@1": 0.96667, "latency mean ms": None}]
    assert shown(rows) == [
        {"method": "pcst-default", "hit": 0.9, "QA hit@1": NOT_MEASURED},
        {"method": "llm-ranked", "hit": 0.9, "QA hit@1": "0.967"}]
    assert shown([]) == []


def test_a_data_dir_open_to_others_is_refused_with_a_message(tmp_path, monkeypatch):
    """A data dir other users may write (they could swap its socket) stops every page with
    one plain message naming it, before any page opens the store (issue 26: Streamlit's
    exception box with a traceback)."""
    from talent_core.config import get_settings

    data = tmp_path / "shared-store"
    data.mkdir()
    data.chmod(0o777)
    monkeypatch.setenv("TALENT_DATA_DIR", str(data))
    monkeypatch.setenv("TALENT_STORE", "embedded")
    get_settings.cache_clear()
    try:
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
    finally:
        get_settings.cache_clear()
    assert not at.exception, at.exception
    assert at.error, "no message"
    shown = re.sub(r"\\(.)", r"\1", at.error[0].value)  # as rendered: escapes undone
    assert str(data) in shown and "writable by other users" in shown
    assert sorted(p.name for p in data.iterdir()) == []  # nothing written, no server started


def test_ask_page_answers_through_a_real_api_server(use_toy, tmp_path, monkeypatch):
    """TALENT_API_URL + TALENT_API_KEY: the Ask page asks a running `talent serve` (full and
    retrieval mode); the Streamlit process loads no language model (a load fails here)."""
    import os
    import socket
    import subprocess
    import sys

    httpx = pytest.importorskip("httpx")
    from tiny_llm import tiny_llama

    from talent_core.api.keys import KeyStore
    from talent_core.api.process import wait_healthy
    from talent_core.config import get_settings
    from talent_core.pipeline import Pipeline

    model = str(tiny_llama(tmp_path / "tiny"))
    monkeypatch.setenv("TALENT_BASE_MODEL", model)
    keys = KeyStore(Path(use_toy["TALENT_DATA_DIR"]))
    rec, key = keys.create("ui-test", "read")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "talent_core", "serve", "--port", str(port)],
            env={**os.environ, **use_toy, "TALENT_BASE_MODEL": model, "TALENT_PLANNER": "none"},
            stdout=out, stderr=subprocess.STDOUT)
    try:
        assert wait_healthy(url, proc, 60), log.read_text()

        def no_models(self, *a, **k):
            raise AssertionError("the UI process loaded the language models")

        monkeypatch.setattr(Pipeline, "load_models", no_models)
        monkeypatch.setenv("TALENT_API_URL", url)
        monkeypatch.setenv("TALENT_API_KEY", key)
        get_settings.cache_clear()
        at = ask(_app(), "who directed [Gravity]", "full")
        _ok(at)
        assert any(f"API server at {url}" in c.value.replace("\\", "") for c in at.caption)
        server = httpx.post(url + "/v1/ask", headers={"Authorization": f"Bearer {key}"},
                            json={"question": "who directed [Gravity]"}, timeout=120).json()
        ranked = at.dataframe[0].value
        assert list(ranked[ranked["chosen"]]["answer"]) == server["answer"]
        assert "Answer:" in _texts(at) and len(at.get("download_button")) == 2
        at = ask(at, "who directed [Gravity]", "retrieval")
        _ok(at)
        assert "Alfonso Cuarón" in set(at.dataframe[0].value["name"])
        at = ask(at, "what movies did [Tom Hanks] star in", "retrieval")
        _ok(at)
        warn = [w.value for w in at.warning if "not in the KG" in w.value]
        assert warn and "Tom Hanks" in warn[0] and "Closest names" in warn[0], warn
        # Explore browses through the server: a search or a store read here would fail
        import talent_core.explore as explore_mod

        def not_here(*a, **k):
            raise AssertionError("the Explore page searched the store in the UI process")

        monkeypatch.setattr(explore_mod, "find_entities", not_here)
        at = explore("Gravity")
        _ok(at)
        assert any(f"API server at {url}" in c.value.replace("\\", "") for c in at.caption)
        edges = at.dataframe[0].value
        assert "Alfonso Cuarón" in set(edges["dst"]) | set(edges["src"])
        # the Stance task: decided by the server (POST /v1/stance), no model loads here
        at = _app()
        at.radio(key="task").set_value("Stance (ExplaGraphs)")
        at.run()
        at.text_area(key="stance_arg1").input("Cannabis should be legal.")
        at.text_area(key="stance_arg2").input("Marijuana is harmless.")
        at.text_area(key="stance_graph").input("(cannabis; synonym of; marijuana)")
        at.button(key="stance_ask").click()
        at.run()
        _ok(at)
        assert any(f"API server at {url}" in c.value.replace("\\", "") for c in at.caption)
        assert re.search(r"Stance:\*\* \*\*(support|counter)", _texts(at)), _texts(at)
        # Load: the upload goes to the server (a write key); this process opens no store
        import talent_core.ui.common as ui_common

        def no_store(*a, **k):
            raise AssertionError("the Load page opened the store in the UI process")

        wrec, wkey = keys.create("ui-test-write", "write")
        monkeypatch.setenv("TALENT_API_KEY", wkey)
        get_settings.cache_clear()
        before = httpx.get(url + "/v1/stats", headers={"Authorization": f"Bearer {key}"}).json()
        at = _app()  # the Ask page (it reads the store's counts here)
        monkeypatch.setattr(ui_common, "default_pipeline", no_store)
        at.switch_page("views/load.py")
        at.run()
        at.file_uploader(key="upload").set_value((
            "ui_api.txt", b"Api Ui Film|directed_by|Api Ui Person\nbad row\n"
            b"Api Ui Film|release_year|2040\n", "text/plain"))
        at.selectbox(key="load_format").set_value("metaqa")
        at.radio(key="on_error").set_value("skip")
        at.run()
        at.button(key="load").click()
        at.run()
        assert not at.exception, at.exception
        assert not at.error, [e.value for e in at.error]
        assert any("Loaded: ui_api.txt" in s.value.replace("\\", "") for s in at.warning)
        metrics = {m.label: m.value for m in at.metric}
        assert (metrics["triples loaded"], metrics["rejected"]) == ("2", "1")
        assert 2 in set(at.dataframe[1].value["line"])  # the rejected row, from the server
        at.switch_page("views/load.py")
        at.run()
        _ok(at)
        table = at.dataframe[-1].value
        assert "ui_api.txt" in set(table["name"])
        at.selectbox(key="remove_choice").set_value("ui_api.txt")
        at.button(key="remove_source").click()
        at.run()
        at.button(key="remove_confirm").click()
        at.run()
        _ok(at)
        assert any("removed 'ui_api.txt'" in x.value.replace("\\", "") for x in at.success)
        after = httpx.get(url + "/v1/stats", headers={"Authorization": f"Bearer {key}"}).json()
        assert after == before
        keys.revoke(wrec.id)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        keys.revoke(rec.id)
