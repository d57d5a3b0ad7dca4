"""A ``store.transaction()`` on PostgreSQL: one pool connection inside BEGIN … COMMIT."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from alkstore.core.dedupe import Enqueued
from alkstore.core.deps import GraphNode
from alkstore.core.job import Row
from alkstore.core.options import Stamps
from alkstore.engines.postgres.connections import Conn
from alkstore.engines.postgres.deps import run_graph
from alkstore.engines.postgres.inserts import (
    insert_keyed,
    insert_params,
    insert_query,
    returned_ids,
)
from alkstore.engines.postgres.protocols import TransactionHost
from alkstore.errors import StoreClosedError

__all__ = ["PostgresTransaction"]

log = logging.getLogger("alkstore.postgres")


class PostgresTransaction:
    """A ``store.transaction()``: one pool connection inside BEGIN … COMMIT.

    Enqueued queues are woken only after the COMMIT succeeds (never from inside
    the transaction: see ``waker.py``). ``tx.notify`` is different: it is the
    caller's own notification, so it is a ``pg_notify`` inside the transaction,
    which PostgreSQL itself delivers at commit and drops on rollback — exactly
    the contract, and atomic with the commit.
    """

    def __init__(self, host: TransactionHost, pool: AsyncConnectionPool[Conn], conn: Conn) -> None:
        self._host = host
        self._pool = pool
        self._conn: Conn | None = conn
        self._queues: dict[str, None] = {}

    def _live(self) -> Conn:
        self._host.check_open()
        if self._conn is None:
            raise StoreClosedError("the transaction is already finished")
        return self._conn

    async def enqueue(self, queue: str, payloads: Sequence[bytes], stamps: Stamps) -> list[int]:
        conn = self._live()
        host = self._host
        try:
            cur = await conn.execute(
                host.q[insert_query(stamps)], host.timed(insert_params(queue, payloads, stamps))
            )
            ids = returned_ids(await cur.fetchall())
        except psycopg.Error as e:
            raise await self._host.failure(e, "transaction enqueue") from e
        self._queues[queue] = None
        return ids

    async def enqueue_keyed(
        self,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        conn = self._live()
        host = self._host
        try:
            result = await insert_keyed(
                host.q, host.timed, conn, queue, payloads, keys, window_s, stamps
            )
        except psycopg.Error as e:
            raise await self._host.failure(e, "transaction enqueue") from e
        self._queues[queue] = None
        return result

    async def enqueue_graph(self, nodes: Sequence[GraphNode]) -> list[int]:
        conn = self._live()
        host = self._host
        try:
            ids = await run_graph(host.q, host.timed, conn, nodes)
        except psycopg.Error as e:
            raise await self._host.failure(e, "transaction enqueue") from e
        for node in nodes:
            self._queues[node.queue] = None
        return ids

    async def notify(self, channel: str, payload: str) -> None:
        conn = self._live()
        try:
            await conn.execute(self._host.q["notify"], {"channel": channel, "payload": payload})
        except psycopg.Error as e:
            raise await self._host.failure(e, "transaction notify") from e

    async def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None) -> list[Row]:
        conn = self._live()
        try:
            cur = await conn.execute(sql, params, prepare=False)  # the caller's own SQL
            if cur.description is None:
                return []
            return await cur.fetchall()
        except psycopg.Error as e:
            raise await self._host.failure(e, "transaction execute") from e

    async def _finish(self, statement: str) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not conn.closed:
                await conn.execute(statement)
        except psycopg.Error as e:
            if statement == "COMMIT":
                raise await self._host.failure(e, "commit") from e
            log.debug("alkstore: rollback failed (the connection is gone): %s", e)
        finally:
            await self._pool.putconn(conn)

    async def commit(self) -> None:
        await self._finish("COMMIT")
        for queue in self._queues:
            self._host.send_wake(queue)

    async def rollback(self) -> None:
        await self._finish("ROLLBACK")
