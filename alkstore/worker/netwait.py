"""The worker's waits on the database, each bounded, and its reachability log lines.

A cut network does not fail a statement: it waits for the kernel (minutes,
without the connection defaults of docs/postgres.md). The worker never waits
that long. Every database call it makes goes through :meth:`DbWaits.call`,
which gives up after ``timeout_s`` (the call then fails like any database
error: retried, or its claim left to lapse), after a few more seconds once the
worker stops (a graceful stop does not hang on a dead connection), and at once
when the stop is forced (a second signal ends the process whatever the network
does); a call made after that, such as giving the jobs back, gets half a
second. A call given up on is cancelled and left to finish in the background;
its result is never used.

The first failure after a success logs ``database unreachable`` once; the next
success logs ``database reachable again after N s``. A call that fails after
another call got an answer since it was sent says nothing about the database
(its own connection was the one cut, or it was sent while the server
restarted): it is not counted as the database being away. A claim loop or an
ack backed off while the database was away goes again as soon as any call gets
through (:meth:`DbWaits.until_back`), not at the end of its pause.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from alkstore.errors import AlkstoreError, EngineError, StoreClosedError

__all__ = ["DB_WAIT_S", "STOPPING_WAIT_S", "DbWaits"]

log = logging.getLogger("alkstore.worker")

T = TypeVar("T")

DB_WAIT_S = 5.0  # the longest a worker waits for one database call
STOPPING_WAIT_S = 2.0  # once stopping, a call still in flight gets this much more
FORCED_WAIT_S = 0.5  # a call made after a forced stop (the give-backs) gets this long


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # an abandoned call's error is not "never retrieved"


class DbWaits:
    """Bounded database calls of one worker, and whether the database answers."""

    def __init__(self, worker_id: str, timeout_s: float = DB_WAIT_S) -> None:
        self.worker_id = worker_id
        self.timeout_s = timeout_s
        self.down_since: float | None = None  # monotonic, while calls fail
        self.last_ok = time.monotonic()
        self._stopping: asyncio.Future[None] | None = None
        self._forced: asyncio.Future[None] | None = None
        self._stopped_at: float | None = None
        self._back: list[asyncio.Future[None]] = []  # pauses ended by the next answer

    def start(self) -> None:
        """Bind to the running loop (called by ``Worker.run``)."""
        loop = asyncio.get_running_loop()
        self._stopping = loop.create_future()
        self._forced = loop.create_future()
        if self._stopped_at is not None:  # stopped before it ran
            self._stopping.set_result(None)

    def stopping(self, forced: bool) -> None:
        """Shorten the waits in flight (``forced``: end them now)."""
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()
        for future, on in ((self._stopping, True), (self._forced, forced)):
            if on and future is not None and not future.done():
                future.set_result(None)

    async def call(
        self, op: Awaitable[T], what: str, timeout_s: float | None = None, *, judge: bool = True
    ) -> T:
        """Await ``op`` within the bounds; ``EngineError`` when given up on,
        ``StoreClosedError`` when the stop was forced. ``judge``: its answer says
        whether the database answers (not so for a wait that swallows errors)."""
        stopping, forced = self._stopping, self._forced
        assert stopping is not None and forced is not None
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        task = asyncio.ensure_future(op, loop=loop)
        limit = self.timeout_s if timeout_s is None else timeout_s
        after_force = forced.done()  # e.g. a give-back after the second signal: brief
        if after_force:
            limit = min(limit, FORCED_WAIT_S)
        deadline = time.monotonic() + limit
        cut_short = self._stopped_at is None  # started before the stop: shortened by it
        # one future woken by whichever comes first (the call's end, the stop, the forced
        # stop, the deadline): cheaper than asyncio.wait(), which sets up a future and
        # callbacks per wait and once more to take them down, on every claim's path
        waiter = loop.create_future()

        def wake(_: object = None) -> None:
            if not waiter.done():
                waiter.set_result(None)

        watched: list[asyncio.Future[Any]] = [task]
        if not after_force:
            watched.append(forced)
        if cut_short and not stopping.done():
            watched.append(stopping)
        for future in watched:
            future.add_done_callback(wake)
        timer = loop.call_later(limit, wake)
        try:
            while not task.done() and not (forced.done() and not after_force):
                if cut_short and self._stopped_at is not None:
                    deadline = min(deadline, self._stopped_at + STOPPING_WAIT_S)
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if waiter.done():  # woken early (the stop): wait for what is left
                    waiter = loop.create_future()
                    timer.cancel()
                    timer = loop.call_later(left, wake)
                await waiter
        except asyncio.CancelledError:
            task.cancel()
            task.add_done_callback(_retrieve)
            raise
        finally:
            timer.cancel()
            for future in watched:
                future.remove_done_callback(wake)
        if task.done():
            return self._answer(task, started) if judge else task.result()
        task.cancel()  # it ends in the background; its answer is not used
        task.add_done_callback(_retrieve)
        if forced.done() and not after_force:
            raise StoreClosedError(f"worker {self.worker_id} is stopping now: {what} abandoned")
        error = EngineError(f"no answer from the database in {limit:g}s ({what})")
        self.failed(error, started)
        raise error

    async def each(self, ops: Iterable[Awaitable[T]], what: str) -> list[T | BaseException]:
        """Several calls at once within one bound (the stop's give-backs and releases);
        each answer, or its error (all of them the error when the wait gave up)."""
        ops = list(ops)
        if not ops:
            return []
        try:
            return await self.call(asyncio.gather(*ops, return_exceptions=True), what, judge=False)
        except AlkstoreError as e:
            return [e] * len(ops)

    def _answer(self, task: asyncio.Future[T], started: float) -> T:
        try:
            result = task.result()
        except EngineError as e:
            self.failed(e, started)
            raise
        self.answered()
        return result

    def own_fault(self, error: BaseException, started: float | None) -> bool:
        """Whether a call (sent at ``started``) failed on its own connection, which says
        nothing of the database: another call got an answer since it was sent, or the
        server ended that connection (``EngineError.connection_ended``: a connection
        left from before a restart, a terminated backend). The next call decides."""
        if started is not None and self.last_ok > started:
            return True
        return isinstance(error, EngineError) and error.connection_ended

    def failed(self, error: BaseException, started: float | None = None) -> None:
        """A database call (sent at ``started``) failed: log the first failure of a run
        of them, unless it failed on its own connection (:meth:`own_fault`)."""
        if self.own_fault(error, started):
            return
        if self.down_since is None:
            self.down_since = time.monotonic()
            log.warning(
                "worker %s: database unreachable (%s); retrying, running handlers go on "
                "until their claims lapse",
                self.worker_id,
                error,
            )

    def answered(self) -> None:
        """A database call succeeded."""
        now = time.monotonic()
        self.last_ok = now
        since = self.down_since
        if since is not None:
            self.down_since = None
            log.warning(
                "worker %s: database reachable again after %.1fs", self.worker_id, now - since
            )
            back, self._back = self._back, []
            for future in back:
                if not future.done():
                    future.set_result(None)

    async def until_back(self, pause: Callable[[float], Awaitable[None]], seconds: float) -> None:
        """``pause(seconds)``, ended early when the database, away now, answers again
        (any call got through): a claim loop's backoff after an outage is not slept
        out once the server is back. A pause while the database answers (a statement
        that failed on its own) is slept out."""
        if self.down_since is None:
            await pause(seconds)
            return
        back = asyncio.get_running_loop().create_future()
        self._back.append(back)
        sleeping = asyncio.ensure_future(pause(seconds))
        try:
            await asyncio.wait((sleeping, back), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeping.cancel()
            if back in self._back:
                self._back.remove(back)
