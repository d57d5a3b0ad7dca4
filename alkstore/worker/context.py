"""The job a task is running for, readable from inside the task."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from alkstore.core.job import Job, Row, _set_row
from alkstore.errors import InvalidArgumentError
from alkstore.worker.job_life import JobLife

if TYPE_CHECKING:
    from alkstore.job_handle import JobHandle

__all__ = ["RunningJob", "current_job", "current_tick"]


class RunningJob(Job):
    """The claimed snapshot of the job being run, plus whether it was taken away.

    ``cancelled`` turns ``True`` when the job was cancelled (``queue.cancel``)
    or its claim was lost while the handler runs. Async handlers are cancelled
    (they get ``CancelledError``); a sync handler runs in a thread that cannot
    be interrupted, so it checks ``current_job().cancelled`` between steps and
    returns early: its outcome is not recorded either way.
    """

    # A plain flag, not a threading.Event: it is only ever set (by the worker's
    # loop) and read (by the handler's thread); a bool store is atomic, and an
    # Event (a Condition and a lock) per job costs ~3 µs of the per-job budget.
    __slots__ = ("_bound", "_life", "_revoked")
    _revoked: bool
    _bound: tuple[JobHandle, asyncio.AbstractEventLoop] | None
    _life: JobLife | None

    def __init__(self, row: Row) -> None:
        # the slots' own setters (Job's __setattr__ refuses): one per claimed job
        _set_row(self, row)
        _set_revoked(self, False)
        _set_bound(self, None)
        _set_life(self, None)

    # -- a job's life (#24; worker/job_life.py, docs/durable.md) -----------------------
    def _bind(self, handle: JobHandle, loop: asyncio.AbstractEventLoop) -> None:
        """The worker's side: the claim the handler's progress and steps write under."""
        _set_bound(self, (handle, loop))

    def _end(self) -> None:
        life = self._life
        if life is not None:
            life.close()

    def _lived(self) -> JobLife:
        life = self._life
        if life is None:
            bound = self._bound
            if bound is None:
                raise InvalidArgumentError(
                    f"job {self.id} is not being run by a worker: no progress, steps or waits"
                )
            life = JobLife(*bound)
            object.__setattr__(self, "_life", life)
        return life

    def progress(self, value: float, message: str | None = None) -> None:
        """Report progress (a fraction 0..1 or a count, and an optional message); never
        blocks. Written at most every 0.25 s (the latest value wins), fenced on this
        claim; read with ``Queue.progress(job_id)``."""
        self._lived().progress(value, message)

    async def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` (sync or async) once for this job: its JSON
        result is stored, fenced, and a later attempt gets the stored result back
        without running it. Returns the result as JSON gives it back."""
        return await self._lived().step(name, fn, *args, **kwargs)

    def step_sync(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """:meth:`step` for a sync handler (its thread blocks on the write)."""
        return self._lived().step_sync(name, fn, *args, **kwargs)

    async def sleep(self, seconds: float) -> None:
        """Sleep durably: the job is given back (slot freed, attempt not spent) and
        resumes after ``seconds`` with its steps kept."""
        await self._lived().sleep(seconds)

    def sleep_sync(self, seconds: float) -> None:
        """:meth:`sleep` for a sync handler."""
        self._lived().sleep_sync(seconds)

    async def wait_for(self, name: str, timeout_s: float | None = None) -> Any:
        """The payload of signal ``name`` (``store.signal``): if it has not come, the
        job is parked (slot freed, attempt not spent) and resumes when it comes;
        ``SignalTimeoutError`` here once ``timeout_s`` passed without it."""
        return await self._lived().wait_for(name, timeout_s)

    def wait_for_sync(self, name: str, timeout_s: float | None = None) -> Any:
        """:meth:`wait_for` for a sync handler."""
        return self._lived().wait_for_sync(name, timeout_s)

    @property
    def cancelled(self) -> bool:
        """Whether the job stopped being this worker's (cancelled, or the claim lost)."""
        return self._revoked

    def _revoke(self) -> None:
        object.__setattr__(self, "_revoked", True)


_current: contextvars.ContextVar[RunningJob | None] = contextvars.ContextVar(
    "alkstore_current_job", default=None
)


_set_revoked: Callable[[RunningJob, bool], None] = RunningJob.__dict__["_revoked"].__set__
_set_bound: Callable[[RunningJob, Any], None] = RunningJob.__dict__["_bound"].__set__
_set_life: Callable[[RunningJob, JobLife | None], None] = RunningJob.__dict__["_life"].__set__


def current_job() -> RunningJob | None:
    """The claimed snapshot of the job being run (``attempts`` is this attempt), else ``None``.

    >>> @app.task(queue="q")
    ... def export(rows: int) -> None:
    ...     for chunk in range(rows // 1000):
    ...         if current_job().cancelled:
    ...             return  # cancelled or no longer ours: stop, nothing is recorded
    ...         write_chunk(chunk)
    """
    return _current.get()


def set_current(job: RunningJob | None) -> contextvars.Token[RunningJob | None]:
    """Bind ``job`` for the running task (the worker's side of :func:`current_job`)."""
    return _current.set(job)


def reset_current(token: contextvars.Token[RunningJob | None]) -> None:
    """Undo :func:`set_current`."""
    _current.reset(token)


def current_tick() -> datetime | None:
    """The tick time (UTC) of the periodic job being run, else ``None``.

    >>> @app.periodic(cron="0 * * * *")
    ... @app.task(queue="reports")
    ... async def hourly() -> None:
    ...     print("report for", current_tick())
    """
    from alkstore.schedules import tick_of

    job = _current.get()
    return None if job is None else tick_of(job.payload)


_in_batch: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "alkstore_in_batch", default=None
)


def refuse_in_batch(what: str) -> None:
    """Raise ``InvalidArgumentError`` when called from a batch handler: ``what`` (durable
    steps, follow-ups) belongs to one job, and a batch handler runs for many."""
    task = _in_batch.get()
    if task is not None:
        raise InvalidArgumentError(
            f"{what} inside batch task {task!r}: a batch handler runs for many jobs, "
            "not one; mark items (item.fail/retry/snooze) or defer a per-job task"
        )
