"""Admin reads and repairs the queue contract doesn't offer: listing, counting, requeue.

Used by the CLI (``alkstore jobs …``, ``alkstore stats``). Each method
validates its input, then makes one engine call.

>>> admin = store.admin()
>>> for s in await admin.stats(): print(s.queue, s.pending, s.dead)
>>> await admin.requeue(42)          # dead -> pending, with a fresh attempt budget
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from alkstore.core.job import Job
from alkstore.core.names import check_name
from alkstore.core.results import JobOutcome
from alkstore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from alkstore.store import Store

__all__ = ["JOB_STATES", "Admin", "QueueStats"]

JOB_STATES = ("pending", "processing", "dead")
LIST_LIMIT_MAX = 10_000
REQUEUE_ATTEMPTS = 0  # a requeued job starts a fresh attempt budget
_ID_MAX = 2**63 - 1


class QueueStats(NamedTuple):
    """Counts of one queue: ``pending`` is claimable now, ``delayed`` waits for its run_at."""

    queue: str
    pending: int
    delayed: int
    processing: int
    dead: int
    oldest_pending_age_s: float | None


def _check_id(job_id: object) -> int:
    # an int, or an int subclass such as a task's Deferred call (never a bool)
    if not isinstance(job_id, int) or isinstance(job_id, bool) or not 1 <= job_id <= _ID_MAX:
        raise InvalidArgumentError(f"job id must be a positive int, got {job_id!r}")
    return int(job_id)


class Admin:
    """Store-wide inspection and repair; get one with ``store.admin()``."""

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        self._store = store

    async def list_jobs(self, queue: str, state: str | None = None, limit: int = 100) -> list[Job]:
        """Jobs of ``queue`` (live and dead, or one ``state``) in id order, at most ``limit``."""
        engine = self._store._check()
        check_name(queue)
        if state is not None and state not in JOB_STATES:
            raise InvalidArgumentError(
                f"invalid state {state!r}: use one of {', '.join(JOB_STATES)}"
            )
        if type(limit) is not int or not 1 <= limit <= LIST_LIMIT_MAX:
            raise InvalidArgumentError(
                f"limit must be an int in [1, {LIST_LIMIT_MAX}], got {limit!r}"
            )
        return [Job(row) for row in await engine.list_jobs(queue, state, limit)]

    async def outcomes(self, queue: str, limit: int = 20) -> list[JobOutcome]:
        """The latest finished jobs of ``queue``, newest first: kept results (``success``)
        and dead jobs (``dead``, with their last error), at most ``limit``."""
        engine = self._store._check()
        check_name(queue)
        if type(limit) is not int or not 1 <= limit <= LIST_LIMIT_MAX:
            raise InvalidArgumentError(
                f"limit must be an int in [1, {LIST_LIMIT_MAX}], got {limit!r}"
            )
        return [JobOutcome.from_row(row) for row in await engine.list_outcomes(queue, limit)]

    async def outcome(self, job_id: int, queue: str | None = None) -> JobOutcome | None:
        """What became of one job (of ``queue``, or any): kept result, dead, live; if any."""
        engine = self._store._check()
        if queue is not None:
            check_name(queue)
        rows = await engine.outcomes(queue, [_check_id(job_id)])
        return JobOutcome.from_row(rows[0]) if rows else None

    async def schedule_marks(self, names: list[str]) -> list[tuple[str, float, int | None]]:
        """``(name, last tick as POSIX seconds, last job id)`` of the named schedules."""
        engine = self._store._check()
        return await engine.schedule_marks(names)

    async def mark_schedule(self, name: str, tick: float, job_id: int | None) -> None:
        """Move a schedule's mark forward to ``tick`` (never back)."""
        engine = self._store._check()
        await engine.mark_schedule(name, tick, job_id)

    async def find_job(self, job_id: int) -> Job | None:
        """The job with this id in any queue, live or dead."""
        engine = self._store._check()
        row = await engine.find_job(_check_id(job_id))
        return None if row is None else Job(row)

    async def requeue(self, job_id: int) -> bool:
        """Move a dead job back to pending, claimable now, with ``attempts`` 0; wakes its queue.

        Keeps its id, payload, stamps and ``last_error``; an expiry already past
        is cleared (else the job would expire again at once). ``False`` if the
        job is not dead.
        """
        engine = self._store._check()
        return await engine.requeue_dead(_check_id(job_id), REQUEUE_ATTEMPTS)

    async def stats(self) -> list[QueueStats]:
        """Counts per queue that has any live or dead job, by queue name."""
        engine = self._store._check()
        return [QueueStats(*row) for row in await engine.stats()]
