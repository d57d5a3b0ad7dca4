"""The SQLite engine's connection: one thread per store, WAL, fair busy retries.

Every operation is one hop to the store's own thread, which owns the
connection. Writes are ``BEGIN IMMEDIATE`` transactions (a deferred
transaction that reads then writes gets ``SQLITE_BUSY`` at once), and they are
group-committed: write units wait in a small queue, and the thread runs all
the waiting ones (at most ``_GROUP_MAX``) in one transaction, so one fsync
covers them. Each unit runs in its own ``SAVEPOINT``: a unit that raises is
rolled back alone and its caller gets the error, the others commit (a unit
alone in its group needs none: its error rolls the transaction back). If the
``COMMIT`` fails, every unit of the group gets that error and none of it is
kept. A caller's result, and the effects its unit asked for (``_on_commit``,
e.g. waking this process's listeners), come only after the ``COMMIT``.
SQLite's built-in busy handler sleeps with a growing back-off, so the process
that holds the lock keeps winning; instead the busy timeout is 0 and
``BEGIN IMMEDIATE`` is retried here with short jittered sleeps until
``busy_timeout_s`` runs out, which shares the lock fairly between processes.
:class:`SqliteConnections` is what the storage operations of ``engine.py``
stand on, and it is the ``protocols.TransactionHost`` a ``store.transaction()``
(``transaction.py``) stands on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import logging
import os
import pathlib
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar

from alkstore.core.job import Row
from alkstore.core.options import check_positive, check_switch, describe
from alkstore.engines.sqlite.listener import Listener, poke_local
from alkstore.engines.sqlite.migrator import QUERIES as Q
from alkstore.engines.sqlite.migrator import SCHEMA_VERSION, installed_version, migrate
from alkstore.engines.sqlite.protocols import TransactionToken
from alkstore.engines.sqlite.thread import EngineThread
from alkstore.engines.sqlite.units import Unit, hand_back
from alkstore.errors import EngineError, InvalidArgumentError, StoreClosedError

__all__ = ["SqliteConnections", "in_transaction"]

log = logging.getLogger("alkstore.sqlite")

T = TypeVar("T")

_NOTES_KEPT = 20_000  # notes kept for listeners; older ones are trimmed
_TRIM_EVERY = 1024

_GROUP_MAX = 64  # the most write units one group commit holds (no group starves latency)

_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL", "extra": "EXTRA", "off": "OFF"}

# The engine whose transaction the current task is inside (deadlock guard).
in_transaction: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "alkstore_sqlite_tx", default=None
)


def _is_busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error) or "busy" in str(error)


class SqliteConnections:
    """The connection and thread of one store's file (what ``SqliteEngine`` stands on)."""

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "full",
        busy_timeout_s: float = 30.0,
        wake_poll_s: float = 0.002,
        migrate: bool = True,
    ) -> None:
        if synchronous.lower() not in _SYNCHRONOUS:
            raise InvalidArgumentError(
                f"invalid synchronous={describe(synchronous)}: use one of {', '.join(_SYNCHRONOUS)}"
            )
        self.path = os.path.abspath(path)
        self.synchronous = _SYNCHRONOUS[synchronous.lower()]
        self.busy_timeout_s = check_positive("busy_timeout_s", busy_timeout_s)
        self.wake_poll_s = check_positive("wake_poll_s", wake_poll_s)
        self.migrate = check_switch("migrate", migrate)
        self._conn: sqlite3.Connection | None = None
        self._executor: EngineThread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._listener: Listener | None = None
        self._closed = False
        self._clock: Callable[[], float] = time.time
        self._units: collections.deque[Unit] = collections.deque()  # waiting write units
        self._effects: list[Callable[[], None]] = []  # to run once the open transaction commits
        self._notes_written = 0

    def set_clock(self, clock: Callable[[], float]) -> None:
        """TESTS ONLY: read "now" (POSIX seconds) from ``clock`` instead of ``time.time``."""
        self._clock = clock

    def now(self) -> float:
        """The clock every operation reads once (``time.time``, or a test's)."""
        return self._clock()

    @classmethod
    def from_options(cls, path: str, options: dict[str, Any]) -> Self:
        """Build from URL query / ``connect()`` keyword options."""
        known = {"synchronous", "busy_timeout_s", "wake_poll_ms", "migrate"}
        unknown = set(options) - known
        if unknown:
            raise InvalidArgumentError(
                f"unknown SQLite option(s) {sorted(unknown)}: known are {sorted(known)}"
            )

        def number(key: str, default: float) -> float:
            value = options.get(key, default)
            if type(value) is str:
                with contextlib.suppress(ValueError):
                    value = float(value)
            return check_positive(key, value)

        return cls(
            path,
            synchronous=str(options.get("synchronous", "full")),
            busy_timeout_s=number("busy_timeout_s", 30.0),
            wake_poll_s=number("wake_poll_ms", 2.0) / 1000.0,
            migrate=check_switch("migrate", options.get("migrate", "on")),
        )

    # -- plumbing --------------------------------------------------------------
    def _new_connection(self) -> sqlite3.Connection:
        if self.migrate:
            conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, cached_statements=64)
        else:  # migrate=off: an existing file only, never a new one
            uri = pathlib.Path(self.path).as_uri() + "?mode=rw"
            try:
                conn = sqlite3.connect(
                    uri, timeout=0, isolation_level=None, cached_statements=64, uri=True
                )
            except sqlite3.OperationalError:
                if os.path.exists(self.path):
                    raise
                raise EngineError(
                    f"no alkstore store at {describe(self.path)}: the file does not exist "
                    "(check the URL; `alkstore migrate` creates it)"
                ) from None
        self._with_busy_retry(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone())
        conn.execute(f"PRAGMA synchronous={self.synchronous}")  # a fixed keyword, never input
        conn.execute("PRAGMA temp_store=MEMORY")
        # dependencies (migration 0008): a dead-lettered child's delete fires the trigger again
        conn.execute("PRAGMA recursive_triggers=ON")
        return conn

    def _with_busy_retry(self, fn: Callable[[], T]) -> T:
        """Run ``fn``, retrying SQLITE_BUSY with short jittered sleeps (fair between processes)."""
        deadline = None
        pause = 0.0002
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.busy_timeout_s
                elif now >= deadline:
                    raise
                time.sleep(random.uniform(0.5 * pause, pause))
                pause = min(pause * 2, 0.004)

    def _on_commit(self, effect: Callable[[], None]) -> None:
        """On the engine thread, inside a write: run ``effect`` once that write has
        committed (once per commit however often asked; dropped if it rolls back)."""
        if effect not in self._effects:
            self._effects.append(effect)

    def _committed(self) -> None:
        """After a COMMIT: the effects its units asked for."""
        effects, self._effects = self._effects, []
        for effect in effects:
            effect()

    def _write(self, fn: Callable[..., T], *args: Any) -> T:
        """One write unit alone on the engine thread: BEGIN IMMEDIATE … COMMIT (migrations)."""
        conn = self._conn
        assert conn is not None
        self._with_busy_retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        self._effects = []
        try:
            result = fn(conn, *args)
            conn.execute("COMMIT")
        except BaseException:
            self._effects = []
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._committed()
        return result

    def _begin_sync(self) -> None:
        """Open a ``store.transaction()``: BEGIN IMMEDIATE, held until its end."""
        conn = self._conn
        assert conn is not None
        self._with_busy_retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        self._effects = []

    def _end_sync(self, statement: str) -> None:
        """End a ``store.transaction()`` with COMMIT or ROLLBACK (and its effects)."""
        conn = self._conn
        assert conn is not None
        if not conn.in_transaction:
            self._effects = []
            return
        try:
            conn.execute(statement)
        except BaseException:
            self._effects = []
            raise
        if statement == "COMMIT":
            self._committed()
        else:
            self._effects = []

    def _queue_unit(self, fn: Callable[..., T], args: tuple[Any, ...], quick: bool) -> Awaitable[T]:
        """Queue a write unit and the engine-thread job that will take it (or find it
        taken by an earlier one's group): no unit runs later than its own job would."""
        unit = Unit(fn, args, quick)
        self._units.append(unit)
        assert self._executor is not None
        self._executor.post(self._run_group)
        return unit.future

    def _run_group(self) -> None:
        """Run the waiting units (at most ``_GROUP_MAX``) in one transaction, settled after
        its COMMIT; quick ones alone (claims) skip the fsync: the next synced one covers them."""
        units: list[Unit] = []
        while len(units) < _GROUP_MAX:
            try:
                unit = self._units.popleft()  # atomic against the loop's append
            except IndexError:
                break
            if not unit.future.cancelled():  # a cancelled caller: skip it
                units.append(unit)
        conn = self._conn
        if not units:
            return
        taken = list(units)
        assert conn is not None
        quick = self.synchronous in ("FULL", "EXTRA") and all(u.quick for u in units)
        if quick:
            conn.execute("PRAGMA synchronous=NORMAL")
        try:
            while units:
                units = self._commit_group(conn, units)
        finally:
            hand_back(taken)
            if quick:
                conn.execute(f"PRAGMA synchronous={self.synchronous}")  # a fixed keyword

    def _commit_group(self, conn: sqlite3.Connection, units: list[Unit]) -> list[Unit]:
        """One group transaction; the units not run yet if it was lost under them."""
        try:
            self._with_busy_retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        except BaseException as e:
            self._fail(units, e)
            return []
        self._effects = []
        done: list[Unit] = []
        alone = len(units) == 1  # the transaction is the unit's: no savepoint needed
        try:
            for i, unit in enumerate(units):
                mark = len(self._effects)
                if not alone:
                    conn.execute("SAVEPOINT alkstore_unit")
                try:
                    unit.result = unit.fn(conn, *unit.args)
                except Exception as e:
                    del self._effects[mark:]
                    if not conn.in_transaction:
                        # SQLite rolled the whole transaction back (disk full, I/O
                        # error): the units before this one are gone with it
                        self._effects = []
                        self._fail(done, e)
                        self._fail([unit], e)
                        return units[i + 1 :]
                    if alone:
                        conn.execute("ROLLBACK")
                        self._fail([unit], e)
                        return []
                    conn.execute("ROLLBACK TO alkstore_unit")
                    conn.execute("RELEASE alkstore_unit")
                    self._fail([unit], e)
                    continue
                if not alone:
                    conn.execute("RELEASE alkstore_unit")
                done.append(unit)
            self._before_commit(conn)
            conn.execute("COMMIT")
        except BaseException as e:
            # the COMMIT (or a savepoint statement) failed: nothing of the group is kept
            self._effects = []
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._fail([u for u in units if u.error is None], e)
            if not isinstance(e, Exception):
                raise
            return []
        self._committed()
        return []

    def _before_commit(self, conn: sqlite3.Connection) -> None:
        """Inside a write group, just before its COMMIT (a subclass's wake notes)."""

    def _fail(self, units: list[Unit], error: BaseException) -> None:
        if isinstance(error, sqlite3.Error):
            wrapped = EngineError(f"SQLite error on {self.path}: {error}")
            wrapped.__cause__ = error
            error = wrapped
        for unit in units:
            unit.error = error

    def _read(self, fn: Callable[..., T], *args: Any) -> T:
        conn = self._conn
        assert conn is not None
        return self._with_busy_retry(lambda: fn(conn, *args))

    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except sqlite3.Error as e:
            raise EngineError(f"SQLite error on {self.path}: {e}") from e

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """One hop to the engine thread (a read, or work that must run alone)."""
        assert self._loop is not None
        loop = self._loop
        return await self._gated(
            lambda: loop.run_in_executor(self._executor, self._guarded, fn, *args)
        )

    async def _write_call(self, fn: Callable[..., T], *args: Any, quick: bool = False) -> T:
        """A write unit ``fn(conn, *args)``, group-committed (``quick``: see _run_group)."""
        return await self._gated(lambda: self._queue_unit(fn, args, quick))

    async def _gated(self, submit: Callable[[], Awaitable[T]]) -> T:
        """``submit`` the work at once, or after another task's open transaction ends."""
        if self._closed:
            raise StoreClosedError(f"store on {describe(self.path)} is closed")
        lock = self._lock
        assert lock is not None
        if lock.locked():
            if in_transaction.get() is self:
                raise InvalidArgumentError(
                    "a store operation inside this store's own open transaction would deadlock "
                    "on SQLite; use tx.queue(...) inside the transaction"
                )
            async with lock:
                return await submit()
        return await submit()

    # one named statement: a read on the engine thread, or a group-committed write
    async def _fetchall(self, name: str, params: dict[str, Any]) -> list[Row]:
        return await self._call(self._read, lambda c: c.execute(Q[name], params).fetchall())

    async def _fetchone(self, name: str, params: dict[str, Any]) -> Row | None:
        return await self._call(self._read, lambda c: c.execute(Q[name], params).fetchone())

    async def _rowcount(self, name: str, params: dict[str, Any]) -> int:
        return await self._write_call(lambda c: c.execute(Q[name], params).rowcount)

    # -- wake notes -------------------------------------------------------------
    def _poke_local(self) -> None:
        poke_local(self.path)

    def write_note(self, conn: sqlite3.Connection, channel: str, payload: str) -> None:
        """Inside a write: a note on ``channel`` (``listener.py`` delivers it once it
        commits), and this process's listeners poked after the commit."""
        try:
            note_id = conn.execute(Q["insert_note"], (channel, payload)).lastrowid or 0
        except sqlite3.Error as e:  # a wake is best-effort; the row is the truth
            if not conn.in_transaction:  # SQLite rolled the transaction back: not best-effort
                raise
            log.warning("alkstore: wake on %r not recorded: %s", channel, e)
            return
        self._on_commit(self._poke_local)
        self._notes_written += 1
        if self._notes_written % _TRIM_EVERY == 0:
            conn.execute(Q["trim_notes"], {"below": note_id - _NOTES_KEPT})

    # -- store.transaction(): the write transaction held by one task -------------
    async def begin_transaction(self) -> TransactionToken:
        """``BEGIN IMMEDIATE``, held (with the store's lock) until :meth:`end_transaction`."""
        if self._closed:
            raise StoreClosedError(f"store on {describe(self.path)} is closed")
        if in_transaction.get() is self:
            raise InvalidArgumentError("this store's transaction is already open in this task")
        lock = self._lock
        assert lock is not None and self._loop is not None
        await lock.acquire()
        try:
            await self._loop.run_in_executor(
                self._executor, self._guarded, self._with_busy_retry, self._begin_sync
            )
        except BaseException:
            lock.release()
            raise
        return in_transaction.set(self)

    async def run_in_transaction(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise StoreClosedError(f"store on {describe(self.path)} is closed")
        assert self._loop is not None and self._conn is not None
        return await self._loop.run_in_executor(
            self._executor, self._guarded, fn, self._conn, *args
        )

    async def end_transaction(self, statement: str, token: TransactionToken) -> None:
        try:
            if not self._closed:  # the notes written poke listeners after a COMMIT
                assert self._loop is not None
                await self._loop.run_in_executor(
                    self._executor, self._guarded, self._end_sync, statement
                )
        finally:
            # The sync facade enters and exits in two tasks (two contexts): the
            # token then belongs to a context that is already gone.
            with contextlib.suppress(ValueError):
                in_transaction.reset(token)
            assert self._lock is not None
            self._lock.release()

    # -- lifecycle --------------------------------------------------------------
    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lock = asyncio.Lock()
        self._executor = EngineThread("alkstore-sqlite")
        try:
            await self._loop.run_in_executor(self._executor, self._guarded, self._open_sync)
        except BaseException:
            self._executor.shutdown(wait=False)
            raise

    def _open_sync(self) -> None:
        conn = self._conn = self._new_connection()
        if self.migrate:
            migrate(conn, self._write, lambda sql: self._with_busy_retry(lambda: conn.execute(sql)))
            return
        version = self._with_busy_retry(lambda: installed_version(conn))
        if version != SCHEMA_VERSION:
            conn.close()
            self._conn = None
            if version == 0:
                raise EngineError(
                    f"{describe(self.path)} is not an alkstore store (no alkstore tables; "
                    "check the URL; `alkstore migrate` creates them)"
                )
            raise EngineError(
                f"the store {describe(self.path)} is at schema version {version}, this "
                f"alkstore needs {SCHEMA_VERSION}"
                + (": run `alkstore migrate`" if version < SCHEMA_VERSION else ": upgrade alkstore")
            )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await asyncio.get_running_loop().run_in_executor(None, listener.stop)
        executor = self._executor
        if executor is not None and self._loop is not None:
            lock = self._lock
            assert lock is not None
            if in_transaction.get() is self:
                # closed from inside this task's own open transaction: the lock is
                # ours; closing the connection rolls the transaction back
                await self._loop.run_in_executor(executor, self._close_sync)
            else:
                async with lock:
                    await self._loop.run_in_executor(executor, self._close_sync)
            executor.shutdown(wait=True)

    def _close_sync(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
