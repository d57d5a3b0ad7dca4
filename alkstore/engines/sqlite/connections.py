"""The SQLite engine's connection: one thread per store, WAL, fair busy retries.

Every operation is one hop to the store's own thread, which owns the
connection; every write unit is one ``BEGIN IMMEDIATE`` transaction (a
deferred transaction that reads then writes gets ``SQLITE_BUSY`` at once).
SQLite's built-in busy handler sleeps with a growing back-off, so the process
that holds the lock keeps winning; instead the busy timeout is 0 and
``BEGIN IMMEDIATE`` is retried here with short jittered sleeps until
``busy_timeout_s`` runs out, which shares the lock fairly between processes.
:class:`SqliteConnection` is what the storage operations of ``engine.py``
stand on.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import pathlib
import random
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self, TypeVar

from alkstore.core.options import check_positive, check_switch, describe
from alkstore.engines.sqlite.listener import NoteListener
from alkstore.engines.sqlite.migrator import SCHEMA_VERSION, installed_version, migrate
from alkstore.errors import EngineError, InvalidArgumentError, StoreClosedError

__all__ = ["SqliteConnection", "in_transaction"]

T = TypeVar("T")

_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL", "extra": "EXTRA", "off": "OFF"}

# The engine whose transaction the current task is inside (deadlock guard).
in_transaction: contextvars.ContextVar[SqliteConnection | None] = contextvars.ContextVar(
    "alkstore_sqlite_tx", default=None
)


def _is_busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(error) or "busy" in str(error)


class SqliteConnection:
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
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._listener: NoteListener | None = None
        self._closed = False
        self._clock: Callable[[], float] = time.time

    def set_clock(self, clock: Callable[[], float]) -> None:
        """TESTS ONLY: read "now" (POSIX seconds) from ``clock`` instead of ``time.time``."""
        self._clock = clock

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

    def _write(self, fn: Callable[..., T], *args: Any) -> T:
        """One write unit on the engine thread: BEGIN IMMEDIATE … COMMIT."""
        conn = self._conn
        assert conn is not None
        self._with_busy_retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            result = fn(conn, *args)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

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
        """One hop to the engine thread (waits while another task's transaction is open)."""
        if self._closed:
            raise StoreClosedError(f"store on {describe(self.path)} is closed")
        lock = self._lock
        assert lock is not None and self._loop is not None
        if lock.locked():
            if in_transaction.get() is self:
                raise InvalidArgumentError(
                    "a store operation inside this store's own open transaction would deadlock "
                    "on SQLite; use tx.queue(...) inside the transaction"
                )
            async with lock:
                return await self._loop.run_in_executor(self._executor, self._guarded, fn, *args)
        return await self._loop.run_in_executor(self._executor, self._guarded, fn, *args)

    # -- lifecycle --------------------------------------------------------------
    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lock = asyncio.Lock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="alkstore-sqlite")
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
