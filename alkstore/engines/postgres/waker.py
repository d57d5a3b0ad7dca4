"""Enqueue wakes, sent after commit from the store's own connection, coalesced.

Why not NOTIFY inside the enqueue's transaction: a transaction that issued
NOTIFY takes a database-wide lock at commit (to order the notification
queue), which serialises every busy producer behind one another. So an
enqueue commits first, and its wake is a separate tiny statement on a
connection of its own, sent by a background task: ``enqueue`` never waits
for it, and a failed wake is logged and dropped (the row is the truth; the
consumers' re-poll covers it).

Coalescing (per process, per queue): the first wake goes out at once (the
leading edge, so an idle consumer hears of a job with no added latency);
after each send the task sleeps ``window_s``, and whatever queues asked to be
woken meanwhile go out together in one statement when it wakes (the trailing
edge, so no wake is ever dropped, only merged). A queue thus gets at most one
wake per window however fast it is fed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import psycopg

__all__ = ["Waker"]

log = logging.getLogger("alkstore.postgres")

Connect = Callable[[], Awaitable[psycopg.AsyncConnection[tuple[object, ...]]]]


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
        self.sent = 0  # statements sent (for tests and bench)

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
            channels = list(self._pending)
            self._pending.clear()
            await self._send(channels)
            if self._window_s > 0 and not self._closing:
                await asyncio.sleep(self._window_s)

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
