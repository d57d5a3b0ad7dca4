"""Search and bulk actions by filter: the operator's API behind ``alkstore jobs find``,
``alkstore jobs bulk`` and the dashboard's search page.

A bulk action is always looked at first (:meth:`BulkActions.preview`: how many
jobs it would touch and a sample), then started (:meth:`BulkActions.start`
writes its audit row: who, when, the filter with absolute times, the count) and
run in bounded batches (:meth:`BulkActions.run`), each one short transaction
that also moves the action's cursor, so workers keep claiming meanwhile and an
interrupted action resumes exactly where it stopped (:meth:`BulkActions.run`
again, from any process).

>>> ops = store.admin().bulk()
>>> f = parse_filter("queue:emails state:dead error:timeout", now=time.time())
>>> (await ops.preview("retry", f)).count
>>> action = await ops.start("retry", f, actor="alice")
>>> await ops.run(action.id)        # BulkAction(done=..., phase="done")
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from alkstore.core.bulk import REQUEUE_ATTEMPTS, REQUEUE_EXPIRY_CUTOFF_S, BulkRequest, BulkStep
from alkstore.core.filters import JobFilter, parse_filter
from alkstore.core.flow import CANCEL_NOTE
from alkstore.core.job import Job, Row, _utc
from alkstore.core.options import describe
from alkstore.engine_door import StoreDoor, engine_of
from alkstore.errors import InvalidArgumentError

__all__ = [
    "BATCH_DEFAULT",
    "BatchDone",
    "BulkAction",
    "BulkActions",
    "BulkPreview",
    "JobPage",
    "find_jobs",
    "to_filter",
]

BATCH_DEFAULT = 500  # jobs per batch: one short transaction each
BATCH_MAX = 10_000
PAGE_MAX = 1_000
SAMPLE_SIZE = 20
_ID_MAX = 2**63 - 1

BatchDone = Callable[["BulkAction"], Awaitable[None] | None]


class JobPage(NamedTuple):
    """A keyset page of search results: ``after`` for the next page (``None``: last)."""

    jobs: list[Job]
    after: int | None


@dataclass(frozen=True)
class BulkPreview:
    """A dry run: how many jobs the action would touch now, and the first of them."""

    action: str
    filter: JobFilter
    count: int
    sample: list[Job]


class BulkAction(NamedTuple):
    """One bulk action's audit row and progress (``phase`` "done" when finished)."""

    id: int
    action: str
    filter: str
    priority: int | None
    to_queue: str | None
    actor: str
    matched: int  # the dry-run count when it started
    done: int  # jobs changed so far
    phase: str  # live, dead or done: where its cursor is
    after_id: int
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.phase == "done"

    @classmethod
    def from_row(cls, row: Row) -> BulkAction:
        created, updated = _utc(row[10]), _utc(row[11])
        assert created is not None and updated is not None
        return cls(
            int(row[0]),
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            int(row[6]),
            int(row[7]),
            row[8],
            int(row[9]),
            created,
            updated,
            _utc(row[12]),
        )


def to_filter(value: JobFilter | str) -> JobFilter:
    """A filter given as a value or in the language (relative times from now)."""
    if isinstance(value, JobFilter):
        return value
    if isinstance(value, str):
        return parse_filter(value, now=time.time())
    raise InvalidArgumentError(f"filter must be a JobFilter or text, got {describe(value)}")


def _check_limit(limit: object, top: int, what: str = "limit") -> int:
    if type(limit) is not int or not 1 <= limit <= top:
        raise InvalidArgumentError(f"{what} must be an int in [1, {top}], got {describe(limit)}")
    return limit


def _check_after(after: object) -> int:
    if after is None:
        return 0
    if type(after) is not int or not 0 <= after <= _ID_MAX:
        raise InvalidArgumentError(f"after must be a job id, got {describe(after)}")
    return after


async def find_jobs(
    store: StoreDoor, f: JobFilter | str, after: int | None = None, limit: int = 100
) -> JobPage:
    """The jobs ``f`` matches with id > ``after``, in id order (``Admin.find``)."""
    engine = engine_of(store)
    flt = to_filter(f)
    start = _check_after(after)
    n = _check_limit(limit, PAGE_MAX)
    rows = await engine.search_jobs(flt, start, n)
    jobs = [Job(row) for row in rows]
    return JobPage(jobs, jobs[-1].id if len(jobs) == n else None)


class BulkActions:
    """Bulk actions by filter; get one with ``store.admin().bulk()``."""

    __slots__ = ("_store",)

    def __init__(self, store: StoreDoor) -> None:
        self._store = store

    @staticmethod
    def _request(
        action: str, f: JobFilter | str, priority: int | None, to_queue: str | None
    ) -> BulkRequest:
        return BulkRequest(action, to_filter(f), priority, to_queue)

    async def preview(
        self,
        action: str,
        f: JobFilter | str,
        *,
        priority: int | None = None,
        to_queue: str | None = None,
        sample: int = SAMPLE_SIZE,
    ) -> BulkPreview:
        """The dry run: how many jobs ``action`` would touch now and the first ``sample``."""
        engine = engine_of(self._store)
        request = self._request(action, f, priority, to_queue)
        n = _check_limit(sample, PAGE_MAX, "sample")
        reach = request.reach()
        if reach is None:
            return BulkPreview(action, request.filter, 0, [])
        count = await engine.count_jobs(reach)
        rows = await engine.search_jobs(reach, 0, n)
        return BulkPreview(action, request.filter, count, [Job(r) for r in rows])

    async def start(
        self,
        action: str,
        f: JobFilter | str,
        *,
        actor: str,
        priority: int | None = None,
        to_queue: str | None = None,
    ) -> BulkAction:
        """Write the action's audit row (who, the filter, the count now) and its cursor;
        nothing changes until :meth:`run`."""
        engine = engine_of(self._store)
        request = self._request(action, f, priority, to_queue)
        if not isinstance(actor, str) or not actor or len(actor) > 200:
            raise InvalidArgumentError(f"actor must be a non-empty name, got {describe(actor)}")
        step = self._step(request, BATCH_DEFAULT)
        reach = request.reach()
        matched = 0 if reach is None else await engine.count_jobs(reach)
        action_id = await engine.bulk_create(
            action,
            request.filter.text(),
            priority,
            to_queue,
            actor,
            matched,
            step.first_phase(),
        )
        got = await self.get(action_id)
        assert got is not None
        return got

    async def run(
        self,
        action_id: int,
        *,
        batch: int = BATCH_DEFAULT,
        on_batch: BatchDone | None = None,
        max_batches: int | None = None,
    ) -> BulkAction:
        """Run (or resume) the action in batches of ``batch`` jobs until it is done
        (or ``max_batches`` ran); ``on_batch`` sees the progress after each."""
        engine = engine_of(self._store)
        size = _check_limit(batch, BATCH_MAX, "batch")
        current = await self.get(action_id)
        if current is None:
            raise InvalidArgumentError(f"no bulk action with id {describe(action_id)}")
        request = BulkRequest(
            current.action,
            parse_filter(current.filter, now=time.time()),  # absolute times: now is unused
            current.priority,
            current.to_queue,
        )
        step = self._step(request, size)
        ran = 0
        while not current.finished and (max_batches is None or ran < max_batches):
            row = await engine.bulk_step(action_id, step)
            assert row is not None
            current = BulkAction.from_row(row)
            ran += 1
            if on_batch is not None:
                shown = on_batch(current)
                if shown is not None:
                    await shown
        return current

    async def apply(
        self,
        action: str,
        f: JobFilter | str,
        *,
        actor: str,
        priority: int | None = None,
        to_queue: str | None = None,
        batch: int = BATCH_DEFAULT,
    ) -> BulkAction:
        """:meth:`start` then :meth:`run` to the end."""
        started = await self.start(action, f, actor=actor, priority=priority, to_queue=to_queue)
        return await self.run(started.id, batch=batch)

    async def get(self, action_id: int) -> BulkAction | None:
        """One action's audit row and progress."""
        engine = engine_of(self._store)
        if type(action_id) is not int or not 1 <= action_id <= _ID_MAX:
            raise InvalidArgumentError(
                f"action id must be a positive int, got {describe(action_id)}"
            )
        row = await engine.bulk_get(action_id)
        return None if row is None else BulkAction.from_row(row)

    async def history(self, *, before: int | None = None, limit: int = 50) -> list[BulkAction]:
        """The audit: actions newest first (a keyset page: ids below ``before``)."""
        engine = engine_of(self._store)
        if before is not None and (type(before) is not int or before < 1):
            raise InvalidArgumentError(f"before must be an action id, got {describe(before)}")
        n = _check_limit(limit, PAGE_MAX)
        return [BulkAction.from_row(r) for r in await engine.bulk_list(before, n)]

    @staticmethod
    def _step(request: BulkRequest, size: int) -> BulkStep:
        reach = request.reach()
        return BulkStep(
            action=request.action,
            reach=reach if reach is not None else request.filter,
            phases=request.phases(),
            limit=size,
            priority=request.priority,
            to_queue=request.to_queue,
            attempts=REQUEUE_ATTEMPTS,
            expiry_cutoff_s=REQUEUE_EXPIRY_CUTOFF_S,
            cancel_note=CANCEL_NOTE,
        )
