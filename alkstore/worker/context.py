"""The job a task is running for, readable from inside the task."""

from __future__ import annotations

import contextvars
from datetime import datetime

from alkstore.core.job import Job

__all__ = ["current_job", "current_tick"]

_current: contextvars.ContextVar[Job | None] = contextvars.ContextVar(
    "alkstore_current_job", default=None
)


def current_job() -> Job | None:
    """The claimed snapshot of the job being run (``attempts`` is this attempt), else ``None``.

    >>> @app.task(queue="q")
    ... async def flaky() -> None:
    ...     if current_job().attempts == 1: raise RuntimeError("first try fails")
    """
    return _current.get()


def set_current(job: Job | None) -> contextvars.Token[Job | None]:
    """Bind ``job`` for the running task (the worker's side of :func:`current_job`)."""
    return _current.set(job)


def reset_current(token: contextvars.Token[Job | None]) -> None:
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
