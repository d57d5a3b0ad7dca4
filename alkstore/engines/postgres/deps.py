"""Dependencies on PostgreSQL: ``core.deps``'s flows run as statements on one connection.

The parent's end is the trigger ``alk_jobs_gone`` (migration 0008), in the
transaction of whichever statement deleted the row. What is here: the graph
enqueue (on a pool connection in its own transaction, inside the open
``store.transaction()``, or on the caller's connection: the outbox), the
revival of the children a requeued parent took down, and the edges' reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from alkstore.core.deps import GraphNode, enqueue_graph, revive
from alkstore.core.followups import combined
from alkstore.core.job import Row
from alkstore.core.results import RESULTS_CHANNEL
from alkstore.core.steps import Rows, run_steps
from alkstore.engines.postgres.borrowed import async_connection
from alkstore.engines.postgres.connections import Conn, PostgresConnections
from alkstore.engines.postgres.inserts import insert_params, insert_query, returned_ids
from alkstore.errors import EngineError

__all__ = ["PostgresDependencies", "run_graph"]


async def run_graph(
    q: dict[str, bytes],
    timed: Any,
    conn: Any,
    nodes: Sequence[GraphNode],
) -> list[int]:
    """Insert the graph on ``conn`` inside the transaction it is in, in a savepoint
    (a DependencyError or a driver error leaves nothing of it)."""

    async def step(name: str, params: dict[str, Any]) -> Rows:
        if name == "insert":
            stamps = params["stamps"]
            full = insert_params(params["queue"], [params["payload"]], stamps)
            query = q[insert_query(stamps)]
        else:
            query, full = q["deps_" + name], params
        async with psycopg.AsyncCursor(conn, row_factory=tuple_row) as cur:
            await cur.execute(query, timed(full))
            if name == "insert":
                return [(returned_ids(await cur.fetchall())[0],)]
            return await cur.fetchall() if cur.description is not None else []

    await conn.execute(b"SAVEPOINT alkstore_graph")
    try:
        ids = await run_steps(enqueue_graph(nodes), step)
    except BaseException:
        await conn.execute(b"ROLLBACK TO SAVEPOINT alkstore_graph")
        await conn.execute(b"RELEASE SAVEPOINT alkstore_graph")
        raise
    await conn.execute(b"RELEASE SAVEPOINT alkstore_graph")
    return ids


async def revive_children(q: dict[str, bytes], conn: Conn, root: int) -> list[str]:
    """After ``root`` was requeued (same transaction): ``core.deps.revive``; the queues
    of the children made pending."""
    cur = await conn.execute(q["deps_has_edges"], {"id": root})
    row = await cur.fetchone()
    if row is None or not row[0]:
        return []
    queues: list[str] = []

    async def step(name: str, params: dict[str, Any]) -> Rows:
        cur = await conn.execute(q["deps_" + name], params)
        rows = await cur.fetchall() if cur.description is not None else []
        if name == "revive":
            queues.extend(r[0] for r in rows)
            return []
        return rows

    await run_steps(revive(root), step)
    return queues


class PostgresDependencies(PostgresConnections):
    """The engine's dependency operations (``alkstore.engine.Engine``)."""

    async def enqueue_graph(self, nodes: Sequence[GraphNode]) -> list[int]:
        pool = self.check_open()
        try:
            async with pool.connection() as conn:
                await conn.execute(b"BEGIN")
                try:
                    ids = await run_graph(self.q, self.timed, conn, nodes)
                except BaseException:
                    await conn.execute(b"ROLLBACK")
                    raise
                await conn.execute(b"COMMIT")
        except psycopg.Error as e:
            raise await self.failure(e, "enqueue_graph") from e
        for queue in sorted({node.queue for node in nodes}):
            self.send_wake(queue)
        return ids

    async def enqueue_graph_on(self, conn: Any, nodes: Sequence[GraphNode]) -> list[int]:
        """The graph on the caller's async connection, in their transaction; no wake."""
        self.check_open()
        conn = await async_connection(conn)
        try:
            return await run_graph(self.q, self.timed, conn, nodes)
        except psycopg.Error as e:
            raise EngineError(f"PostgreSQL error in enqueue_graph_on: {e}") from e

    async def ack_staged(
        self,
        items: Sequence[tuple[str, int, int]],
        staged: Mapping[int, Sequence[GraphNode]],
        receipt: tuple[str, str] | None = None,
        result: tuple[str, float] | None = None,
    ) -> set[tuple[int, int]]:
        """The ack (with ``receipt``: the worker's receipted batch; with ``result``: one
        ``ack_result``) and, in its transaction, the follow-ups of the rows it deleted."""
        columns: dict[str, list[Any]] = {
            "queues": [item[0] for item in items],
            "ids": [item[1] for item in items],
            "attempts": [item[2] for item in items],
        }
        pool = self.check_open()
        try:
            async with pool.connection() as conn, conn.transaction():
                if result is not None:
                    queue, job_id, attempts = items[0]
                    params = {
                        "id": job_id,
                        "queue": queue,
                        "attempts": attempts,
                        "value": result[0],
                        "keep": result[1],
                        "channel": RESULTS_CHANNEL,
                    }
                    cur = await conn.execute(self.q["ack_result"], self.timed(params))
                    deleted = {job_id} if await cur.fetchall() else set()
                    acked = {(job_id, attempts)} if deleted else set()
                elif receipt is not None:
                    params = {**columns, "owner": receipt[0], "token": receipt[1]}
                    cur = await conn.execute(self.q["ack_receipted_deleted"], self.timed(params))
                    row = await cur.fetchone()
                    refused: set[int] = set(row[0]) if row is not None else set(columns["ids"])
                    deleted = set(row[1]) if row is not None else set()
                    acked = {(i, a) for _, i, a in items if i not in refused}
                else:
                    cur = await conn.execute(self.q["ack_many"], self.timed(columns))
                    acked = {(r[0], r[1]) for r in await cur.fetchall()}
                    deleted = {i for i, _ in acked}
                nodes = combined(staged, deleted)
                if nodes:
                    await run_graph(self.q, self.timed, conn, nodes)
        except psycopg.Error as e:
            raise await self.failure(e, "ack") from e
        for queue in sorted({node.queue for node in nodes}):
            self.send_wake(queue)
        return acked

    async def job_edges(self, job_id: int) -> list[Row]:
        return list(await self._fetchall("deps_edges_of", {"id": job_id}))

    async def requeue_dead(
        self, job_id: int, attempts: int, delay_s: float, expiry_cutoff_s: float
    ) -> bool:
        """One transaction: the dead row back (``admin_requeue``), then the children its
        death took down (``core.deps.revive``); then wake the queues."""
        params = {
            "id": job_id,
            "attempts": attempts,
            "delay": delay_s,
            "expiry_cutoff": expiry_cutoff_s,
        }
        pool = self.check_open()
        try:
            async with pool.connection() as conn, conn.transaction():
                cur = await conn.execute(self.q["admin_requeue"], self.timed(params))
                row = await cur.fetchone()
                if row is None:
                    return False
                woken = [row[0], *await revive_children(self.q, conn, job_id)]
        except psycopg.Error as e:
            raise await self.failure(e, "requeue_dead") from e
        for queue in sorted(set(woken)):
            self.send_wake(queue)
        return True
