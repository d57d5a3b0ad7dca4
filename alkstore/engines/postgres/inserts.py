"""The enqueue's insert, shared by the engine, its transactions and the outbox.

The parameters of ``insert_jobs`` from the resolved stamps, and the deduplicated
insert (``core.dedupe``'s flow, one named statement per step) on a connection
the caller holds, inside whatever transaction that connection is in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg.rows import TupleRow, tuple_row

from alkstore.core.dedupe import Enqueued, keyed_enqueue
from alkstore.core.options import Stamps
from alkstore.core.steps import Rows, run_steps
from alkstore.engines.postgres.connections import Conn

__all__ = ["insert_keyed", "insert_params", "insert_query", "returned_ids", "step_params"]


def insert_params(
    queue: str, payloads: Sequence[bytes], stamps: Stamps, *, wake: bool = False
) -> dict[str, Any]:
    """The parameters of ``insert_jobs`` (and, with ``keys``, of ``insert_keyed_jobs``);
    ``wake``: the insert's transaction also wakes the queue (at its commit)."""
    return {
        "wake": wake,
        "queue": queue,
        "payloads": payloads if type(payloads) is list else list(payloads),
        "priority": stamps.priority,
        "run_at": stamps.run_at,
        "delay": stamps.delay_s,
        "max_attempts": stamps.max_attempts,
        "visibility": stamps.visibility_timeout_s,
        "retry_base": stamps.retry_base_s,
        "expires_in": stamps.expires_in_s,
        "partition_key": stamps.partition_key,
    }


def insert_query(stamps: Stamps, keyed: bool = False) -> str:
    """The insert's query name: a partition key's also keeps a fair queue's key cursor."""
    name = "insert_keyed_jobs" if keyed else "insert_jobs"
    return name + "_fair" if stamps.partition_key is not None else name


_KEYED_STEPS = {
    "insert": "insert_keyed_jobs",
    "take_windows": "take_windows",
    "window_jobs": "window_jobs",
    "live_keys": "live_keys",
    "set_window_jobs": "set_window_jobs",
}


def step_params(
    queue: str, stamps: Stamps, name: str, params: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The query and parameters of one ``core.dedupe`` step."""
    if name == "insert":
        full = insert_params(queue, params["payloads"], stamps)
        full["keys"] = params["keys"]
        return insert_query(stamps, keyed=True), full
    return _KEYED_STEPS[name], {"queue": queue, **params}


async def insert_keyed(
    q: dict[str, bytes],
    timed: Callable[[dict[str, Any]], dict[str, Any]],
    conn: Conn,
    queue: str,
    payloads: Sequence[bytes],
    keys: Sequence[str | None],
    window_s: float | None,
    stamps: Stamps,
) -> list[Enqueued]:
    """The deduplicated insert on ``conn``, inside the transaction it holds."""

    async def step(name: str, params: dict[str, Any]) -> Rows:
        query, full = step_params(queue, stamps, name, params)
        async with psycopg.AsyncCursor(conn, row_factory=tuple_row) as cur:
            await cur.execute(q[query], timed(full))
            return await cur.fetchall() if cur.description is not None else []

    return await run_steps(keyed_enqueue(payloads, keys, window_s), step)


def returned_ids(rows: list[TupleRow]) -> list[int]:
    """The ids an insert returned, in payload order."""
    ids = [row[0] for row in rows]
    ids.sort()  # RETURNING order is not promised; ids ascend in payload order
    return ids
