"""The job a task is running for, readable from inside the task."""

from __future__ import annotations

import contextvars
from datetime import datetime

from alkstore.core.job import Job, Row

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
    __slots__ = ("_revoked",)
    _revoked: bool

    def __init__(self, row: Row) -> None:
        super().__init__(row)
        object.__setattr__(self, "_revoked", False)

    @property
    def cancelled(self) -> bool:
        """Whether the job stopped being this worker's (cancelled, or the claim lost)."""
        return self._revoked

    def _revoke(self) -> None:
        object.__setattr__(self, "_revoked", True)


_current: contextvars.ContextVar[RunningJob | None] = contextvars.ContextVar(
    "alkstore_current_job", default=None
)


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
