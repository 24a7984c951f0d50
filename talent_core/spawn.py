"""Child processes started by multiprocessing's spawn method without the parent's
``__main__``.

A spawned child first imports the parent's ``__main__`` (by module name, or runs its file
as ``__mp_main__``). Under Streamlit that is the page script: its script runner installs the
running script as ``__main__`` and leaves it there, so a child started from the Load page
(`training.self_job`) ran the whole app, and the Ask page, before its own work; in a test
process it is whatever script Streamlit's AppTest ran last. The children here (that job,
the API's model process) need nothing of ``__main__``: their targets are
module-level functions of this package, pickled by name. `start` takes the child's
preparation data with a bare ``__main__`` in place, then puts the parent's back.
"""

from __future__ import annotations

import sys
import threading
import types
from multiprocessing.process import BaseProcess

_LOCK = threading.Lock()  # one start at a time: the swap is process-wide


def start(proc: BaseProcess) -> None:
    """``proc.start()`` with a bare ``__main__`` for the child to import (module doc)."""
    with _LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            proc.start()
        finally:
            if main is None:
                sys.modules.pop("__main__", None)
            else:
                sys.modules["__main__"] = main
