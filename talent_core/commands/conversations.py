"""`talent ask`'s conversations: the last turns of each named conversation, kept in
`<data_dir>/conversations/<name>.json` (0600, changed under `conversations.lock`, replaced
atomically) so that `talent ask --follow-up` can refer to the previous answers from a new
shell. A question without --follow-up starts its conversation again."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, ValidationError

from talent_core.conversation import HISTORY
from talent_core.errors import TalentError
from talent_core.models import Turn
from talent_core.private_files import locked, read_private, write_atomic
from talent_core.store._common import make_private_dirs

FOLDER = "conversations"
LOCK = "conversations.lock"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class ConversationError(TalentError):
    """A conversation name or file that cannot be used."""


class _File(BaseModel):
    turns: list[Turn]


def _path(data_dir: Path, name: str) -> Path:
    if not NAME.fullmatch(name) or name.endswith("."):
        raise ConversationError(f"conversation name {name!r}: use 1-64 letters, digits, "
                                "'_', '.' or '-', starting with a letter or digit")
    return Path(data_dir) / FOLDER / f"{name}.json"


def read_turns(data_dir: Path, name: str) -> list[Turn]:
    """The conversation's turns, oldest first ([]: none yet)."""
    path = _path(data_dir, name)
    raw = read_private(path, "conversation file", ConversationError)
    if raw is None:
        return []
    try:
        return _File.model_validate_json(raw).turns
    except ValidationError as e:
        raise ConversationError(f"{path}: not a conversation file ({e.error_count()} "
                                f"problem(s), first: {e.errors()[0]['msg']}); remove it "
                                "or ask without --follow-up") from None


def save_turn(data_dir: Path, name: str, turn: Turn, follow_up: bool) -> None:
    """Add ``turn`` to the conversation (``follow_up``), or start it again with it; only
    the last `HISTORY` turns are kept."""
    path = _path(data_dir, name)
    with locked(Path(data_dir), LOCK, "conversations", ConversationError) as real:
        path = real / FOLDER / path.name
        try:
            make_private_dirs(path.parent)
        except OSError as e:
            raise ConversationError(f"{path.parent}: cannot create it ({e.strerror})"
                                    ) from None
        turns = [*read_turns(real, name), turn] if follow_up else [turn]
        body = json.dumps({"turns": [t.model_dump() for t in turns[-HISTORY:]]},
                          ensure_ascii=False).encode()
        write_atomic(path, body, "conversation file", ConversationError)
