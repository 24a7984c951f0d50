"""TaLenT GraphQA — the analyst's workbench (Streamlit, one URL per page).

  /          Ask       a question -> the answer, its evidence paths and graph, export
  /explore   Explore   find an entity, browse its neighbourhood, ask about it
  /load      Load      upload a KG file with progress, counts and rejected rows
  /evaluate  Evaluate  run a small report, show saved reports side by side

The pages call the Pipeline and, for the KG around an answer or an entity,
`talent_core.explore`; never the store or Cypher of their own. KG text, model output and
exception messages are shown through `app.safe.plain` or as table cells, never as
Markdown/HTML.
Run: `talent app` (or `streamlit run app/main.py`).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from talent_core.config import get_settings
from talent_core.errors import SettingsError
from talent_core.explore import store_problem
from talent_core.ui.safe import plain

VIEWS = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="TaLenT GraphQA", layout="wide")

PAGES = {
    "ask": st.Page(VIEWS / "ask.py", title="Ask", icon=":material/question_answer:",
                   default=True),  # the default page: at /
    "explore": st.Page(VIEWS / "explore.py", title="Explore", icon=":material/hub:",
                       url_path="explore"),
    "load": st.Page(VIEWS / "load.py", title="Load", icon=":material/upload_file:",
                    url_path="load"),
    "evaluate": st.Page(VIEWS / "evaluate.py", title="Evaluate", icon=":material/analytics:",
                        url_path="evaluate"),
}
_nav = st.navigation(list(PAGES.values()))
try:
    _problem = store_problem(get_settings())  # before any page opens the store
except SettingsError as e:  # a TALENT_ variable with a value it cannot take
    _problem = str(e)
if _problem:  # a bad setting, or a data dir another user controls, is refused
    st.error(plain(_problem))
    st.stop()
_nav.run()
