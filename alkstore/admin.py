"""Admin reads and repairs the queue contract doesn't offer: listing, counting, requeue.

The operator's API: used by the CLI (``alkstore jobs …``, ``alkstore stats``) and
the dashboard. Each method validates its input, then makes one engine call. What
the worker and the schedules write (presence rows, outcome counts, schedule
marks) is internal bookkeeping, in ``alkstore.bookkeeping``.

>>> admin = store.admin()
>>> for s in await admin.stats(): print(s.queue, s.pending, s.dead)
>>> await admin.requeue(42)          # dead -> pending, with a fresh attempt budget
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from alkstore.bookkeeping import HISTORY_MINUTES_MAX, OUTCOMES, Bookkeeping
from alkstore.bulk import BulkActions, JobPage, find_jobs
from alkstore.core.bulk import REQUEUE_ATTEMPTS, REQUEUE_EXPIRY_CUTOFF_S
from alkstore.core.filters import JobFilter
from alkstore.core.flow import QueueSettings, Rate
from alkstore.core.job import Job, _utc
from alkstore.core.names import check_name, check_worker_id, is_storable_text
from alkstore.core.options import check_positive, describe
from alkstore.core.results import JobOutcome
from alkstore.engine_door import StoreDoor, engine_of
from alkstore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from alkstore.core.health import Health, Thresholds
    from alkstore.engine import Engine

__all__ = [
    "JOB_STATES",
    "OUTCOMES",
    "Admin",
    "OutcomeCount",
    "QueueInfo",
    "QueueStats",
    "WorkerInfo",
    "flow_json",
]

JOB_STATES = ("pending", "processing", "blocked", "dead")
GONE_AFTER_S = 30.0  # a worker not seen for this long is shown as gone
LIST_LIMIT_MAX = 10_000
# What a requeue sets (core/bulk.py decides it once, for a bulk retry too)
REQUEUE_DELAY_S = 0.0  # claimable now
_ID_MAX = 2**63 - 1


class QueueStats(NamedTuple):
    """Counts of one queue: ``pending`` is claimable now, ``delayed`` waits for its run_at,
    ``blocked`` waits for its parents (workflows)."""

    queue: str
    pending: int
    delayed: int
    processing: int
    dead: int
    oldest_pending_age_s: float | None
    blocked: int = 0


class WorkerInfo(NamedTuple):
    """One registered worker, as of its last heartbeat."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    running: int
    started_at: datetime
    last_seen: datetime
    seen_ago_s: float
    alive: bool  # seen within ``gone_after_s``


class OutcomeCount(NamedTuple):
    """``jobs`` of ``queue`` ended with ``outcome`` in the minute starting at ``minute``."""

    queue: str
    minute: datetime
    outcome: str
    jobs: int


class QueueInfo(NamedTuple):
    """A queue's stored flow control (paused, limits, fairness, aging) and its counts."""

    queue: str
    paused: bool
    concurrency: int | None
    partition_concurrency: int | None
    rate: Rate | None
    burst: int | None
    pending: int
    delayed: int
    processing: int
    dead: int
    fair: bool = False  # claims round-robin across partition keys (Queue.set_fair)
    weights: int = 0  # partition keys with a stored weight (the others weigh 1)
    aging_s: float | None = None  # a waiting job gains a priority level per aging_s
    blocked: int = 0  # jobs waiting for their parents (workflows)


def _info(settings: QueueSettings, stats: QueueStats | None, weights: int = 0) -> QueueInfo:
    counts = (0, 0, 0, 0) if stats is None else stats[1:5]
    return QueueInfo(
        settings.queue,
        settings.paused,
        settings.concurrency,
        settings.partition_concurrency,
        settings.rate,
        settings.burst if settings.rate is not None else None,
        *counts,
        fair=settings.fair,
        weights=weights,
        aging_s=settings.aging_s,
        blocked=0 if stats is None else stats.blocked,
    )


async def _weights(engine: Engine, settings: QueueSettings) -> int:
    """How many weights a fair queue has stored (a queue that is not fair: 0)."""
    return len(await engine.fair_weights(settings.queue)) if settings.fair else 0


def _unset(queue: str) -> QueueSettings:
    return QueueSettings(queue, False, None, None, None, None, None, None)


def _worker(row: Any, gone: float) -> WorkerInfo:
    wid, host, pid, queues, conc, running, started, seen, ago = row
    started_at, last_seen = _utc(started), _utc(seen)
    assert started_at is not None and last_seen is not None
    return WorkerInfo(
        wid, host, pid, tuple(queues), conc, running, started_at, last_seen, ago, ago < gone
    )


def _check_cursor(
    after: str | None, before: str | None, check: Callable[[object], str]
) -> tuple[str | None, str | None]:
    """A keyset page's cursor: ``after`` or ``before`` (not both), each checked."""
    if after is not None and before is not None:
        raise InvalidArgumentError("give after or before, not both")
    return (None if after is None else check(after), None if before is None else check(before))


def _check_limit(limit: object) -> None:
    if type(limit) is not int or not 1 <= limit <= LIST_LIMIT_MAX:
        raise InvalidArgumentError(
            f"limit must be an int in [1, {LIST_LIMIT_MAX}], got {describe(limit)}"
        )


def _check_partition_key(key: object, state: str | None) -> None:
    if type(key) is not str or not key or not is_storable_text(key):
        raise InvalidArgumentError(f"partition_key must be a non-empty str, got {describe(key)}")
    if state not in (None, "pending", "processing"):
        raise InvalidArgumentError(
            f"a partition_key lists pending and processing jobs, not {state}: no index "
            "holds the key of blocked or dead jobs (use find or list_dead)"
        )


def _check_id(job_id: object) -> int:
    # an int, or an int subclass such as a task's Deferred call (never a bool)
    if not isinstance(job_id, int) or isinstance(job_id, bool) or not 1 <= job_id <= _ID_MAX:
        raise InvalidArgumentError(f"job id must be a positive int, got {describe(job_id)}")
    return int(job_id)


async def _requeue(engine: Engine, job_id: int) -> bool:
    return await engine.requeue_dead(
        job_id, REQUEUE_ATTEMPTS, REQUEUE_DELAY_S, REQUEUE_EXPIRY_CUTOFF_S
    )


class CancelsJobs(Protocol):
    """What the admin uses of a queue handle (``alkstore.Queue`` has it)."""

    async def cancel(self, job_id: int) -> bool: ...


class AdminStore(StoreDoor, Protocol):
    """What the admin uses of a store (``alkstore.Store`` has it)."""

    def queue(self, name: str) -> CancelsJobs: ...


class Admin:
    """Store-wide inspection and repair; get one with ``store.admin()``."""

    __slots__ = ("_store",)

    def __init__(self, store: AdminStore) -> None:
        self._store = store

    async def list_jobs(
        self,
        queue: str,
        state: str | None = None,
        limit: int = 100,
        *,
        after: int | None = None,
        before: int | None = None,
        partition_key: str | None = None,
    ) -> list[Job]:
        """Jobs of ``queue`` (live and dead, or one ``state``) in id order, at most ``limit``:
        a keyset page, the first or those after id ``after`` or before id ``before``
        (returned in id order too). Each page is one index range scan, however deep.

        With ``partition_key``: that key's pending and processing jobs only (``state``
        one of those or None), read from the partial indexes that hold them by key,
        a cost bounded by the key's live jobs; no index holds the key of blocked or
        dead jobs (``find`` and ``list_dead`` show those, with their keys)."""
        engine = engine_of(self._store)
        if after is not None and before is not None:
            raise InvalidArgumentError("give after or before, not both")
        after = None if after is None else _check_id(after)
        before = None if before is None else _check_id(before)
        check_name(queue)
        if state is not None and state not in JOB_STATES:
            raise InvalidArgumentError(
                f"invalid state {describe(state)}: use one of {', '.join(JOB_STATES)}"
            )
        if type(limit) is not int or not 1 <= limit <= LIST_LIMIT_MAX:
            raise InvalidArgumentError(
                f"limit must be an int in [1, {LIST_LIMIT_MAX}], got {describe(limit)}"
            )
        if partition_key is not None:
            _check_partition_key(partition_key, state)
            cursor = (after or 0) if before is None else before
            rows = await engine.list_key_jobs(
                queue, partition_key, state, limit, cursor, before is not None
            )
        else:
            rows = await engine.list_jobs(queue, state, limit, after or 0, before)
        if before is not None:
            rows.reverse()
        return [Job(row) for row in rows]

    async def list_dead(
        self, *, after: int | None = None, before: int | None = None, limit: int = 100
    ) -> list[Job]:
        """Dead jobs of every queue in id order, a keyset page of at most ``limit``:
        the first, those after id ``after`` (next page) or before id ``before``
        (previous page). Each page is one index range scan, however deep."""
        engine = engine_of(self._store)
        if after is not None and before is not None:
            raise InvalidArgumentError("give after or before, not both")
        after = None if after is None else _check_id(after)
        before = None if before is None else _check_id(before)
        if type(limit) is not int or not 1 <= limit <= LIST_LIMIT_MAX:
            raise InvalidArgumentError(
                f"limit must be an int in [1, {LIST_LIMIT_MAX}], got {describe(limit)}"
            )
        rows = await engine.list_dead(after, before, limit)
        return [Job(row) for row in (rows if before is None else reversed(rows))]

    async def outcomes(self, queue: str, limit: int = 20) -> list[JobOutcome]:
        """The latest finished jobs of ``queue``, newest first: kept results (``success``)
        and dead jobs (``dead``, with their last error), at most ``limit``."""
        engine = engine_of(self._store)
        check_name(queue)
        if type(limit) is not int or not 1 <= limit <= LIST_LIMIT_MAX:
            raise InvalidArgumentError(
                f"limit must be an int in [1, {LIST_LIMIT_MAX}], got {limit!r}"
            )
        return [JobOutcome.from_row(row) for row in await engine.list_outcomes(queue, limit)]

    async def outcome(self, job_id: int, queue: str | None = None) -> JobOutcome | None:
        """What became of one job (of ``queue``, or any): kept result, dead, live; if any."""
        engine = engine_of(self._store)
        if queue is not None:
            check_name(queue)
        rows = await engine.outcomes(queue, [_check_id(job_id)])
        return JobOutcome.from_row(rows[0]) if rows else None

    async def schedule_marks(self, names: list[str]) -> list[tuple[str, float, int | None]]:
        """``(name, last tick as POSIX seconds, last job id)`` of the named schedules."""
        return await Bookkeeping(self._store).schedule_marks(names)

    async def find_job(self, job_id: int) -> Job | None:
        """The job with this id in any queue, live or dead."""
        engine = engine_of(self._store)
        row = await engine.find_job(_check_id(job_id))
        return None if row is None else Job(row)

    async def requeue(self, job_id: int) -> bool:
        """Move a dead job back to pending, claimable now, with ``attempts`` 0; wakes its queue.

        Keeps its id, payload, stamps and ``last_error``; an expiry already past
        is cleared (else the job would expire again at once). ``False`` if the
        job is not dead.
        """
        engine = engine_of(self._store)
        return await _requeue(engine, _check_id(job_id))

    async def stats(self) -> list[QueueStats]:
        """Counts per queue that has any live or dead job, by queue name."""
        engine = engine_of(self._store)
        return [QueueStats(*row) for row in await engine.stats()]

    async def cancel(self, job_id: int) -> bool:
        """Delete the live job with this id in any queue; ``False`` if none is live.

        The same cancel as :meth:`Queue.cancel <alkstore.Queue.cancel>`, announced on
        the job's queue channel: a worker running it stops its handler (``cancelled``)."""
        engine = engine_of(self._store)
        row = await engine.find_job(_check_id(job_id))
        if row is None or row[3] == "dead":
            return False
        return await self._store.queue(row[1]).cancel(job_id)

    async def requeue_many(self, job_ids: Iterable[int]) -> int:
        """:meth:`requeue` each dead job listed; count those requeued."""
        engine = engine_of(self._store)
        if isinstance(job_ids, str | bytes | int):
            raise InvalidArgumentError(f"job ids must be a list of ints, got {job_ids!r}")
        ids = [_check_id(i) for i in job_ids]
        done = 0
        for job_id in ids:
            done += await _requeue(engine, job_id)
        return done

    # -- search and bulk actions (alkstore/bulk.py) -------------------------------------
    async def find(
        self, where: JobFilter | str, *, after: int | None = None, limit: int = 100
    ) -> JobPage:
        """Jobs matching a filter (``core.filters``: a ``JobFilter`` or its text), live
        and dead, in id order: a keyset page of at most ``limit`` after id ``after``."""
        return await find_jobs(self._store, where, after, limit)

    def bulk(self) -> BulkActions:
        """Bulk actions by filter: preview, start, run (resumable), history."""
        return BulkActions(self._store)

    # -- live workers and outcome history (written by the worker: alkstore.bookkeeping)
    async def workers(self, gone_after_s: float = GONE_AFTER_S) -> list[WorkerInfo]:
        """Registered workers by start time; ``alive`` unless unseen for ``gone_after_s``."""
        engine = engine_of(self._store)
        gone = check_positive("gone_after_s", gone_after_s)
        return [_worker(row, gone) for row in await engine.list_workers()]

    async def workers_page(
        self,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        gone_after_s: float = GONE_AFTER_S,
    ) -> list[WorkerInfo]:
        """Registered workers by id, a keyset page of at most ``limit``: the first, those
        after id ``after`` (next page) or before id ``before`` (previous page), returned
        in id order. Each page is one range scan of the workers' primary key."""
        engine = engine_of(self._store)
        after, before = _check_cursor(after, before, check_worker_id)
        _check_limit(limit)
        gone = check_positive("gone_after_s", gone_after_s)
        rows = await engine.list_workers_page(after, before, limit)
        found = [_worker(row, gone) for row in rows]
        return found if before is None else found[::-1]

    async def outcome_history(
        self, minutes: int = 60, *, queue: str | None = None, bucket_minutes: int = 1
    ) -> list[OutcomeCount]:
        """Finished-job counts per queue, minute and outcome over the last ``minutes``
        (kept for the workers' ``history_retention_s``, a week by default).

        ``queue``: of that queue only; ``bucket_minutes``: summed per that many
        minutes (``minute`` is then the bucket's start), as the day and week charts
        read them: ``await admin.outcome_history(7 * 1440, bucket_minutes=120)``."""
        engine = engine_of(self._store)
        if type(minutes) is not int or not 1 <= minutes <= HISTORY_MINUTES_MAX:
            raise InvalidArgumentError(
                f"minutes must be an int in [1, {HISTORY_MINUTES_MAX}], got {describe(minutes)}"
            )
        if type(bucket_minutes) is not int or not 1 <= bucket_minutes <= minutes:
            raise InvalidArgumentError(
                f"bucket_minutes must be an int in [1, minutes], got {describe(bucket_minutes)}"
            )
        if queue is not None:
            check_name(queue)
        if queue is None and bucket_minutes == 1:
            rows = await engine.outcome_history(minutes * 60.0)
        else:
            rows = await engine.outcome_series(minutes * 60.0, bucket_minutes * 60, queue)
        found = []
        for queue_name, minute, outcome, n in rows:
            at = _utc(minute)
            assert at is not None
            found.append(OutcomeCount(queue_name, at, outcome, n))
        return found

    async def queues(self) -> list[QueueInfo]:
        """Every queue with jobs or stored settings, by name: paused, limits, fairness,
        aging, counts."""
        engine = engine_of(self._store)
        settings = {
            row[0]: QueueSettings.from_row(row) for row in await engine.queue_settings(None)
        }
        stats = {s.queue: s for s in await self.stats()}
        names = sorted(settings.keys() | stats.keys())
        found = []
        for n in names:
            queue = settings.get(n) or _unset(n)
            found.append(_info(queue, stats.get(n), await _weights(engine, queue)))
        return found

    async def queues_page(
        self, *, after: str | None = None, before: str | None = None, limit: int = 100
    ) -> list[QueueInfo]:
        """The queues of :meth:`queues` by name, a keyset page of at most ``limit``: the
        first, those after name ``after`` or before name ``before`` (in name order)."""
        after, before = _check_cursor(after, before, check_name)
        _check_limit(limit)
        found = await self.queues()
        if before is not None:
            return [i for i in found if i.queue < before][-limit:]
        return [i for i in found if after is None or i.queue > after][:limit]

    async def queue_info(self, queue: str) -> QueueInfo:
        """Paused, limits, fairness, aging and counts of one queue."""
        engine = engine_of(self._store)
        check_name(queue)
        rows = await engine.queue_settings(queue)
        settings = QueueSettings.from_row(rows[0]) if rows else _unset(queue)
        stats = {s.queue: s for s in await self.stats()}
        return _info(settings, stats.get(queue), await _weights(engine, settings))

    # -- alkstore doctor -------------------------------------------------------------
    async def health(self, limits: Thresholds | None = None) -> Health:
        """One read-only look at the store and the database behind it, judged by
        ``core.health.diagnose`` under ``limits`` (``alkstore doctor``, the dashboard's
        health page and its gauges): each finding has a verdict and a fix."""
        import dataclasses
        import time

        from alkstore.core.health import Health, Thresholds, WorkerSeen, clock_offset, diagnose

        engine = engine_of(self._store)
        if limits is not None and not isinstance(limits, Thresholds):
            raise InvalidArgumentError(f"limits must be a Thresholds, got {describe(limits)}")
        sent = time.time()
        facts = await engine.health_facts()
        received = time.time()
        workers = tuple(WorkerSeen(r[0], r[1], r[2], r[8]) for r in await engine.list_workers())
        offset = None if facts.db_now is None else clock_offset(sent, received, facts.db_now)
        facts = dataclasses.replace(facts, workers=workers, clock_offset_s=offset)
        return Health(facts, tuple(diagnose(facts, limits)))


def flow_json(info: QueueInfo | None) -> dict[str, Any]:
    """A queue's pause flag, limits, fairness and aging for ``--json`` (an unset queue:
    not paused, no limits, not fair, no aging)."""
    if info is None:
        return {
            "paused": False,
            "concurrency": None,
            "partition_concurrency": None,
            "rate": None,
            "burst": None,
            "fair": False,
            "weights": 0,
            "aging_s": None,
        }
    return {
        "paused": info.paused,
        "concurrency": info.concurrency,
        "partition_concurrency": info.partition_concurrency,
        "rate": None if info.rate is None else str(info.rate),
        "burst": info.burst,
        "fair": info.fair,
        "weights": info.weights,
        "aging_s": info.aging_s,
    }
