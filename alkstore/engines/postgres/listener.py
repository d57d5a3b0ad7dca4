"""LISTEN on one dedicated connection per store, reconnecting by itself.

One task owns the connection. Between statements the connection's socket has
a reader callback on the event loop that reads what arrived (libpq's
``consume_input`` and ``notifies``, which never block) and hands the notes to
the sink; when the set of channels changes the task removes the callback,
issues the LISTEN/UNLISTEN (a note read meanwhile reaches the sink through
psycopg's notify handler) and puts it back.

PostgreSQL does not replay notifications: those sent while the connection is
down are lost. So after every reconnect the listener re-issues its LISTENs and
then hands the sink an empty batch, the *gap*, and wake-driven consumers
re-poll at once. While idle it pings every ``ping_s`` so a silently dead
connection is noticed too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import psycopg
from psycopg import sql

from alkstore.engine import NoteSink

__all__ = ["Listener"]

log = logging.getLogger("alkstore.postgres")

Connect = Callable[[], Awaitable[psycopg.AsyncConnection[tuple[object, ...]]]]

_RETRY_FIRST_S = 0.05
_RETRY_MAX_S = 2.0
_STOP_WAIT_S = 0.5  # the longest stop() waits for the listening task to end
# a lock refused (enqueues held it SHARE) is tried again after this, doubling while
# refused up to _RELOCK_MAX_S (enqueues flowing all the time would keep a busy key
# taken: no statement every few milliseconds for a lock that is never granted)
_RELOCK_S = 0.005
_RELOCK_MAX_S = 0.5


def _retrieve(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()  # a late error of a task left to end is not "never retrieved"


def _lock_call(function: str, key: tuple[int, int]) -> sql.Composed:
    return sql.SQL(function + "({}, {})").format(sql.Literal(key[0]), sql.Literal(key[1]))


def _statement(verb: str, channels: Iterable[str]) -> sql.Composed:
    """``LISTEN "a"; LISTEN "b"``: channel names as quoted identifiers, never text."""
    return sql.SQL("; ").join(sql.SQL(verb + " {}").format(sql.Identifier(ch)) for ch in channels)


class Listener:
    """Delivers notifications of the wanted channels to a sink, across reconnects."""

    def __init__(self, connect: Connect, sink: NoteSink, *, ping_s: float = 30.0) -> None:
        self._connect = connect
        self._sink = sink
        self._ping_s = ping_s
        self._wanted: set[str] = set()
        self._active: set[str] = set()
        # session advisory locks (class, key) by owner: what each owner wants held,
        # and what this connection holds (none after a reconnect: a new session)
        self._locks: dict[object, frozenset[tuple[int, int]]] = {}
        self._held: set[tuple[int, int]] = set()
        self._relock_s = _RELOCK_S
        self._changed = asyncio.Event()
        self._waiters: list[asyncio.Future[None]] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.connected = asyncio.Event()
        self.reconnects = 0
        self.backend_pid: int | None = None  # the server process of the current connection

    # -- the store's side ----------------------------------------------------------
    async def listen(self, channels: Iterable[str]) -> None:
        """LISTEN on ``channels``; returns once the server has them (or the try failed)."""
        self._wanted.update(channels)
        await self._sync()

    async def unlisten(self, channels: Iterable[str]) -> None:
        """Stop listening on ``channels``."""
        self._wanted.difference_update(channels)
        if self._task is not None:
            await self._sync()

    def hold(self, owner: object, keys: Iterable[tuple[int, int]]) -> None:
        """Have this connection hold the session advisory locks ``keys`` for ``owner``
        (replacing what it asked for before; none releases them). Not waited for:
        the listening task takes them between reads; a key another session holds
        (SHARE, for a moment) is tried again shortly. They end with the session, so
        a process that dies or loses its connection holds none."""
        keys = frozenset(keys)
        if self._locks.get(owner, frozenset()) == keys:
            return  # as asked before: nothing for the listening task to do
        if keys:
            self._locks[owner] = keys
        else:
            self._locks.pop(owner, None)
        if self._task is not None and not self._stopping:
            self._changed.set()

    async def let_go(self, owner: object) -> None:
        """Release ``owner``'s locks and return once the server has (or the try failed)."""
        self.hold(owner, ())
        if self._task is not None:
            await self._sync()

    async def _sync(self) -> None:
        if self._stopping:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="alkstore-pg-listen"
            )
        await waiter

    async def stop(self) -> None:
        """Stop listening and close the connection; idempotent."""
        self._stopping = True
        self._release_waiters()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            # at once, unless a statement is in flight (e.g. the UNLISTEN of a worker's
            # stop) on a connection that no longer answers: psycopg then sends a cancel
            # request and waits for the statement, up to ~10 s. Not waited for: the task
            # ends in the background and closes its connection (a cut-off worker exits)
            await asyncio.wait({task}, timeout=_STOP_WAIT_S)
            if not task.done():
                task.add_done_callback(_retrieve)
            elif not task.cancelled():
                task.result()  # an unexpected error of its own

    def _release_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- the connection's side ---------------------------------------------------------
    async def _run(self) -> None:
        pause = _RETRY_FIRST_S
        lost_at: float | None = None  # when the connection was lost (monotonic)
        tries = 0
        while not self._stopping:
            conn = None
            try:
                conn = await self._connect()
                self.backend_pid = conn.info.backend_pid
                self._active = set()
                self._held = set()
                await self._apply(conn)
                self.connected.set()
                if lost_at is not None:
                    self.reconnects += 1
                    self._sink(())  # notes sent while we were away are gone: re-poll
                    log.warning(
                        "alkstore: LISTEN connection back after %.1fs (%d failed tries)",
                        time.monotonic() - lost_at,
                        tries,
                    )
                lost_at, tries = None, 0
                pause = _RETRY_FIRST_S
                await self._serve(conn)
            except (psycopg.Error, OSError) as e:
                if self._stopping:
                    return
                if lost_at is None:  # once per outage; each failed try at DEBUG
                    log.warning("alkstore: LISTEN connection lost, reconnecting: %s", e)
                    lost_at = time.monotonic()
                else:
                    tries += 1
                    log.debug("alkstore: LISTEN reconnect failed: %s", e)
                self.connected.clear()
                self._release_waiters()  # nobody waits on a dead connection
                await asyncio.sleep(pause)
                pause = min(pause * 2, _RETRY_MAX_S)
            finally:
                if conn is not None:
                    await conn.close()

    async def _apply(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        """Bring the connection's LISTENs to the wanted set, then release the waiters
        (also when a statement failed or was cancelled: they wait for the try)."""
        self._changed.clear()
        waiters, self._waiters = self._waiters, []
        wanted = set(self._wanted)
        added, removed = sorted(wanted - self._active), sorted(self._active - wanted)
        try:
            if added:
                await conn.execute(_statement("LISTEN", added))
            if removed:
                await conn.execute(_statement("UNLISTEN", removed))
            self._active = wanted
            await self._lock(conn)
        finally:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def _lock(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        """Bring the held advisory locks to the wanted set in one statement; a key
        not granted at once is tried again in a few milliseconds."""
        wanted = set().union(*self._locks.values()) if self._locks else set()
        take, drop = sorted(wanted - self._held), sorted(self._held - wanted)
        if not take and not drop:
            return
        calls = [_lock_call("pg_try_advisory_lock", key) for key in take]
        calls += [_lock_call("pg_advisory_unlock", key) for key in drop]
        cur = await conn.execute(sql.SQL("SELECT ") + sql.SQL(", ").join(calls))
        row = await cur.fetchone()
        assert row is not None
        self._held.difference_update(drop)
        missed = False
        for key, got in zip(take, row, strict=False):
            if got:
                self._held.add(key)
            else:
                missed = True
        if missed:
            asyncio.get_running_loop().call_later(self._relock_s, self._changed.set)
            self._relock_s = min(self._relock_s * 2, _RELOCK_MAX_S)
        else:
            self._relock_s = _RELOCK_S

    async def _serve(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        """Read notifications until the connection fails (raises) or we are cancelled.

        Between statements the socket has a reader callback of its own on the loop:
        a note goes to the sink from the loop's I/O callback, with no task step
        before it and no re-arming after it (``notifies()`` resumed this task, then
        set up its next wait before the woken consumer could run). The callback is
        removed while this task runs a statement (LISTEN, UNLISTEN, the ping), which
        reads the socket itself; a note read by a statement reaches the sink through
        the connection's notify handler."""
        loop = asyncio.get_running_loop()
        pgconn = conn.pgconn
        fd = pgconn.socket
        codec = conn.info.encoding
        sink = self._sink
        failed: asyncio.Future[None] = loop.create_future()

        def note(n: psycopg.Notify) -> None:  # read while a statement ran
            if not self._stopping:
                sink(((n.channel, n.payload),))

        def readable() -> None:
            try:
                pgconn.consume_input()  # never blocks: what the socket has
                notes = []
                while (n := pgconn.notifies()) is not None:
                    notes.append((n.relname.decode(codec), n.extra.decode(codec)))
            except (psycopg.Error, OSError) as e:  # e.g. the server closed the connection
                loop.remove_reader(fd)
                if not failed.done():
                    failed.set_exception(e)
                return
            if notes and not self._stopping:
                sink(notes)

        conn.add_notify_handler(note)
        while True:
            if self._changed.is_set():
                await self._apply(conn)
            loop.add_reader(fd, readable)
            readable()  # what libpq read into its buffer during the last statement
            changed = asyncio.ensure_future(self._changed.wait())
            try:
                waits: set[asyncio.Future[Any]] = {failed, changed}
                done, _ = await asyncio.wait(
                    waits, timeout=self._ping_s, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                loop.remove_reader(fd)
                changed.cancel()
                if failed.done() and not failed.cancelled():
                    failed.exception()  # retrieved here whatever ends the wait
            if failed.done():
                failed.result()  # the connection failed: raise its error
            if not done:
                await conn.execute("SELECT 1")  # idle for ping_s: is it still there?
