"""The SQLite store's own thread: one thread, its calls run in the order given.

What ``ThreadPoolExecutor(1)`` gave, without the pool's bookkeeping around
every call (two locks and a semaphore on submit, a future with its condition,
the idle semaphore after the call): on an idle store those are cold each time,
~40 µs of a ``defer()``. ``submit`` returns a ``concurrent.futures.Future``
(``loop.run_in_executor`` takes this executor); ``post`` runs a call that
reports its outcome its own way (the group commit's write units) and makes no
future at all.

The thread is a daemon, so an unclosed store never holds the interpreter's exit;
like the pool's workers it still finishes the calls given before the exit
(an ``atexit`` hook ends each live thread after its queued calls).
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["EngineThread"]

log = logging.getLogger("alkstore.sqlite")

T = TypeVar("T")

_Job = tuple["Future[Any] | None", Callable[..., Any], tuple[Any, ...], dict[str, Any]]

_live: weakref.WeakSet[EngineThread] = weakref.WeakSet()


@atexit.register
def _finish_all() -> None:
    for each in list(_live):
        each.shutdown(wait=True)


class EngineThread(Executor):
    """One thread running the calls given to it, in order."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._shut = False
        self._thread = threading.Thread(target=self._serve, args=(self._jobs,), name=name)
        self._thread.daemon = True
        self._thread.start()
        _live.add(self)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._put((future, fn, args, kwargs))
        return future

    def post(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` on the thread; no future (it reports its outcome its own way)."""
        self._put((None, fn, (), {}))

    def _put(self, job: _Job) -> None:
        if self._shut:
            raise RuntimeError("cannot schedule new calls after shutdown")
        self._jobs.put(job)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if not self._shut:
                self._shut = True
                self._jobs.put(None)  # after the calls already given
        if wait and self._thread is not threading.current_thread():
            self._thread.join()

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
        # a static method: the thread holds no reference to its EngineThread
        while (job := jobs.get()) is not None:
            future, fn, args, kwargs = job
            del job
            if future is None:
                try:
                    fn()
                except BaseException:  # a posted call reports its own errors
                    log.exception("alkstore: a call on the SQLite store's thread failed")
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:
                future.set_exception(e)
            else:
                future.set_result(result)
            del future, fn, args, kwargs
