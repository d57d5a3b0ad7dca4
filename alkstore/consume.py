"""The one consumption loop: claim → next due time → wait, for ``Queue.jobs()`` and the Worker.

A consumer claims until a claim comes back short, then asks when the next
delayed job of its queues becomes due (or a claim lapses) and waits for a
wake, that moment, the next slot of a rate limit that held a claim back
(:meth:`ClaimLoop.held`) or the re-poll, whichever is first. A failed claim (the
database restarted, a connection was killed, the disk is full) never ends
the loop: it backs off (0.2 s doubling to 5 s, counted from the failed try's
start) and claims again (the worker ends the pause when another call gets
through, and starts the doubling over when the claim failed on its own
connection: another call got through while it was in flight, or the server had
ended that connection); only a closed store ends it (:class:`StoreClosedError` reaches the
caller).

``idle`` is set while the loop waits with nothing to claim: a readiness
signal for tests and embedders ("the consumer is now waiting").

``ahead`` holds what ``Queue.jobs()`` claimed in a batch and has not handed out
yet; when the iterator is left (``break``, ``aclose()``, garbage collection) or
its store closes, :meth:`ClaimLoop.give_back` releases them: pending again, the
attempt uncounted (as the worker gives back its claim-ahead buffer at drain).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from alkstore.errors import AlkstoreError, StoreClosedError

if TYPE_CHECKING:
    from alkstore.subscription import Subscription

__all__ = ["BACKOFF_MAX_S", "ClaimLoop", "ClaimedJob", "DueSource", "backoff_s"]

log = logging.getLogger("alkstore.consume")

T = TypeVar("T")

BACKOFF_MAX_S = 5.0
_DUE_MIN_S = 0.0005  # a due time already past still waits this long (no busy loop)


class DueSource(Protocol):
    """A queue as the loop sees it (``alkstore.Queue`` is one): when its next job is due."""

    async def _next_wake_in(self, within_s: float) -> float | None: ...


class ClaimedJob(Protocol):
    """A claimed job as the loop sees it (``alkstore.JobHandle`` is one): it can be given back."""

    async def release(self) -> bool: ...


def backoff_s(failures: int) -> float:
    """The pause after ``failures`` failed claims in a row: 0.2 s, 0.4 s, … at most 5 s."""
    return min(0.1 * 2.0 ** min(failures, 16), BACKOFF_MAX_S)


class ClaimLoop:
    """The shared parts of a claim loop over ``queues``, woken through ``sub``."""

    def __init__(
        self,
        queues: Sequence[DueSource],
        sub: Subscription,
        poll_interval_s: float,
        *,
        pause: Callable[[float], Awaitable[None]] | None = None,
        release_all: Callable[[list[ClaimedJob]], Awaitable[list[bool]]] | None = None,
        own_fault: Callable[[BaseException, float], bool] | None = None,
    ) -> None:
        self.queues = queues
        self._release_all = release_all  # many given back in one statement, if it can
        self.sub = sub
        self.poll_interval_s = poll_interval_s
        self.failures = 0
        self.idle = asyncio.Event()
        self._hold_s: float | None = None  # a rate limit's next slot, from the last claims
        self._pause = pause or self._pause_unless_closed
        # whether a claim (sent at a moment) failed on its own connection, which says
        # nothing of the database (``DbWaits.own_fault``)
        self._own_fault = own_fault
        self.ahead: deque[ClaimedJob] = deque()  # claimed, not yet handed out

    async def give_back(self) -> int:
        """Release every claimed job not yet handed out (pending again at its place in
        line, the attempt uncounted); how many were released. One that cannot be (the
        database away) is reclaimed when its claim lapses."""
        handles = list(self.ahead)
        self.ahead.clear()
        if not handles:
            return 0
        results: Sequence[object]
        if self._release_all is not None:
            try:
                results = await self._release_all(handles)
            except AlkstoreError:
                results = []
        else:
            results = await asyncio.gather(*(h.release() for h in handles), return_exceptions=True)
        released = sum(1 for result in results if result is True)
        if released < len(handles):
            log.warning(
                "%d claimed job(s) not handed out could not be released; they are "
                "reclaimed when their claim lapses",
                len(handles) - released,
            )
        return released

    async def attempt(self, op: Callable[..., Awaitable[T]], *args: Any) -> T | None:
        """Run one claim step: its result, or ``None`` after it failed and the loop backed off.

        :class:`StoreClosedError` is not a failure: it reaches the caller, which ends.
        """
        started = time.monotonic()
        try:
            result = await op(*args)
        except StoreClosedError:
            raise
        except AlkstoreError as e:
            own_fault = self._own_fault
            if own_fault is not None and own_fault(e, started):
                self.failures = 0  # not the database's failure: no long backoff after an outage
            self.failures += 1
            # the backoff counts from the try's start: a claim that hung until its bound
            # (waiting for a connection while the server restarted) has waited already
            delay = max(backoff_s(self.failures) - (time.monotonic() - started), 0.0)
            log.warning("claim failed (%s); retrying in %.1fs", e, delay)
            await self._pause(delay)
            return None
        self.failures = 0
        return result

    def held(self, hold_s: float | None) -> None:
        """A claim was held back by a rate limit for ``hold_s`` seconds: the next wait
        ends then (the claim returns with the moment; the loop sleeps exactly until it)."""
        if hold_s is not None:
            self._hold_s = hold_s if self._hold_s is None else min(self._hold_s, hold_s)

    async def wait_for_work(self) -> None:
        """Nothing more to claim now: wait for a wake, the next due time or the re-poll."""
        timeout = await self.wait_timeout()
        if timeout is not None:
            await self.wait_idle(timeout)

    async def wait_timeout(self) -> float | None:
        """How long the next wait may last: until the next due time, a rate limit's
        next slot or the re-poll; ``None`` when reading it failed (the loop backed off)."""
        return await self.attempt(self._timeout)

    async def wait_idle(self, timeout: float) -> None:
        """Wait for a wake (or a gap, or the close) up to ``timeout`` s, ``idle`` set
        meanwhile. No database call: a wake resumes the caller's own task at once."""
        self.idle.set()
        try:
            await self.sub.wait(timeout)
        finally:
            self.idle.clear()

    async def _timeout(self) -> float:
        timeout = self.poll_interval_s
        if self._hold_s is not None:
            timeout = min(timeout, max(self._hold_s, _DUE_MIN_S))
            self._hold_s = None
        for queue in self.queues:
            due = await queue._next_wake_in(timeout)  # later than that: looked at again
            if due is not None:
                timeout = min(timeout, max(due, _DUE_MIN_S))
        return timeout

    async def _pause_unless_closed(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.sub.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await self.sub.wait(left)
