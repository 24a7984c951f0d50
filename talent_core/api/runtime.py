"""What `talent serve` holds for every request (`Runtime`): the settings, the keys, the one
Pipeline (built when the server starts, its models loaded lazily or at startup with
TALENT_API_PRELOAD), the bounded queue of language-model work (`LlmSlots`:
TALENT_API_LLM_SLOTS at once, TALENT_API_LLM_QUEUE waiting, 429 past that), the model
workers and the load jobs; and the CPU priorities of the request and load threads."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Request

from talent_core.api.auth import ApiError
from talent_core.api.keys import KeyStore
from talent_core.api.loads import LoadJobs
from talent_core.api.workers import ModelWorkers
from talent_core.config import Settings

log = logging.getLogger(__name__)


class LlmSlots:
    """The bounded queue of language-model work: ``slots`` run at once, ``queue`` more wait;
    `admit` refuses the next one (429) instead of letting it wait without bound."""

    def __init__(self, slots: int, queue: int):
        self.slots, self.queue = slots, queue
        self._sem = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.admitted = 0  # running + waiting
        self.running = 0
        self.busy_s = 0.0  # seconds a model slot was held, summed (its use over time)

    def admit(self) -> Slot:
        with self._lock:
            if self.admitted >= self.slots + self.queue:
                raise ApiError(429, f"the model queue is full ({self.slots} running, "
                               f"{self.queue} waiting): retry later", code="busy",
                               headers={"Retry-After": "2"})
            self.admitted += 1
        return Slot(self)


class Slot:
    """One admitted request: `with slot:` holds a model slot; `release` (idempotent) leaves
    the queue, also when a streaming client went away."""

    def __init__(self, owner: LlmSlots):
        self.owner = owner
        self._held = False
        self._done = False
        self._since = 0.0
        self._lock = threading.Lock()

    def acquire(self, timeout: float | None = None) -> bool:
        """Hold a model slot (at once if held already); False when ``timeout`` passed."""
        if self._held:
            return True
        if not self.owner._sem.acquire(timeout=timeout):
            return False
        with self._lock:
            self._held = True
            self._since = time.perf_counter()
        with self.owner._lock:
            self.owner.running += 1
        return True

    def __enter__(self) -> Slot:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            held, self._held = self._held, False
        if held:
            with self.owner._lock:
                self.owner.running -= 1
                self.owner.busy_s += time.perf_counter() - self._since
            self.owner._sem.release()

    def release(self) -> None:
        self.__exit__()
        with self._lock:
            done, self._done = self._done, True
        if not done:
            with self.owner._lock:
                self.owner.admitted -= 1


def background_priority(nice: int) -> None:
    """Lower the CPU priority of the calling thread (and of the threads it starts: the
    loader's writer, its embedding threads) by ``nice`` on Linux; elsewhere nothing."""
    if nice <= 0:
        return
    try:
        tid = threading.get_native_id()  # relative: a server started niced stays below it
        os.setpriority(os.PRIO_PROCESS, tid, min(os.getpriority(os.PRIO_PROCESS, tid) + nice,
                                                 19))
    except (AttributeError, OSError) as e:
        log.info("a thread keeps its priority: %s", e)


_niced = threading.local()


def request_priority(nice: int) -> None:
    """Once per request thread: lower it by ``nice`` (a raised nice cannot be undone without
    privileges, hence the model work's own threads, `workers.ModelWorkers`)."""
    if not getattr(_niced, "done", False):
        _niced.done = True
        background_priority(nice)


class NoSlot:
    """The `Slot` of a request that runs no model (an ask in mode "retrieval")."""

    def acquire(self, timeout: float | None = None) -> bool:
        return True

    def __enter__(self) -> NoSlot:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def release(self) -> None:
        pass


class Runtime:
    """What the server holds for every request: the settings, the keys, the one Pipeline
    (built on first use), the model slots and the load jobs."""

    def __init__(self, settings: Settings, pipeline_factory: Callable[[], Any] | None = None):
        self.settings = settings
        self.keys = KeyStore(settings.data_dir)
        self.llm = LlmSlots(settings.api_llm_slots, settings.api_llm_queue)
        self._factory = pipeline_factory or self._default_pipeline
        # the default pipeline's models run in child processes; an injected one's in-thread
        in_process = pipeline_factory is not None or not settings.api_model_process
        self.models = ModelWorkers(settings.api_llm_slots,
                                   settings=None if in_process else settings,
                                   pipe=lambda: self.pipe)  # fmt: skip
        self._pipe: Any = None
        self._pipe_lock = threading.Lock()
        self.loads = LoadJobs(self, background_priority)
        self.started = time.time()
        self.warm_error: str | None = None  # why the preload failed (`warm_quietly`)
        self.last_request = time.monotonic()  # when the last request ended (the gate)

    def _default_pipeline(self) -> Any:
        from talent_core.pipeline import Pipeline

        return Pipeline(settings=self.settings)

    @property
    def pipe(self) -> Any:
        if self._pipe is None:
            with self._pipe_lock:
                if self._pipe is None:
                    self._pipe = self._factory()
        return self._pipe

    def warm(self) -> None:
        """Load what the first ask would (TALENT_API_PRELOAD): the language models (in the
        model workers), the planner and the query embedder (one encode loads its weights)."""
        self.models.warm()
        pipe = self.pipe
        pipe.embedder.encode(["warm up"])
        pipe.planner  # noqa: B018  (loads the planner once)

    def warm_quietly(self) -> None:
        """`warm` on a thread of its own at start (TALENT_API_PRELOAD): a failure is logged
        and said by /readyz (`warm_error`), the asks then load the models themselves."""
        try:
            self.warm()
        except Exception as e:
            log.error("preloading the models failed: %s: %s", type(e).__name__, e)
            self.warm_error = f"{type(e).__name__}: {e}"

    def niced(self) -> None:
        """The calling request thread at the browse priority (see `ModelWorkers`)."""
        request_priority(self.settings.api_browse_nice)

    def close(self) -> None:
        self.loads.stop()
        self.models.close()
        close = getattr(self._pipe, "close", None)  # None: never built (or a bare stand-in)
        if close is not None:
            close()


def runtime(request: Request) -> Runtime:
    """The server's Runtime (a route's dependency)."""
    return request.app.state.runtime


Rt = Annotated[Runtime, Depends(runtime)]
