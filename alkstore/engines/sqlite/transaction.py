"""A ``store.transaction()`` on SQLite: the store's connection, held until the end."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from alkstore.core.dedupe import Enqueued
from alkstore.core.job import Row
from alkstore.core.options import Stamps, describe
from alkstore.engines.sqlite.connections import SqliteConnection, in_transaction
from alkstore.errors import StoreClosedError

if TYPE_CHECKING:
    from alkstore.engines.sqlite.engine import SqliteEngine

__all__ = ["SqliteTransaction"]

T = TypeVar("T")


class SqliteTransaction:
    """A ``store.transaction()`` on SQLite: the store's connection, held until the end."""

    def __init__(
        self, engine: SqliteEngine, token: contextvars.Token[SqliteConnection | None]
    ) -> None:
        self._engine = engine
        self._token = token
        self._done = False

    async def _hop(self, fn: Callable[..., T], *args: Any) -> T:
        engine = self._engine
        if engine._closed:
            raise StoreClosedError(f"store on {describe(engine.path)} is closed")
        assert engine._loop is not None
        return await engine._loop.run_in_executor(engine._executor, engine._guarded, fn, *args)

    async def enqueue(self, queue: str, payloads: Sequence[bytes], stamps: Stamps) -> list[int]:
        engine = self._engine
        return await self._hop(engine._insert, engine._conn, queue, payloads, stamps)

    async def enqueue_keyed(
        self,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        engine = self._engine
        return await self._hop(
            engine._insert_keyed, engine._conn, queue, payloads, keys, window_s, stamps
        )

    async def notify(self, channel: str, payload: str) -> None:
        engine = self._engine
        await self._hop(engine._insert_note, engine._conn, channel, payload)

    async def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None) -> list[Row]:
        conn = self._engine._conn
        assert conn is not None
        return await self._hop(lambda: conn.execute(sql, params or ()).fetchall())

    async def _finish(self, statement: str) -> None:
        if self._done:
            return
        self._done = True
        engine = self._engine
        try:
            if not engine._closed:  # the notes written poke listeners after a COMMIT
                await self._hop(engine._end_sync, statement)
        finally:
            # The sync facade enters and exits in two tasks (two contexts): the
            # token then belongs to a context that is already gone.
            with contextlib.suppress(ValueError):
                in_transaction.reset(self._token)
            assert engine._lock is not None
            engine._lock.release()

    async def commit(self) -> None:
        await self._finish("COMMIT")

    async def rollback(self) -> None:
        await self._finish("ROLLBACK")
