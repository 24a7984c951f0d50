"""Provenance of a report: the code commit, package versions, the machine, and hashes of
files and of the run's configuration (what makes a report reproducible)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from talent_core.llm.models import git_commit

PACKAGES = ("torch", "transformers", "peft", "sentence-transformers", "pcst-fast2",
            "pcst_fast", "numpy", "matplotlib")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def code_commit() -> dict[str, Any]:
    """{commit, dirty} of the checkout the package runs from (`llm.models.git_commit`, the
    adapters' provenance; None when not a checkout)."""
    commit = git_commit()
    if commit is None:
        return {"commit": None, "dirty": None}
    try:
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=Path(__file__).resolve().parent, capture_output=True,
                               text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": commit, "dirty": None}
    return {"commit": commit, "dirty": bool(dirty)}


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = None
    return out


def machine() -> dict[str, Any]:
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"platform": platform.platform(), "python": platform.python_version(),
            "processor": platform.machine(), "cpu_count": os.cpu_count(), "load_average": load}


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()
                          ).hexdigest()[:16]
