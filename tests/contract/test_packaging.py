"""Packaging: one installed top-level name, `talent_core`; the design card's top-level
folders install under it (pyproject's package-dir), and every package folder is listed."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"talent_core": "talent_core", "app": "talent_core.ui",
           "loaders": "talent_core.loaders", "cypher": "talent_core.cypher"}


def test_every_package_folder_is_listed_and_nothing_installs_a_generic_top_level_name():
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(tool["packages"])
    assert {p.split(".")[0] for p in listed} == {"talent_core"}
    mapped = {pkg: folder for pkg, folder in tool["package-dir"].items()}
    assert mapped == {v: k for k, v in FOLDERS.items() if k != "talent_core"}
    found = set()
    for folder, pkg in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            found.add(".".join([pkg, *rel]))
    assert found == listed


def test_the_mapped_packages_import_under_talent_core():
    import talent_core.cypher
    import talent_core.loaders
    import talent_core.ui.kg
    from talent_core.store.cypher import statement

    assert Path(talent_core.ui.kg.__file__).parent == REPO / "app"
    assert Path(talent_core.loaders.__file__).parent == REPO / "loaders"
    assert Path(talent_core.cypher.__file__).parent == REPO / "cypher"
    assert "MATCH" in statement("follow_relation", "falkordb")
