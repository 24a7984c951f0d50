"""`talent ask`'s conversation files (talent_core/commands/conversations.py): kept turns,
owner-only and atomic, a file another user could have written refused."""

from __future__ import annotations

import os

import pytest

from talent_core.commands.conversations import ConversationError, read_turns, save_turn
from talent_core.conversation import HISTORY
from talent_core.models import Entity, Turn


def turn(i: int) -> Turn:
    return Turn(question=f"q{i}", topic=[Entity(id=f"t{i}", name=f"T{i}")])


def test_follow_ups_append_and_a_new_question_starts_again(tmp_path):
    data = tmp_path / "data"
    assert read_turns(data, "default") == []
    for i in range(HISTORY + 2):
        save_turn(data, "default", turn(i), follow_up=True)
    assert [t.question for t in read_turns(data, "default")] == [
        f"q{i}" for i in range(2, HISTORY + 2)]
    save_turn(data, "default", turn(9), follow_up=False)
    assert read_turns(data, "default") == [turn(9)]
    save_turn(data, "other", turn(1), follow_up=True)
    assert read_turns(data, "default") == [turn(9)]  # conversations are apart
    path = data / "conversations" / "default.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert (data / "conversations").stat().st_mode & 0o777 == 0o700
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("name", ["../x", "", ".hidden", "a/b", "x" * 65, "a."])
def test_a_bad_name_is_refused_before_anything_is_written(tmp_path, name):
    with pytest.raises(ConversationError, match="conversation name"):
        save_turn(tmp_path / "d", name, turn(1), follow_up=False)
    assert not (tmp_path / "d").exists()


def test_a_file_others_may_write_or_a_broken_one_is_refused(tmp_path):
    data = tmp_path / "data"
    save_turn(data, "default", turn(1), follow_up=False)
    path = data / "conversations" / "default.json"
    os.chmod(path, 0o666)
    with pytest.raises(ConversationError, match="writable by others"):
        read_turns(data, "default")
    os.chmod(path, 0o600)
    path.write_text('{"turns": [{"question": 3}]}')
    with pytest.raises(ConversationError, match=r"default.json: not a conversation file"):
        read_turns(data, "default")
    path.unlink()
    os.symlink(tmp_path / "elsewhere.json", path)
    with pytest.raises(ConversationError, match="a symlink"):
        read_turns(data, "default")
