"""Enqueue wakes, sent after commit from the store's own connection, coalesced.

Why not NOTIFY inside the enqueue's transaction: a transaction that issued
NOTIFY takes a database-wide lock at commit (to order the notification
queue), which serialises every busy producer behind one another. So an
enqueue commits first, and its wake is a separate tiny statement on a
connection of its own, sent by a background task: ``enqueue`` never waits
for it, and a failed wake is logged and dropped (the row is the truth; the
consumers' re-poll covers it).

Coalescing (per process): the first wake goes out at once (the leading edge,
so an idle consumer hears of a job with no added latency); for ``window_s``
after each wake, whatever queues ask to be woken wait, and go out together in
one statement when the window ends (the trailing edge, so no wake is ever
dropped, only merged). A queue thus gets at most one wake per window however
fast it is fed.

The leading edge rides on the enqueue itself (:meth:`Waker.lead`): when no
wake went out for ``LEAD_QUIET_S`` (10 ms, or the window if longer) and none
is waiting, the enqueue's own
statement carries the ``pg_notify``, delivered at its commit: no statement of
its own, no round trip after the commit, and the consumer hears of the job as
the producer gets its answer. The database-wide lock is then taken by one
enqueue of an idle producer, never by a stream of enqueues (of one process or
several, whose NOTIFYs at commit would wait on each other's WAL flush): their
wakes are sent from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import psycopg

__all__ = ["LEAD_QUIET_S", "Waker"]

log = logging.getLogger("alkstore.postgres")

Connect = Callable[[], Awaitable[psycopg.AsyncConnection[tuple[object, ...]]]]

# An enqueue carries its wake only after this long without one from this process: a
# steady stream of producers (whose NOTIFYs at commit would queue on the lock) never.
LEAD_QUIET_S = 0.01


class Waker:
    """A background sender of ``pg_notify(queue, '')`` for committed enqueues."""

    def __init__(self, connect: Connect, query: bytes, window_s: float) -> None:
        self._connect = connect
        self._query = query
        self._window_s = window_s
        self._pending: dict[str, None] = {}
        self._event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self._closing = False
        self._last = -window_s  # monotonic time of the last wake (sent or led)
        self._sending = False
        self.sent = 0  # statements sent (for tests and bench)
        self.led = 0  # wakes carried by an enqueue's own statement (for tests and bench)

    def lead(self) -> bool:
        """Whether the caller's enqueue may carry its wake in its own statement (it then
        sends none after the commit): only with a window, when no wake went out for
        ``LEAD_QUIET_S`` (or the window, if longer) and none waits or is being sent.
        Counts as this window's wake."""
        if self._closing or self._pending or self._sending or self._window_s <= 0:
            return False
        now = time.monotonic()
        if now - self._last < max(self._window_s, LEAD_QUIET_S):
            return False
        self._last = now
        self.led += 1
        return True

    def wake(self, queue: str) -> None:
        """Ask for a wake of ``queue``; returns at once."""
        if self._closing:
            return
        self._pending[queue] = None
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="alkstore-pg-wake"
            )
        self._event.set()

    async def close(self, timeout_s: float = 5.0) -> None:
        """Send what is pending, then stop and close the connection; idempotent."""
        self._closing = True
        self._event.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                await asyncio.wait_for(task, timeout_s)
            except TimeoutError:
                log.warning("alkstore: pending wakes not sent before close")
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error, OSError):
                await conn.close()

    async def _run(self) -> None:
        while True:
            if not self._pending:
                if self._closing:
                    return
                await self._event.wait()
                self._event.clear()
                continue
            wait = self._last + self._window_s - time.monotonic()
            if wait > 0 and not self._closing:
                await asyncio.sleep(wait)  # a wake went out within the window: merge
                continue
            channels = list(self._pending)
            self._pending.clear()
            self._sending = True
            try:
                await self._send(channels)
            finally:  # the window runs from the end of the send, as under load it did
                self._sending = False
                self._last = time.monotonic()

    async def _send(self, channels: list[str]) -> None:
        # One retry on a fresh connection: the kept one may have died since
        # the last wake (a server restart); a second failure drops the wake.
        for attempt in (1, 2):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = await self._connect()
                await self._conn.execute(self._query, {"channels": channels})
                self.sent += 1
                return
            except (psycopg.Error, OSError) as e:
                conn, self._conn = self._conn, None
                if conn is not None:
                    with contextlib.suppress(psycopg.Error, OSError):
                        await conn.close()
                if attempt == 2:
                    log.warning("alkstore: wake of %s not sent: %s", channels, e)
