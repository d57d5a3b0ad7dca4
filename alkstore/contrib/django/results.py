"""Django ``TaskResult`` snapshots from what alkstore keeps about a job.

A live job (pending: READY, processing: RUNNING) and a dead one (FAILED) are
read from their row, which holds the call; a successful job's row is gone, so
its kept result holds the call too (``calls.kept_value``). alkstore keeps one
error per job (the last one) and the worker of the last attempt; the worker's
attempt history (#24) adds each attempt's error and worker (``with_history``):
``errors`` lists them in order, ``worker_ids`` names each attempt's worker (the
last one's repeated where the history has none), so ``result.attempts`` is the
true count.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from alkstore.core.job import Job
from alkstore.core.life import Attempt
from alkstore.core.results import JobOutcome

from .calls import call_of, check_kept, error_of, find_django_task
from .compat import Task, TaskResult, TaskResultStatus

__all__ = ["from_job", "from_outcome", "snapshot", "with_history"]

_FAILED = frozenset(("retry", "dead", "lost", "interrupted", "cancelled"))

_STATUS = {
    "pending": TaskResultStatus.READY,
    "processing": TaskResultStatus.RUNNING,
    "dead": TaskResultStatus.FAILED,
}


def _time(seconds: object) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if isinstance(seconds, int | float) else None


def _as_enqueued(task: Task[Any, Any], queue: str, priority: int) -> Task[Any, Any]:
    """The task as it was enqueued (its queue and priority)."""
    if task.queue_name == queue and task.priority == priority:
        return task
    try:
        return task.using(queue_name=queue, priority=priority)
    except Exception:  # e.g. a queue no longer configured: the task as declared
        return task


def snapshot(
    task: Task[Any, Any],
    result_id: str,
    status: Any,
    *,
    args: list[Any],
    kwargs: dict[str, Any],
    errors: list[str],
    worker_id: str | None,
    attempts: int,
    enqueued_at: datetime | None = None,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
) -> TaskResult[Any]:
    """A ``TaskResult`` of ``task`` (its backend alias is the task's)."""
    return TaskResult(
        task=task,
        id=result_id,
        status=status,
        enqueued_at=enqueued_at,
        started_at=started_at,
        finished_at=finished_at,
        last_attempted_at=started_at,
        args=args,
        kwargs=kwargs,
        backend=task.backend,
        errors=[error_of(text) for text in errors],
        worker_ids=[worker_id or "unknown"] * attempts,
    )


def from_job(job: Job) -> TaskResult[Any] | None:
    """The result of a live or dead job, or ``None`` if no Django task made it."""
    call = call_of(job.payload)
    if call is None:
        return None
    task, args, kwargs = call
    return snapshot(
        _as_enqueued(task, job.queue, job.priority),
        str(job.id),
        _STATUS[job.state],
        args=args,
        kwargs=kwargs,
        errors=[job.last_error] if job.last_error else [],
        worker_id=job.worker_id,
        attempts=job.attempts,
        enqueued_at=job.created_at,
        finished_at=job.died_at,
    )


def from_outcome(outcome: JobOutcome) -> TaskResult[Any] | None:
    """The result of a successful job from its kept value, or ``None`` if it is not one."""
    kept = check_kept(outcome.value)
    task = None if kept is None else find_django_task(kept["task"])
    if kept is None or task is None:
        return None
    result = snapshot(
        _as_enqueued(task, outcome.queue, int(kept.get("priority", task.priority))),
        str(outcome.id),
        TaskResultStatus.SUCCESSFUL,
        args=kept["args"],
        kwargs=kept["kwargs"],
        errors=list(kept.get("errors", [])),
        worker_id=kept.get("worker_id"),
        attempts=outcome.attempts,
        enqueued_at=_time(kept.get("enqueued_at")),
        started_at=_time(kept.get("started_at")),
        finished_at=outcome.finished_at,
    )
    object.__setattr__(result, "_return_value", kept["value"])
    return result


def with_history(result: TaskResult[Any], attempts: list[Attempt]) -> TaskResult[Any]:
    """``result`` with the errors and workers of each spent attempt from the job's
    attempt history (``Queue.attempts``), where it has them."""
    spent = [a for a in attempts if a.outcome != "snoozed"]
    errors = [error_of(a.error) for a in spent if a.outcome in _FAILED and a.error]
    if errors:
        object.__setattr__(result, "errors", errors)
    known = [a.worker_id for a in spent if a.worker_id]
    if known and len(spent) == len(result.worker_ids):
        last = result.worker_ids[-1] if result.worker_ids else "unknown"
        object.__setattr__(result, "worker_ids", [a.worker_id or last for a in spent])
    return result
