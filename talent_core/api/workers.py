"""Where the server's language-model work runs: one worker per model slot, each a thread
started with the server, so it keeps the server's CPU priority while request threads run
lower (TALENT_API_BROWSE_NICE; a thread inherits its starter's priority and an
unprivileged one cannot raise it back).

By default (TALENT_API_MODEL_PROCESS) each worker thread drives a child process of its own
that holds the language models and answers on the S the request retrieved: its own Python
interpreter, so the request threads' Python work (parsing, JSON, PCST, a load job) does not
hold the model stages back through the one interpreter lock. The child is started by the
worker thread (at its priority), on first use; one that dies is restarted for the next ask
and the ask it was answering gets 503. A server built on an injected pipeline (tests) runs
the work on the worker threads themselves.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import pickle
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from talent_core import spawn
from talent_core.api.auth import ApiError
from talent_core.errors import TalentError

log = logging.getLogger(__name__)
STAGE = "stage"  # a child's message that a stage ended: (STAGE, name, data); then (ok, result)


def _portable(e: BaseException) -> BaseException:
    """``e`` if it survives pickling, else one that says the same (a TaLenT error stays one:
    the API answers it as bad input, not as its own failure)."""
    try:
        return pickle.loads(pickle.dumps(e))
    except Exception:
        text = f"{type(e).__name__}: {e}"
        return TalentError(str(e)) if isinstance(e, TalentError) else RuntimeError(text)


def _run(pipe: Any, msg: tuple[Any, ...], on_stage: Callable[[str, Any], None] | None = None
         ) -> Any:
    """One message's work on a pipeline whose models are loaded: ("answer", args, kwargs)
    `Pipeline.answer` (``on_stage``: its stage hook), ("stance", request)
    `stance.answer_stance`."""
    if msg[0] == "stance":
        from talent_core.stance import answer_stance

        return answer_stance(pipe, msg[1])
    return pipe.answer(*msg[1], **msg[2], on_stage=on_stage)


def _child(conn: Any, settings: Any) -> None:
    """The model process: a Pipeline of its own; ("warm",) or `_run`'s messages in, (ok,
    result or exception) out, until the server closes the pipe."""
    import os

    from talent_core.embedding_numpy import share_cores_with
    from talent_core.pipeline import Pipeline

    share_cores_with(os.getppid())  # the server's threads are not a busy neighbour
    pipe = Pipeline(settings=settings)
    try:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return
            if msg is None:
                return
            try:
                if msg[0] == "warm":
                    pipe.load_models()
                    pipe.embedder.encode(["warm up"])
                    pipe.planner  # noqa: B018  (loads the planner once)
                    out: Any = True
                else:  # each stage's data goes back as it ends (when asked), answer last
                    out = _run(pipe, msg, (lambda name, data: conn.send((STAGE, name, data)))
                               if msg[-1] == STAGE else None)
                conn.send((True, out))
            except BaseException as e:  # handed to the waiting request
                conn.send((False, _portable(e)))
    finally:
        pipe.close()


class ModelWorkers:
    """`slots` worker threads taking model work from one queue: in child processes
    (``settings`` given) or on the threads themselves (``pipe`` given)."""

    def __init__(self, slots: int, settings: Any = None, pipe: Callable[[], Any] | None = None):
        self.process = settings is not None
        self._settings, self._pipe = settings, pipe
        self.models_loaded = False
        self.children: dict[str, Any] = {}  # worker thread name -> its model process
        self._loading = threading.Lock()  # in-thread: one load of the pipeline's models
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"talent-model-{i}",
                                          daemon=True) for i in range(slots)]  # fmt: skip
        for t in self._threads:
            t.start()

    # --- the request's side -----------------------------------------------------------------
    def answer(self, *args: Any, on_stage: Callable[[str, Any], None] | None = None,
               **kwargs: Any) -> Any:
        """`Pipeline.answer(*args, **kwargs)` on a model worker; its Answer (or exception).
        ``on_stage(name, data)`` is called (on the worker thread) as each stage ends."""
        return self._submit(("answer", args, kwargs), on_stage)

    def stance(self, request: Any) -> Any:
        """`stance.answer_stance(pipe, request)` on a model worker; its StanceAnswer."""
        return self._submit(("stance", request))

    def warm(self) -> None:
        """Load the language models (in each child, or the injected pipeline's)."""
        for _ in self._threads if self.process else self._threads[:1]:
            self._submit(("warm",))

    def _submit(self, msg: tuple[Any, ...], on_stage: Callable[[str, Any], None] | None = None
                ) -> Any:
        fut: Future[Any] = Future()
        self._jobs.put((fut, msg, on_stage))
        return fut.result()

    def close(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)

    # --- the worker's side ------------------------------------------------------------------
    def _work(self) -> None:
        child: Any = None
        conn: Any = None
        try:
            while (job := self._jobs.get()) is not None:
                fut, msg, on_stage = job
                if not fut.set_running_or_notify_cancel():
                    continue
                try:
                    if self.process:
                        if child is None or not child.is_alive():
                            child, conn = self._spawn()
                            self.children[threading.current_thread().name] = child
                        result = self._exchange(conn, msg, on_stage)
                    else:
                        result = self._in_thread(msg, on_stage)
                    self.models_loaded = True
                    fut.set_result(result)
                except (EOFError, OSError, BrokenPipeError) as e:
                    log.error("the model process stopped (%s); it restarts for the next ask", e)
                    child, conn = self._stop(child, conn), None
                    fut.set_exception(ApiError(503, "the model process stopped while "
                                               "answering; it restarts: retry"))
                except BaseException as e:
                    fut.set_exception(e)
        finally:
            self._stop(child, conn)

    def _in_thread(self, msg: tuple[Any, ...], on_stage: Callable[[str, Any], None] | None
                   ) -> Any:
        pipe = self._pipe()  # type: ignore[misc]
        if not pipe.models_loaded:
            with self._loading:  # two slots' first asks: the second waits for the one load
                pipe.load_models()
        return None if msg[0] == "warm" else _run(pipe, msg, on_stage)

    def _spawn(self) -> tuple[Any, Any]:
        ctx = mp.get_context("spawn")  # no fork of a threaded server
        conn, theirs = ctx.Pipe()
        child = ctx.Process(target=_child, args=(theirs, self._settings),
                            name="talent-models", daemon=True)  # fmt: skip
        spawn.start(child)
        theirs.close()
        log.info("model process %d started", child.pid)
        return child, conn

    @staticmethod
    def _exchange(conn: Any, msg: tuple[Any, ...],
                  on_stage: Callable[[str, Any], None] | None) -> Any:
        conn.send(msg if on_stage is None else (*msg, STAGE))  # STAGE last: send stages
        while (got := conn.recv())[0] == STAGE:  # a stage ended in the child
            if on_stage is not None:
                try:  # the exchange must read on to the answer whatever the hook does
                    on_stage(got[1], got[2])
                except Exception:
                    log.exception("a stage hook failed")
        ok, result = got
        if not ok:
            raise result
        return result

    @staticmethod
    def _stop(child: Any, conn: Any) -> None:
        if conn is not None:
            try:
                conn.send(None)
            except OSError:
                pass
            conn.close()
        if child is not None:
            child.join(10)
            if child.is_alive():
                child.kill()
                child.join(5)
        return None
