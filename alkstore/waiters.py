"""Waiting for kept results: one listener and one re-check per store, however many waiters.

``queue.result(job_id)`` registers a future here (a new waiter's job is
checked at once, batched with the waiters arriving meanwhile). One background task
per store listens on ``core.results.RESULTS_CHANNEL`` (the fenced ack that
keeps a result sends the job id there at commit) and re-checks the ids it was
told about in one ``outcomes`` query per queue; every ``recheck_s`` (and after
a listener gap) it re-checks every waiting id the same way, which also catches
jobs that died (a dead-letter move sends no note). So 1000 waiters cost one
LISTEN and one query per round, not a poll each.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from alkstore.core.results import JobOutcome
from alkstore.errors import (
    AlkstoreError,
    JobDeadError,
    ResultTimeoutError,
    ResultUnavailableError,
    StoreClosedError,
)

if TYPE_CHECKING:
    from alkstore.engine import Engine
    from alkstore.subscription import Subscription

__all__ = ["ResultWaiters"]


class ResultWaiters:
    """One per store: the futures of ``store.result`` waiters and the task that feeds them."""

    def __init__(
        self,
        engine: Callable[[], Engine],
        subscribe: Callable[[], Subscription],
        recheck_s: float = 1.0,
    ) -> None:
        self._engine = engine  # the store's door: its engine, or StoreClosedError
        self._subscribe = subscribe  # a subscription to RESULTS_CHANNEL, with payloads
        self.recheck_s = recheck_s
        self._waiting: dict[int, tuple[str, list[asyncio.Future[JobOutcome]]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._sub: Subscription | None = None
        self._starting = asyncio.Lock()
        self._fresh: dict[str, set[int]] = defaultdict(set)
        self._flush: asyncio.Task[None] | None = None

    @property
    def listening(self) -> bool:
        """Whether the shared listener task is running (for tests and stats)."""
        return self._task is not None and not self._task.done()

    async def wait(self, queue: str, job_id: int, timeout_s: float) -> JobOutcome:
        """The job's success outcome; ``JobDeadError`` if it died, ``ResultTimeoutError``
        after ``timeout_s``, ``ResultUnavailableError`` if it is gone without a result."""
        future: asyncio.Future[JobOutcome] = asyncio.get_running_loop().create_future()
        entry = self._waiting.setdefault(job_id, (queue, []))
        entry[1].append(future)
        try:
            await self._ensure_listening()
            self._check_soon(queue, job_id)  # it may be finished already
            try:
                return await asyncio.wait_for(asyncio.shield(future), timeout_s)
            except TimeoutError:
                raise ResultTimeoutError(
                    f"job {job_id} of queue {queue!r} did not finish within {timeout_s:g}s"
                ) from None
        finally:
            futures = self._waiting.get(job_id, (queue, []))[1]
            if future in futures:
                futures.remove(future)
            if not futures:
                self._waiting.pop(job_id, None)
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved: never logged as lost

    def _check_soon(self, queue: str, job_id: int) -> None:
        """Check a new waiter's job at once, batched with every waiter that arrives while
        the check is in flight (1000 waiters at once: a few queries, not 1000)."""
        self._fresh[queue].add(job_id)
        if self._flush is None:
            self._flush = asyncio.get_running_loop().create_task(self._flush_fresh())

    async def _flush_fresh(self) -> None:
        try:
            while self._fresh:
                batch, self._fresh = self._fresh, defaultdict(set)
                await self._check({queue: sorted(ids) for queue, ids in batch.items()})
        except StoreClosedError:
            pass  # the listener task fails every waiter as the store closes
        finally:
            self._flush = None

    async def _ensure_listening(self) -> None:
        if self.listening:
            return
        async with self._starting:
            if self.listening:
                return
            # lives as long as the store: one LISTEN for every waiter, now and later
            sub = self._subscribe()
            await sub.__aenter__()
            self._sub = sub
            self._task = asyncio.get_running_loop().create_task(self._run(sub))

    async def _run(self, sub: Subscription) -> None:
        loop = asyncio.get_running_loop()
        next_full = loop.time() + self.recheck_s
        try:
            while not sub.closed:
                timeout = max(next_full - loop.time(), 0.0)
                woke = await sub._wait_notes(timeout)
                if sub.closed:
                    break
                if woke is None or loop.time() >= next_full:  # a gap, or the round is due
                    await self._check(self._by_queue(self._waiting))
                    next_full = loop.time() + self.recheck_s
                elif woke:
                    told = {int(p) for p in woke if p.isdigit()}
                    await self._check(self._by_queue(told))
        except StoreClosedError:
            pass
        finally:
            self._fail_all(StoreClosedError("the store closed while waiting for a result"))
            with contextlib.suppress(Exception):
                await sub.aclose()

    def _by_queue(self, ids: object) -> dict[str, list[int]]:
        grouped: dict[str, list[int]] = defaultdict(list)
        for job_id in list(ids):  # type: ignore[call-overload]
            entry = self._waiting.get(job_id)
            if entry is not None:
                grouped[entry[0]].append(job_id)
        return grouped

    async def _check(self, grouped: dict[str, list[int]]) -> None:
        engine = self._engine()
        for queue, ids in grouped.items():
            try:
                rows = await engine.outcomes(queue, ids)
            except StoreClosedError:
                raise
            except AlkstoreError:
                continue  # the database hiccuped: the next round re-checks
            found = {int(row[0]): JobOutcome.from_row(row) for row in rows}
            for job_id in ids:
                outcome = found.get(job_id)
                if outcome is not None and outcome.outcome in ("pending", "processing"):
                    continue
                if outcome is None:
                    error: Exception | None = ResultUnavailableError(
                        f"job {job_id} of queue {queue!r} is gone without a kept result "
                        "(no such job, its task keeps no results, or the result was purged)"
                    )
                elif outcome.outcome == "dead":
                    error = JobDeadError(job_id, outcome.error, outcome.attempts)
                else:
                    error = None
                self._settle(job_id, outcome, error)

    def _settle(self, job_id: int, outcome: JobOutcome | None, error: Exception | None) -> None:
        entry = self._waiting.get(job_id)
        if entry is None:
            return
        for future in entry[1]:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                assert outcome is not None
                future.set_result(outcome)

    def _fail_all(self, error: Exception) -> None:
        for _queue, futures in list(self._waiting.values()):
            for future in futures:
                if not future.done():
                    future.set_exception(error)
