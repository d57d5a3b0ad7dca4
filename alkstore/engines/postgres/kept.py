"""A connection kept beside the pool for one kind of statement.

The store keeps two: one for the plain claim and one for the worker's receipted
ack (``connections.py``). A statement of that kind runs on its connection when
the connection is free: no pool checkout and return around it (a claim's
wake is ~0.1 ms sooner), its prepared statement stays planned on one
connection, and a session setting made once at open can stand in for a
per-statement one (the ack's planner setting, which otherwise costs a
pipeline a statement: ~100 µs of client CPU). When the connection is taken,
or not open yet (it opens in the background on first use), the statement runs
on the pool as before. A failed or cancelled statement drops the connection
(its state is unknown) and the next use opens another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import psycopg
from psycopg.rows import TupleRow

__all__ = ["KeptConnection"]

log = logging.getLogger("alkstore.postgres")

Conn = psycopg.AsyncConnection[TupleRow]


class KeptConnection:
    """One connection kept for one kind of statement (``what``, for the log)."""

    __slots__ = ("_closed", "_open", "_ready", "busy", "conn", "opening", "what")

    def __init__(
        self,
        what: str,
        open_: Callable[[], Awaitable[Conn]],
        closed: Callable[[], bool],
        *,
        ready: Callable[[], Conn | None] | None = None,
    ) -> None:
        self.what = what
        self._open = open_  # a new configured connection
        self._closed = closed  # whether the store closed meanwhile
        self._ready = ready  # an open configured connection to adopt at once, if any
        self.conn: Conn | None = None
        self.busy = False
        self.opening: asyncio.Task[None] | None = None

    def take(self) -> Conn | None:
        """The connection, marked busy, if it is open and free (give it back with
        ``busy = False``, or :meth:`drop` it); else ``None`` (use the pool), and
        the connection starts opening in the background if there is none."""
        conn = self.conn
        if conn is None and self.opening is None and self._ready is not None:
            conn = self.conn = self._ready()
        if conn is None or self.busy:
            if conn is None and self.opening is None:
                self.opening = asyncio.get_running_loop().create_task(self._opened())
            return None
        self.busy = True
        return conn

    async def take_opening(self) -> Conn | None:
        """After :meth:`take` gave ``None``: the connection once it opened, if it was
        opening (its first use), else ``None``. The statement then waits a connect
        once, instead of running on the pool and growing it by a connection the
        process keeps but hardly uses."""
        if self.opening is None:
            return None
        await asyncio.shield(self.opening)
        return self.take()

    async def _opened(self) -> None:
        conn = None
        try:
            conn = await self._open()
        except (psycopg.Error, OSError) as e:
            log.debug("alkstore: %s connection not opened: %s", self.what, e)
            return
        finally:
            self.opening = None
        if self._closed():
            await _close(conn)
        else:
            self.conn = conn

    async def drop(self, conn: Conn) -> None:
        """Forget ``conn`` (it failed) and close it; the next use opens another."""
        if self.conn is conn:
            self.conn = None
        await _close(conn)

    async def close(self) -> None:
        """Stop an opening and close the connection (the store closes)."""
        opening, self.opening = self.opening, None
        if opening is not None:
            opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await opening
        conn, self.conn = self.conn, None
        if conn is not None:
            await _close(conn)


async def _close(conn: Conn) -> None:
    with contextlib.suppress(psycopg.Error, OSError):
        await conn.close()
