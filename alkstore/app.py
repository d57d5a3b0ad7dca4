"""App: a registry of tasks plus one lazily opened store.

>>> app = alkstore.App("sqlite:///jobs.db")
>>> @app.task(queue="emails", max_attempts=5, timeout_s=60)
... async def send_email(to: str, subject: str) -> None: ...
>>> await send_email.defer(to="a@example.com", subject="hi")   # connects on first use
>>> app.run_worker(concurrency=8)                               # blocking, until SIGTERM

In async code the store opens on first use (``defer``) or explicitly with
``await app.connect()`` / ``async with app:``; ``app.store`` is the open store
and raises until then. A store belongs to the event loop (and the process)
that opened it: used from another loop or after ``fork()``, the app opens a
fresh one.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from alkstore.connect import connect
from alkstore.core.names import check_name, check_schema
from alkstore.core.options import QueueOpts, check_non_negative, check_positive, describe
from alkstore.errors import InvalidArgumentError, StoreClosedError
from alkstore.job_hooks import JobHooks
from alkstore.store import Store
from alkstore.tasks import Task

if TYPE_CHECKING:
    from alkstore.schedules import Missed, Schedule
    from alkstore.sync import Store as SyncStore
    from alkstore.worker.runtime import Worker

__all__ = ["App"]

P = ParamSpec("P")
R = TypeVar("R")
H = TypeVar("H", bound=Callable[..., Any])


def default_task_name(fn: Callable[..., Any]) -> str:
    """``module.qualname``; a script run as ``__main__`` uses its module or file name,
    so a producer running ``python myapp.py`` and a worker importing ``myapp`` agree."""
    module = getattr(fn, "__module__", None) or "__main__"
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
        elif getattr(main, "__file__", None):
            module = Path(main.__file__).stem  # type: ignore[union-attr,arg-type]
    return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', 'task'))}"


async def _close_at_loop_end(store: Store) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await store.close()


def _at_exit(callback: Callable[[], None]) -> None:
    """Run ``callback`` at interpreter exit while thread pools still take work:
    ``atexit`` runs after ``concurrent.futures`` refuses new work, so a SQLite store
    closed from there failed ("cannot schedule new futures after shutdown")."""
    register = getattr(threading, "_register_atexit", None)  # CPython 3.9+; runs earlier
    if register is None:
        atexit.register(callback)
    else:
        register(callback)


def _close_sync_store(ref: weakref.ReferenceType[SyncStore]) -> None:
    store = ref()
    if store is not None:
        store.close()


class App:
    """Tasks and the store they are deferred into and run from."""

    def __init__(self, url: str | None = None, *, schema: str = "alkstore", **options: Any):
        self.url = url
        self.schema = check_schema(schema)
        self.options = options
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: list[Schedule] = []
        self._store: Store | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self._lock: asyncio.Lock | None = None
        self._closer: asyncio.Task[None] | None = None
        self._sync: SyncStore | None = None
        self._sync_pid = 0
        self._sync_lock = threading.Lock()
        self.hooks = JobHooks()

    # -- tasks ------------------------------------------------------------------
    @overload
    def task(self, func: Callable[P, R], /) -> Task[P, R]: ...  # bare ``@app.task``

    @overload
    def task(
        self,
        func: None = None,
        /,
        *,
        queue: str = "default",
        name: str | None = None,
        max_attempts: int = 5,
        timeout_s: float | None = None,
        retry_base_s: float = 1.0,
        visibility_timeout_s: float = 30.0,
        priority: int = 0,
        fail_on: Iterable[type[BaseException]] = (),
        keep_result_s: float | None = None,
        batch_size: None = None,
        batch_wait_s: float = 0.05,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    @overload
    def task(  # a batch task: its handler takes a list, its calls are keywords
        self,
        func: None = None,
        /,
        *,
        queue: str = "default",
        name: str | None = None,
        max_attempts: int = 5,
        timeout_s: float | None = None,
        retry_base_s: float = 1.0,
        visibility_timeout_s: float = 30.0,
        priority: int = 0,
        fail_on: Iterable[type[BaseException]] = (),
        keep_result_s: float | None = None,
        batch_size: int,
        batch_wait_s: float = 0.05,
    ) -> Callable[[Callable[[list[Any]], R]], Task[..., R]]: ...

    def task(
        self,
        func: Callable[P, R] | None = None,
        /,
        *,
        queue: str = "default",
        name: str | None = None,
        max_attempts: int = 5,
        timeout_s: float | None = None,
        retry_base_s: float = 1.0,
        visibility_timeout_s: float = 30.0,
        priority: int = 0,
        fail_on: Iterable[type[BaseException]] = (),
        keep_result_s: float | None = None,
        batch_size: int | None = None,
        batch_wait_s: float = 0.05,
    ) -> Callable[[Callable[P, R]], Task[P, R]] | Task[P, R]:
        """Register a function (async, or sync to run in a thread) as a task:
        ``@app.task`` with the defaults, ``@app.task(queue=..., ...)`` with settings.

        ``max_attempts``, ``retry_base_s``, ``visibility_timeout_s`` and
        ``priority`` are stamped on each job at defer; ``timeout_s`` cancels a
        run that takes longer (it is retried); an exception of a ``fail_on``
        type, like :class:`alkstore.Fail`, dead-letters the job at once.
        ``keep_result_s`` keeps each successful run's JSON return value that long
        (``await (await task.defer(...)).result()``); a return value that is not
        JSON fails the attempt.

        ``batch_size`` makes a batch task: its handler takes a list of up to that
        many :class:`~alkstore.worker.BatchItem` (calls deferred with keyword
        arguments), gathered for at most ``batch_wait_s`` (docs/worker.md, "Batch
        handlers").
        """
        check_name(queue)
        opts = QueueOpts(
            visibility_timeout_s=visibility_timeout_s,
            max_attempts=max_attempts,
            retry_base_s=retry_base_s,
            priority=priority,
        )
        if timeout_s is not None:
            timeout_s = check_positive("timeout_s", timeout_s)
        if keep_result_s is not None:
            keep_result_s = check_positive("keep_result_s", keep_result_s)
        if batch_size is not None:
            if type(batch_size) is not int or batch_size < 1:
                raise InvalidArgumentError(
                    f"batch_size must be an int >= 1, got {describe(batch_size)}"
                )
            if keep_result_s is not None:
                raise InvalidArgumentError(
                    "a batch task keeps no results (batch_size with keep_result_s)"
                )
        batch_wait_s = check_non_negative("batch_wait_s", batch_wait_s)
        fail_types = tuple(fail_on)
        for kind in fail_types:
            if not (isinstance(kind, type) and issubclass(kind, BaseException)):
                raise InvalidArgumentError(
                    f"fail_on must hold exception types, got {describe(kind)}"
                )
        if name is not None and (type(name) is not str or not name):
            raise InvalidArgumentError(f"task name must be a non-empty str, got {describe(name)}")

        def register(func: Callable[P, R]) -> Task[P, R]:
            if not callable(func):
                raise InvalidArgumentError(f"a task must be a function, got {describe(func)}")
            task_name = name or default_task_name(func)
            if task_name in self.tasks:
                raise InvalidArgumentError(
                    f"task name {describe(task_name)} is already registered on this app; "
                    "pass name=... to tell them apart"
                )
            task = Task(
                self,
                func,
                name=task_name,
                queue=queue,
                opts=opts,
                timeout_s=timeout_s,
                fail_on=fail_types,
                keep_result_s=keep_result_s,
                batch_size=batch_size,
                batch_wait_s=batch_wait_s,
            )
            self.tasks[task_name] = task
            return task

        return register if func is None else register(func)

    def periodic(
        self,
        *,
        cron: str,
        timezone: str = "UTC",
        args: dict[str, Any] | None = None,
        name: str | None = None,
        missed: Missed = "latest",
        max_missed: int = 10,
        grace_s: float = 60.0,
        overlap: bool = False,
    ) -> Callable[[Task[P, R]], Task[P, R]]:
        """Run a task on a cron schedule (stack it above ``@app.task``; several allowed).

        ``cron``: 5 fields, or 6 with seconds first, in ``timezone``. Every worker
        of the app schedules; each tick is one job however many run. After
        downtime ``missed="latest"`` runs the latest missed tick once, ``"skip"``
        runs none older than ``grace_s``, ``"all"`` runs up to ``max_missed`` of
        them. Unless ``overlap``, a tick is skipped while the previous tick's job
        is still pending or running. The handler reads its tick with
        :func:`alkstore.worker.current_tick`.
        """
        from alkstore.schedules import Schedule

        def register(task: Task[P, R]) -> Task[P, R]:
            if not isinstance(task, Task):
                raise InvalidArgumentError(f"@app.periodic goes above @app.task, got {task!r}")
            schedule = Schedule(
                task,
                cron,
                timezone,
                dict(args or {}),
                name or "",
                missed,
                max_missed,
                check_positive("grace_s", grace_s),
                bool(overlap),
            )
            if any(s.name == schedule.name for s in self.schedules):
                raise InvalidArgumentError(
                    f"schedule {schedule.name!r} is already registered; pass name=..."
                )
            self.schedules.append(schedule)
            return task

        return register

    def find_task(self, name: str) -> Task[Any, Any] | None:
        """The task a job names, or ``None`` if this app does not know it (the worker's
        lookup; a subclass may resolve tasks lazily, as the Django backend does)."""
        return self.tasks.get(name)

    @property
    def queues(self) -> list[str]:
        """The queues the app's tasks run on, sorted."""
        return sorted({task.queue for task in self.tasks.values()})

    # -- the store ----------------------------------------------------------------
    def _current(self) -> Store | None:
        store = self._store
        if store is None or store.closed or self._pid != os.getpid():
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return store if loop is self._loop else None

    @property
    def store(self) -> Store:
        """The open store; raises until ``await app.connect()`` (or a first ``defer``)."""
        store = self._current()
        if store is None:
            raise StoreClosedError(
                "the app's store is not open in this event loop: "
                "`await app.connect()` or `async with app:` first"
            )
        return store

    async def connect(self) -> Store:
        """Open the store (once per event loop and process) and return it."""
        store = self._current()
        if store is not None:
            return store
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop or self._pid != os.getpid():
            self._lock = asyncio.Lock()
            self._store, self._loop, self._pid = None, loop, os.getpid()
        async with self._lock:
            store = self._current()
            if store is None:
                store = await connect(self.url, schema=self.schema, **self.options)
                self._store, self._loop, self._pid = store, loop, os.getpid()
                # closes the store when the loop shuts down (the end of asyncio.run
                # cancels every task): repeated asyncio.run(task.defer()) leaks nothing
                self._closer = loop.create_task(_close_at_loop_end(store))
            return store

    async def close(self) -> None:
        """Close the store if this loop opened it; the next use opens a new one."""
        store = self._current()
        self._store = None
        closer, self._closer = self._closer, None
        if closer is not None and store is not None:
            closer.cancel()
        if store is not None:
            await store.close()

    # -- blocking producers -------------------------------------------------------
    def sync_store(self) -> SyncStore:
        """The app's blocking store (``alkstore.sync``), opened on first use, from any
        thread, with no event loop needed from the caller; closed at exit."""
        with self._sync_lock:
            store = self._sync
            if store is None or store.closed or self._sync_pid != os.getpid():
                from alkstore import sync

                store = sync.connect(self.url, schema=self.schema, **self.options)
                self._sync, self._sync_pid = store, os.getpid()
                _at_exit(functools.partial(_close_sync_store, weakref.ref(store)))
            return store

    def close_sync(self) -> None:
        """Close the blocking store of :meth:`sync_store`, if open; idempotent."""
        with self._sync_lock:
            store, self._sync = self._sync, None
        if store is not None and self._sync_pid == os.getpid():
            store.close()

    async def __aenter__(self) -> App:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- job hooks (docs/worker.md, "Job hooks") -----------------------------------
    def before_job(self, hook: H) -> H:
        """Register ``hook(job)`` to run before each job's handler, where it runs.

        >>> @app.before_job
        ... def open_session(job): SESSION.set(Session())

        Plain or async. If it raises, the attempt fails and the handler does not run.
        """
        return self.hooks.add_before(hook)

    def after_job(self, hook: H) -> H:
        """Register ``hook(job, error)`` to run after each job's handler, whatever it
        did (``error``: what it raised, else ``None``); its own errors are logged."""
        return self.hooks.add_after(hook)

    def on_failure(self, hook: H) -> H:
        """Register ``hook(job, error)`` for each failed attempt (retried or dead),
        e.g. ``sentry_sdk.capture_exception(error)``; its own errors are logged."""
        return self.hooks.add_failure(hook)

    # -- workers ------------------------------------------------------------------
    def worker(self, queues: Iterable[str] | None = None, **options: Any) -> Worker:
        """An async :class:`~alkstore.worker.Worker` for this app: ``await worker.run()``."""
        from alkstore.worker.runtime import Worker

        return Worker(self, queues, **options)

    def run_worker(
        self,
        queues: Iterable[str] | None = None,
        *,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
        **options: Any,
    ) -> int:
        """Run a worker until SIGTERM/SIGINT (blocking); 0 after a graceful stop, else 1.

        Options are :class:`~alkstore.worker.Worker`'s: ``concurrency``,
        ``grace_s``, ``poll_interval_s``, ``sweep_interval_s``, ``worker_id``, ...
        ``loop_factory`` makes the event loop, as :class:`asyncio.Runner`'s does
        (``uvloop.new_event_loop``; ``None``: asyncio's default).
        """

        async def main() -> int:
            try:
                return await self.worker(queues, **options).run()
            finally:
                await self.close()

        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(main())

    def __repr__(self) -> str:
        return f"<alkstore.App url={describe(self.url)} tasks={sorted(self.tasks)}>"
