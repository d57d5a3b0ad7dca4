"""The transactional outbox on PostgreSQL: enqueue on the caller's own connection.

``enqueue_on`` and its siblings insert on the connection the caller holds
(psycopg's own, or the one under a SQLAlchemy session: ``borrowed.py``), inside
the caller's transaction; the caller commits or rolls back, and no wake is sent
(the consumers' re-poll, or the caller's own notify, finds the jobs). These
are the ``SupportsOutbox`` capability of the seam; ``PostgresEngine`` has them
from :class:`PostgresOutbox`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from alkstore.core.dedupe import Enqueued, keyed_enqueue
from alkstore.core.options import Stamps
from alkstore.core.steps import Rows, run_steps_sync
from alkstore.engines.postgres.borrowed import async_connection, sync_connection
from alkstore.engines.postgres.connections import PostgresConnections
from alkstore.engines.postgres.inserts import (
    insert_keyed,
    insert_params,
    insert_query,
    returned_ids,
    step_params,
)
from alkstore.errors import EngineError

__all__ = ["PostgresOutbox"]


class PostgresOutbox(PostgresConnections):
    """Enqueue inside a transaction the caller holds on their own connection."""

    async def enqueue_on(
        self, conn: Any, queue: str, payloads: Sequence[bytes], stamps: Stamps
    ) -> list[int]:
        """Insert on the caller's ``psycopg.AsyncConnection`` (or SQLAlchemy async
        session's); they commit; no wake."""
        self.check_open()
        conn = await async_connection(conn)
        try:
            # Our own cursor class: server-side binding and tuple rows, whatever
            # cursor_factory or row_factory the caller's connection was given.
            async with psycopg.AsyncCursor(conn, row_factory=tuple_row) as cur:
                params = self.timed(insert_params(queue, payloads, stamps))
                await cur.execute(self.q[insert_query(stamps)], params)
                return returned_ids(await cur.fetchall())
        except psycopg.Error as e:
            raise EngineError(f"PostgreSQL error in enqueue_on: {e}") from e

    def enqueue_on_sync(
        self, conn: Any, queue: str, payloads: Sequence[bytes], stamps: Stamps
    ) -> list[int]:
        """Insert on the caller's blocking ``psycopg.Connection`` (or SQLAlchemy session's);
        they commit; no wake."""
        self.check_open()
        conn = sync_connection(conn)
        try:
            with psycopg.Cursor(conn, row_factory=tuple_row) as cur:
                cur.execute(
                    self.q[insert_query(stamps)], self.timed(insert_params(queue, payloads, stamps))
                )
                return returned_ids(cur.fetchall())
        except psycopg.Error as e:
            raise EngineError(f"PostgreSQL error in enqueue_on: {e}") from e

    async def enqueue_keyed_on(
        self,
        conn: Any,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        """Deduplicated insert on the caller's ``psycopg.AsyncConnection``; they commit."""
        self.check_open()
        conn = await async_connection(conn)
        try:
            return await insert_keyed(
                self.q, self.timed, conn, queue, payloads, keys, window_s, stamps
            )
        except psycopg.Error as e:
            raise EngineError(f"PostgreSQL error in enqueue_on: {e}") from e

    def enqueue_keyed_on_sync(
        self,
        conn: Any,
        queue: str,
        payloads: Sequence[bytes],
        keys: Sequence[str | None],
        window_s: float | None,
        stamps: Stamps,
    ) -> list[Enqueued]:
        """Deduplicated insert on the caller's blocking ``psycopg.Connection``; they commit."""
        self.check_open()
        conn = sync_connection(conn)

        def step(name: str, params: dict[str, Any]) -> Rows:
            query, full = step_params(queue, stamps, name, params)
            with psycopg.Cursor(conn, row_factory=tuple_row) as cur:
                cur.execute(self.q[query], self.timed(full))
                return cur.fetchall() if cur.description is not None else []

        try:
            return run_steps_sync(keyed_enqueue(payloads, keys, window_s), step)
        except psycopg.Error as e:
            raise EngineError(f"PostgreSQL error in enqueue_on: {e}") from e
