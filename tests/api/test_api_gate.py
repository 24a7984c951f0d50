"""The server's CPU manners: the load jobs' thread runs at a lower CPU priority (Linux), and
the model slots count the time they are held (/readyz llm.busy_s: the model's use)."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from talent_core.api.runtime import LlmSlots, background_priority


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice: Linux")
def test_background_priority_lowers_only_the_calling_thread():
    seen: dict[str, int] = {}

    def loader() -> None:
        background_priority(10)
        seen["loader"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        child = threading.Thread(target=lambda: seen.setdefault(
            "child", os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        child.start()
        child.join()

    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    t = threading.Thread(target=loader)
    t.start()
    t.join()
    assert seen["loader"] == min(base + 10, 19) and seen["child"] == seen["loader"]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base


def test_the_model_slots_count_their_busy_time():
    llm = LlmSlots(1, 8)
    slot = llm.admit()
    with slot:
        time.sleep(0.2)
    slot.release()
    assert 0.19 <= llm.busy_s < 1.0 and llm.running == 0 and llm.admitted == 0
    queued = llm.admit()
    queued.release()  # left the queue without a slot: no time counted
    assert llm.busy_s < 1.0 and llm.admitted == 0
