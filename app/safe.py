"""What the UI does before showing or writing anything that came from outside: KG text,
model output and exception messages are shown as plain text (never Markdown: a KG name
like `![x](http://...)` must not become an image or a link), and an uploaded file is
written under a safe name (`talent_core.text.safe_upload_name`) inside the upload
folder."""

from __future__ import annotations

import re
from pathlib import Path

from talent_core.errors import TalentError
from talent_core.text import safe_upload_name  # the one upload-name rule (the API's too)

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!<>|~$:])")


def plain(text: str) -> str:
    """``text`` with every Markdown/HTML-significant character backslash-escaped and
    control characters dropped, for st.markdown/st.error/st.success."""
    text = "".join(c for c in str(text) if c in "\n\t" or c.isprintable())
    return _MD_SPECIAL.sub(r"\\\1", text)


def error_line(e: BaseException) -> str:
    """One line for the analyst: a TaLenT error's message as it is (bad input, a setting,
    a file's line); any other error's class name first, for a bug report."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if isinstance(e, TalentError) and text:
        return text
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def upload_path(folder: Path, name: str) -> Path:
    """Where an upload named ``name`` is written: always directly inside ``folder``."""
    path = (folder / safe_upload_name(name)).resolve()
    if path.parent != folder.resolve():  # cannot happen after safe_upload_name; checked anyway
        raise ValueError(f"unsafe upload name {name!r}")
    return path


def report_plots(folder: Path, data: dict) -> list[Path]:
    """The report's plots that are PNG files inside its folder (a hand-edited report.json
    must not show any other file on the machine)."""
    root = folder.resolve()
    out = []
    for name in data.get("plots", []):
        p = (folder / str(name)).resolve()
        if p.parent == root and p.suffix == ".png" and p.is_file():
            out.append(p)
    return out
