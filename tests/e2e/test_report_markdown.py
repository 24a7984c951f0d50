"""report.md with text from the user's files (issue 26, item 8): a question type such as
`![t](http://127.0.0.1:9/t.png) **b**` is written escaped, and the Evaluate page shows the
saved report's tables without an image fetch or bold, even for a report.md saved raw."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from talent_core.commands import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
APP = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
TYPE = "![t](http://127.0.0.1:9/t.png) **b**"
TYPES = [TYPE, "<img src=x onerror=alert(1)> | `c` $x$ [l](http://e.x) &amp;", "movie_to_actor"]


def _html(md: str) -> str:
    """report.md as a CommonMark + GFM-table renderer writes it (what a viewer shows)."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(md)


@pytest.fixture(scope="module")
def hostile_report(toy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[Path]:
    """A retrieval report on 3 toy questions whose qtype file holds Markdown/HTML, written
    by `talent eval --report` under the toy data dir's reports/ (the Evaluate page's)."""
    from talent_core.config import get_settings

    tmp = tmp_path_factory.mktemp("md")
    shutil.copy(FIXTURES / "metaqa" / "qa_1hop.txt", tmp / "qa_1hop.txt")
    (tmp / "qa_1hop_qtype.txt").write_text("\n".join(TYPES) + "\n", encoding="utf-8")
    out = Path(toy_env["TALENT_DATA_DIR"]) / "reports" / "hostile-types"
    mp = pytest.MonkeyPatch()
    for k, v in toy_env.items():
        mp.setenv(k, v)
    get_settings.cache_clear()
    try:
        r = CliRunner().invoke(app, ["eval", str(tmp / "qa_1hop.txt"), "--format", "metaqa",
                                     "--methods", "vector", "--limit", "3",
                                     "--report", str(out)])
        assert r.exit_code == 0, r.output
        yield out
    finally:
        mp.undo()
        get_settings.cache_clear()
        shutil.rmtree(out, ignore_errors=True)


def test_report_md_writes_user_text_escaped(hostile_report: Path):
    md = (hostile_report / "report.md").read_text(encoding="utf-8")
    assert TYPE not in md
    html = _html(md)
    plots = json.loads((hostile_report / "report.json").read_text())["plots"]
    assert re.findall(r'<img src="([^"]*)"', html) == plots  # the report's own plots only
    assert 'src="http' not in html and 'href="http' not in html
    # the types are there, literally, each in a row of the per-type table
    table = html[html.index("Per question type"):]
    table = table[:table.index("</table>")]
    assert not re.search(r"<(img|strong|em|a|code|del)\b", table), table
    rows = [tr for tr in table.split("<tr>") if "<td>" in tr]
    assert any("![t](http://127.0.0.1:9/t.png) **b**" in r for r in rows), table
    assert any("&lt;img src=x onerror=alert(1)&gt; | `c` $x$ [l](http://e.x) &amp;amp;" in r
               for r in rows), table
    assert {r.count("<td>") for r in rows} == {3}  # a `|` inside a type splits no cell


def test_evaluate_page_shows_a_saved_report_without_markup_from_user_text(
        hostile_report: Path, use_toy):
    """The saved report, picked on the Saved reports tab: its tables are drawn, the types
    escaped; a report.md saved with the type raw (an older writer, or by hand) is not
    rendered as Markdown either."""
    from streamlit.testing.v1 import AppTest

    md_file = hostile_report / "report.md"
    md_file.write_text(md_file.read_text(encoding="utf-8") + f"\n\n{TYPE}\n", encoding="utf-8")
    for broken in (False, True):
        if broken:  # a report.json today's writer cannot read: report.md as plain text
            data = json.loads((hostile_report / "report.json").read_text(encoding="utf-8"))
            del data["config"]
            (hostile_report / "report.json").write_text(json.dumps(data), encoding="utf-8")
        at = AppTest.from_file(APP, default_timeout=120)
        at.run()
        at.switch_page("views/evaluate.py")
        at.run()
        assert not at.exception, at.exception
        at.multiselect(key="eval_compare").set_value([str(hostile_report)])
        at.run()
        assert not at.exception, at.exception
        shown = [m.value for m in at.markdown if "Evaluation report" in m.value]
        code = [c.value for c in at.code if "Evaluation report" in c.value]
        if broken:
            assert not shown and code and TYPE in code[0]  # literal text, not Markdown
            continue
        assert len(shown) == 1 and not code
        html = _html(shown[0])
        assert "<img" not in html and 'href="http' not in html  # no plots, no links
        assert "<strong>b</strong>" not in html and "<code>c</code>" not in html
        assert "![t](http://127.0.0.1:9/t.png) **b**" in html
