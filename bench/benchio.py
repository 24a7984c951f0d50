"""What the bench scripts share: atomic JSON results and the machine's load."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from pathlib import Path


def write_json_atomic(path: Path, data: dict) -> None:
    """``data`` as indented JSON at ``path``, all or nothing (temp file + fsync + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def load_average() -> dict:
    """1/5/15-minute load averages, `uptime`'s line and the CPU count."""
    out: dict = dict(zip(("1m", "5m", "15m"), (round(x, 2) for x in os.getloadavg()),
                         strict=True))
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out["uptime"] = subprocess.run(
            ["uptime"], capture_output=True, text=True, timeout=5, check=False
        ).stdout.strip()
    out["cpu_count"] = os.cpu_count()
    return out
