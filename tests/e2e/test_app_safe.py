"""The UI's output and upload hygiene (issue 15): no Markdown from KG/model/exception text,
uploads written inside the upload folder only."""

from __future__ import annotations

from pathlib import Path

import pytest

from talent_core.ui.safe import plain, report_plots, safe_upload_name, upload_path


@pytest.mark.parametrize("name, expected", [
    ("../../../../tmp/x", "x"),
    ("/tmp/x.tsv", "x.tsv"),
    ("..\\..\\evil.csv", "evil.csv"),
    ("..", "upload"),
    (".bashrc", "bashrc"),
    ("my kb (v2).txt", "my_kb_v2_.txt"),
    ("", "upload"),
])
def test_upload_names_stay_inside_the_folder(tmp_path: Path, name: str, expected: str):
    assert safe_upload_name(name) == expected
    p = upload_path(tmp_path, name)
    assert p.parent == tmp_path.resolve() and p.name == expected


def test_plain_text_renders_no_markdown_or_html():
    s = plain("![pic](http://evil/x.png) [link](http://evil) **bold** <img src=x> `c`\x1b[31m")
    for raw in ("![", "](", "**", "`c`", "\x1b"):
        assert raw not in s
    assert "\\<img" in s  # Streamlit never renders raw HTML; escaped anyway
    # every special character is escaped, the letters are kept
    assert s.replace("\\", "") == "![pic](http://evil/x.png) [link](http://evil) **bold** " \
        "<img src=x> `c`[31m"


def test_report_plots_stay_inside_the_report_folder(tmp_path: Path):
    """A hand-edited report.json names files outside its folder or not PNGs: only its own
    PNGs are shown (issue 26: the Evaluate page showed any image path it named)."""
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "ok.png").write_bytes(b"\x89PNG")
    (folder / "notes.txt").write_text("x")
    (tmp_path / "secret.png").write_bytes(b"\x89PNG")
    (folder / "link.png").symlink_to(tmp_path / "secret.png")
    data = {"plots": ["ok.png", "../secret.png", str(tmp_path / "secret.png"), "notes.txt",
                      "link.png", "missing.png"]}
    assert report_plots(folder, data) == [(folder / "ok.png").resolve()]
