"""The one lock of the data dir's lock files (`store._common.flocked`): the job lock, the
vector fill's, the keys' and conversations' (`private_files.locked`) and training's take it."""

from __future__ import annotations

import os

import pytest

from talent_core.errors import StoreBusyError, TrainingBusyError
from talent_core.store._common import JOB_LOCK_NAME, exclusive_job, flocked


def test_a_held_lock_refuses_at_once_and_says_who_holds_it(tmp_path):
    with exclusive_job(tmp_path, "talent load kb.txt", shared=True):
        with pytest.raises(StoreBusyError, match=r"talent load kb\.txt\) is running"):
            # another holder (another open file description: as another process would)
            with flocked(tmp_path / JOB_LOCK_NAME, "job", StoreBusyError, wait=False,
                         busy=lambda fd: os.pread(fd, 4096, 0).decode() + " is running"):
                pass
        with flocked(tmp_path / JOB_LOCK_NAME, "job", StoreBusyError, shared=True,
                     wait=False):
            pass  # loads run together
    with flocked(tmp_path / JOB_LOCK_NAME, "job", StoreBusyError, wait=False):
        pass  # free again


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path):
    """The job lock followed a symlink before: a planted link made a load write its pid into
    (and truncate) a file of the planter's choosing."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / JOB_LOCK_NAME).symlink_to(target)
    with pytest.raises(StoreBusyError, match="a symlink"):
        with exclusive_job(data, "talent load kb.txt"):
            pass
    assert target.read_text() == "keep me"


def test_a_lock_file_others_may_read_is_made_private(tmp_path):
    lock = tmp_path / "x.lock"
    lock.write_text("")
    lock.chmod(0o644)
    with flocked(lock, "x", StoreBusyError):
        assert lock.stat().st_mode & 0o777 == 0o600


def test_training_refuses_a_second_adaptation(tmp_path):
    from talent_core.training.matcher import exclusive

    with exclusive(tmp_path / "matcher"):
        with pytest.raises(TrainingBusyError, match="another `talent train planner --self`"):
            with exclusive(tmp_path / "matcher"):
                pass
