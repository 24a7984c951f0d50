"""Helpers of the HTTP API tests: the Bearer header, an SSE parser, the stage order."""

from __future__ import annotations

import json
from pathlib import Path


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def sse_events(text: str) -> list[tuple[str, dict]]:
    """(event, data) of each Server-Sent Event in ``text``."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        if not lines:  # a comment (heartbeat) only
            continue
        event = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "message")
        data = "\n".join(ln[5:].lstrip() for ln in lines if ln.startswith("data:"))
        out.append((event, json.loads(data)))
    return out


STAGES = ["seeds", "candidate", "selection", "plan", "answer", "done"]


def api_settings(env: dict[str, str], **extra):
    from talent_core.config import Settings

    return Settings(data_dir=Path(env["TALENT_DATA_DIR"]), base_model=env["TALENT_BASE_MODEL"],
                    model_cache_dir=Path(env["TALENT_MODEL_CACHE_DIR"]), planner="none",
                    _env_file=None, **extra)
