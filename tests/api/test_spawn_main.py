"""A child spawned for the model process or a `--self` run does not run the parent's
``__main__`` (Streamlit leaves the page script there; `talent_core.spawn`)."""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
import types

from talent_core import spawn


def _start(tmp_path, helper: bool) -> tuple[bool, int | None]:
    """Spawn a do-nothing child while ``__main__`` is a script that leaves a file behind,
    as Streamlit's script runner leaves the page script; (the file left, exit code)."""
    marker = tmp_path / "page-ran"
    script = tmp_path / "page.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    fake = types.ModuleType("__main__")
    fake.__file__ = str(script)
    real = sys.modules["__main__"]
    sys.modules["__main__"] = fake
    try:
        proc = mp.get_context("spawn").Process(target=time.sleep, args=(0,))
        spawn.start(proc) if helper else proc.start()
        proc.join(120)
        assert sys.modules["__main__"] is fake  # the parent's own main stays
    finally:
        sys.modules["__main__"] = real
    return marker.exists(), proc.exitcode


def test_a_spawned_child_does_not_run_the_page_script_left_as_main(tmp_path):
    stock, helper = tmp_path / "stock", tmp_path / "helper"
    stock.mkdir()
    helper.mkdir()
    assert _start(stock, helper=False)[0]  # multiprocessing alone runs it: why the helper
    assert _start(helper, helper=True) == (False, 0)
