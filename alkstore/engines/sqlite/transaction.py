"""A ``store.transaction()`` on SQLite: the store's connection, held until the end."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from alkstore.core.dedupe import Enqueued
from alkstore.core.deps import GraphNode
from alkstore.core.job import Row
from alkstore.core.options import Stamps
from alkstore.engines.sqlite.deps import run_graph
from alkstore.engines.sqlite.inserts import insert_jobs, insert_keyed
from alkstore.engines.sqlite.protocols import TransactionHost, TransactionToken

__all__ = ["SqliteTransaction"]


class SqliteTransaction:
    """A ``store.transaction()`` on SQLite: the store's connection, held until the end.

    Every statement runs on the engine thread inside the ``BEGIN IMMEDIATE`` the
    engine opened for it; the wake notes of its enqueues commit with it.
    """

    def __init__(self, host: TransactionHost, token: TransactionToken) -> None:
        self._host = host
        self._token = token
        self._done = False

    def _enqueue_unit(
        self, conn: sqlite3.Connection, queue: str, payloads: Sequence[bytes], stamps: Stamps
    ) -> list[int]:
        ids = insert_jobs(conn, queue, payloads, stamps, self._host.now())
        self._host.write_note(conn, queue, "")
        return ids

    async def enqueue(self, queue: str, payloads: Sequence[bytes], stamps: Stamps) -> list[int]:
        return await self._host.run_in_transaction(self._enqueue_unit, queue, payloads, stamps)

    def _graph_unit(self, conn: sqlite3.Connection, nodes: Sequence[GraphNode]) -> list[int]:
        return run_graph(conn, nodes, self._host.now(), self._host.write_note)

    async def enqueue_graph(self, nodes: Sequence[GraphNode]) -> list[int]:
        return await self._host.run_in_transaction(self._graph_unit, nodes)

    def _enqueue_keyed_unit(
        self,
        conn: sqlite3.Connection,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        now = self._host.now()
        result = insert_keyed(conn, queue, payloads, keys, window_s, stamps, now)
        self._host.write_note(conn, queue, "")
        return result

    async def enqueue_keyed(
        self,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        return await self._host.run_in_transaction(
            self._enqueue_keyed_unit, queue, payloads, keys, window_s, stamps
        )

    async def notify(self, channel: str, payload: str) -> None:
        await self._host.run_in_transaction(self._host.write_note, channel, payload)

    async def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None) -> list[Row]:
        def run(conn: sqlite3.Connection) -> list[Row]:
            return conn.execute(sql, params or ()).fetchall()

        return await self._host.run_in_transaction(run)

    async def _finish(self, statement: str) -> None:
        if self._done:
            return
        self._done = True
        await self._host.end_transaction(statement, self._token)

    async def commit(self) -> None:
        await self._finish("COMMIT")

    async def rollback(self) -> None:
        await self._finish("ROLLBACK")
