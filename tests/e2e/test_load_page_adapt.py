"""The Load page's "Planner for this KG" (issue 45): which matcher plans on the store, then
"Adapt the planner to this KG" runs `train planner --self` in the background with progress,
and the page says what it did and plans with it from then on (AppTest, no browser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from toy_store import toy_env

pytestmark = pytest.mark.slow  # a training run of a minute or two

APP = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def test_adapt_the_planner_from_the_load_page(tmp_path, monkeypatch):
    with toy_env(tmp_path / "data", monkeypatch, unset=("TALENT_API_URL",)) as env:
        at = AppTest.from_file(APP, default_timeout=600)
        at.switch_page("views/load.py")
        at.run()
        assert not at.exception, at.exception
        text = " ".join(c.value for c in at.caption).replace("\\", "")
        assert "shipped matcher" in text
        at.number_input(key="adapt_anchors").set_value(10)
        at.button(key="adapt_start").click()
        at.run()  # the page follows the run to its end
        assert not at.exception, at.exception
        done = " ".join(s.value for s in at.success).replace("\\", "")
        assert "Adapted in" in done and "The next question plans with it" in done
        own = Path(env["TALENT_DATA_DIR"]) / "matcher"
        meta = json.loads((own / "matcher.json").read_text())
        assert meta["trained_on"]["anchors"] == 10
        at.run()
        text = " ".join(c.value for c in at.caption).replace("\\", "")
        assert "its own matcher, adapted" in text
