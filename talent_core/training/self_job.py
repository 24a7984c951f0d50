"""`talent train planner --self` in the background, for the API (`POST /v1/planner/adapt`)
and the UI's Load page: a child process (its own interpreter and memory: the fit peaks at
~2 GB, and torch's threads stay out of the server's) runs `matcher.fit_self` and sends its
progress through a pipe; a thread here reads it into the job. The matcher lands in the
data dir (`planning.plan.SELF_DIR`) and every running process plans with it from its next
question (`planning.matcher.load_matcher`). One at a time per matcher across processes
(`matcher.exclusive`); Cancel stops the child, and the matcher in place stays.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from talent_core import spawn
from talent_core.errors import TalentError, TrainingBusyError
from talent_core.planning.self_train import SELF

log = logging.getLogger(__name__)


def _child(conn: Any, settings: Any, output: str, anchors: int, nice: int) -> None:
    """The adaptation itself: ("progress", stage, done, total) messages, then ("done",
    meta) or ("failed", kind, message)."""
    from talent_core.training.matcher import fit_self

    if nice > 0:
        try:
            os.nice(nice)
        except OSError:
            pass
    try:
        meta = fit_self(settings, Path(output), anchors=anchors,
                        progress=lambda stage, k, n: conn.send(("progress", stage, k, n)))
        conn.send(("done", meta))
    except TrainingBusyError as e:
        conn.send(("failed", "busy", str(e)))
    except TalentError as e:
        conn.send(("failed", "bad_input", str(e)))
    except BaseException as e:  # reported to whoever started it; the log has the rest
        log.exception("self-adaptation failed")
        conn.send(("failed", "internal", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


class SelfAdaptation:
    """One background `--self` run: ``status`` (running, done, failed, cancelled),
    ``stage`` / ``done`` / ``total`` (questions: anchors; fit, rerank: steps), ``result`` (the
    matcher's meta), ``error`` ((code, message))."""

    def __init__(self, settings: Any, anchors: int | None = None, nice: int = 10):
        from talent_core.planning.plan import SELF_DIR
        from talent_core.training.matcher import exclusive

        self.id = uuid.uuid4().hex[:12]
        self.output = Path(settings.data_dir) / SELF_DIR
        self.anchors = anchors or SELF.anchors
        with exclusive(self.output):  # refused at once (TrainingBusyError) when one runs
            pass
        self.status, self.stage, self.done, self.total = "running", "starting", 0, 0
        self.result: dict[str, Any] | None = None
        self.error: tuple[str, str] | None = None
        self.t0, self.seconds = time.perf_counter(), 0.0
        ctx = mp.get_context("spawn")  # a threaded server must not fork
        parent, child = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child, args=(child, settings, str(self.output),
                                                      self.anchors, nice),
                                 name="talent-self-adapt", daemon=True)
        spawn.start(self._proc)
        child.close()
        self._reader = threading.Thread(target=self._read, args=(parent,), daemon=True,
                                        name="talent-self-adapt-reader")
        self._reader.start()

    def _read(self, conn: Any) -> None:
        try:
            while True:
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    break
                if msg[0] == "progress":
                    _, self.stage, self.done, self.total = msg
                elif msg[0] == "done":
                    self.result, self.status = msg[1], "done"
                elif msg[0] == "failed":
                    self.error, self.status = (msg[1], msg[2]), "failed"
        finally:
            conn.close()
            self._proc.join(30)
            if self.status == "running":  # the child ended without a word: killed, or died
                self.status = "failed"
                self.error = ("internal", f"the adaptation process ended (exit code "
                                          f"{self._proc.exitcode}) before it finished")
            self.seconds = time.perf_counter() - self.t0

    def cancel(self) -> None:
        """Stop the child (the matcher in place stays: the new one is written last)."""
        if self.status == "running" and self._proc.is_alive():
            self.status = "cancelled"
            self._proc.terminate()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the end; True when it ended."""
        self._reader.join(timeout)
        return not self._reader.is_alive()

    def out(self) -> dict[str, Any]:
        """The job as the API and the UI show it."""
        elapsed = time.perf_counter() - self.t0 if self.status == "running" else self.seconds
        meta = self.result or {}
        return {"id": self.id, "status": self.status, "matcher": str(self.output),
                "anchors": self.anchors,
                "progress": {"stage": self.stage, "done": self.done, "total": self.total,
                             "elapsed_s": round(elapsed, 1)},
                "result": None if not meta else {
                    "name": meta.get("name"), "trained_on": meta.get("trained_on"),
                    "training": meta.get("training"), "validation": meta.get("validation")},
                "error": None if self.error is None else {"code": self.error[0],
                                                          "message": self.error[1]}}
