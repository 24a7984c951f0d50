"""The Load page's upload limit (`max_upload_mb`: `talent app` hands it to Streamlit, the
page says it and refuses a larger file itself) and its Cancel button, pressed in a real
browser while a load runs: the load stops at a batch boundary, the summary says so, and the
store holds exactly the committed batches (screenshot in $TALENT_BROWSER_ARTIFACTS)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_browser import (  # noqa: F401 - `driver` is the browser fixture
    ARTIFACTS,
    CHROMIUM,
    DRIVER,
    HAVE_SELENIUM,
    _el,
    _free_port,
    _idle,
    _open,
    _press,
    _shot,
    _text,
    _wait,
    driver,
    serve_command,
)

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "app" / "main.py")
MB = 1024 * 1024


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    from talent_core.config import get_settings

    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_app_command_passes_the_upload_limit_to_streamlit(settings_env):
    from typer.testing import CliRunner

    from talent_core.commands import app, ui

    calls: list[list[str]] = []
    settings_env.setattr(ui.os, "execv", lambda path, cmd: calls.append(cmd))
    settings_env.setenv("TALENT_MAX_UPLOAD_MB", "7")
    res = CliRunner().invoke(app, ["app", "--port", "8599"])
    assert res.exit_code == 0, res.output
    cmd = calls[0]
    assert cmd[cmd.index("--server.maxUploadSize") + 1] == "7"


def test_load_page_refuses_an_upload_over_the_limit(settings_env, tmp_path):
    """A file over the limit (here 1 MB) is refused with its name, size and the limit; the
    Load button is disabled and nothing is written."""
    from talent_core.config import get_settings
    from talent_core.store import open_store
    from talent_core.store.falkordb_server import EmbeddedServer

    data = tmp_path / "store"
    settings_env.setenv("TALENT_DATA_DIR", str(data))
    settings_env.setenv("TALENT_STORE", "embedded")
    settings_env.setenv("TALENT_MAX_UPLOAD_MB", "1")
    get_settings.cache_clear()
    try:
        at = AppTest.from_file(APP, default_timeout=180)
        at.switch_page("views/load.py")
        at.run()
        assert any("Largest upload: 1 MB" in c.value for c in at.caption)
        big = b"".join(b"head %d|rel|tail %d\n" % (i, i) for i in range(60_000))
        assert len(big) > MB
        at.file_uploader(key="upload").set_value(("kb.txt", big, "text/plain"))
        at.run()
        errors = [e.value.replace("\\", "") for e in at.error]
        assert any("kb.txt:" in e and "over the upload limit of 1 MB" in e for e in errors), errors
        assert at.button(key="load").disabled  # AppTest, as a browser, cannot press it
        assert not at.exception, at.exception
        assert not at.success and not at.metric
        store = open_store(get_settings())
        try:
            assert store.stats().triples == 0
        finally:
            store.close()
    finally:
        EmbeddedServer.for_dir(data).stop()


ROWS, BATCH = 30_000, 500


@pytest.fixture
def cancel_server(toy_env, tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """`talent app` (the CLI, so that its --server.maxUploadSize is what the browser sees)
    on an empty store of its own, batches of BATCH rows, uploads up to 2 MB; yields (url,
    data dir, log)."""
    sys.path.insert(0, str(REPO / "tests"))
    from tiny_llm import tiny_llama

    data = tmp_path / "store"
    port = _free_port()
    env = {**os.environ, **toy_env, "TALENT_DATA_DIR": str(data),
           "TALENT_BASE_MODEL": str(tiny_llama(tmp_path / "tiny")),
           "TALENT_BATCH_SIZE": str(BATCH), "TALENT_MAX_UPLOAD_MB": "2",
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           # this checkout's CLI and app, whatever the environment has installed
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                        os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "talent_core", "app", "--port", str(port)]
    try:
        with serve_command(cmd, port, env, tmp_path) as (url, log):
            yield url, data, log
    finally:
        from talent_core.store.falkordb_server import EmbeddedServer

        EmbeddedServer.for_dir(data).shutdown()  # started by the app's process


@pytest.mark.browser
@pytest.mark.skipif(not (CHROMIUM and DRIVER and HAVE_SELENIUM)
                    and not os.environ.get("TALENT_REQUIRE_BROWSER"),
                    reason="needs chromium, chromedriver and selenium")
@pytest.mark.slow  # over 30 s: the slow suite (CI runs both)
def test_cancel_a_running_load_in_the_browser(cancel_server, driver, tmp_path):  # noqa: F811
    url, data, log = cancel_server
    d = driver
    src = tmp_path / "kb.txt"
    src.write_text("".join(f"Person {i}|acted_in|Film {i}\n" for i in range(ROWS)))
    try:
        _open(d, url + "/load")
        _wait(d, lambda d: "per file" in _text(d), 180, "no file uploader")
        text = _text(d)
        assert "Largest upload: 2 MB" in text and "2MB per file" in text, text
        _el(d, '.st-key-upload input[type="file"]').send_keys(str(src))
        _idle(d)
        for _ in range(3):  # a click landing in the upload's rerun can be dropped
            _press(d, _el(d, ".st-key-load button"))
            try:
                _el(d, ".st-key-cancel_load button", 30)
                break
            except Exception:
                continue
        committed = re.compile(r"([\d,]+) triples ·")

        def some_committed(d) -> bool:
            m = committed.search(_text(d))
            return bool(m) and int(m.group(1).replace(",", "")) > 0

        _wait(d, some_committed, 240, "no batch committed")
        _shot(d, "load-cancel-1-running")
        _press(d, _el(d, ".st-key-cancel_load button"))
        _wait(d, lambda d: "Cancelled: kb.txt" in _text(d), 120, "no cancelled summary")
        _wait(d, lambda d: "store now:" in _text(d) and not d.find_elements(
            "css selector", ".st-key-cancel_load button"), 60, "the run did not end")
        _idle(d)
        _shot(d, "load-cancel-2-cancelled")
        text = _text(d)
        m = re.search(r"stopped after ([\d,]+) rows \(through line ([\d,]+) of ([\d,]+)\) · "
                      r"([\d,]+) triples committed", text)
        assert m, text
        rows, line, total, triples = (int(g.replace(",", "")) for g in m.groups())
        assert total == ROWS and 0 < triples < ROWS and triples % BATCH == 0
        assert rows == line == triples  # one distinct triple a line, whole batches
    except Exception:
        _shot(d, "load-cancel-failure")
        (ARTIFACTS / "load-cancel-failure.html").write_text(d.page_source)
        raise
    # the store holds exactly the committed batches
    from talent_core.config import Settings
    from talent_core.store.falkordb import FalkorDBStore

    store = FalkorDBStore.from_settings(Settings(data_dir=data, _env_file=None))
    try:
        s = store.stats()
    finally:
        store.close()
    assert (s.triples, s.entities, s.entities_with_embedding) == (triples, 2 * triples,
                                                                  2 * triples)
    assert "Traceback" not in log.read_text()
