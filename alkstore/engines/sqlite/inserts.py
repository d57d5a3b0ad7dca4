"""The enqueue's insert, shared by the engine and its transactions.

The stamp columns of ``insert_job`` from the resolved stamps, the plain insert
and the deduplicated insert (``core.dedupe``'s flow, one named statement per
key) on the store's connection, inside whatever transaction it is in. The
wake note is the caller's (``SqliteConnections.write_note``): an insert here
writes rows only, like PostgreSQL's ``inserts.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from alkstore.core.dedupe import Enqueued, keyed_enqueue
from alkstore.core.options import Stamps
from alkstore.core.steps import Rows, run_steps_sync
from alkstore.engines.sqlite.migrator import QUERIES as Q

__all__ = ["insert_debounced", "insert_jobs", "insert_keyed", "stamp_columns", "touch_fair"]


def stamp_columns(stamps: Stamps, now: float) -> tuple[Any, ...]:
    """The stamp columns of ``insert_job`` after the payload, resolved against ``now``."""
    run_at = stamps.run_at.timestamp() if stamps.run_at is not None else now + stamps.delay_s
    expires = None if stamps.expires_in_s is None else now + stamps.expires_in_s
    return (
        stamps.priority,
        run_at,
        now,
        stamps.max_attempts,
        stamps.visibility_timeout_s,
        stamps.retry_base_s,
        expires,
        stamps.partition_key,
    )


def touch_fair(conn: sqlite3.Connection, queue: str, stamps: Stamps) -> None:
    """A fair queue's key cursor for the batch's partition key (``core.fair``)."""
    if stamps.partition_key is not None:
        conn.execute(Q["fair_touch"], {"queue": queue, "key": stamps.partition_key})


def insert_jobs(
    conn: sqlite3.Connection, queue: str, payloads: Sequence[bytes], stamps: Stamps, now: float
) -> list[int]:
    """Insert one row per payload; their ids, in payload order."""
    rest = stamp_columns(stamps, now)
    touch_fair(conn, queue, stamps)
    if len(payloads) == 1:
        return [conn.execute(Q["insert_job"], (queue, payloads[0], *rest)).lastrowid or 0]
    conn.executemany(Q["insert_job"], [(queue, p, *rest) for p in payloads])
    # One writer holds the lock and ids come from AUTOINCREMENT with no
    # triggers, so the rows of this executemany got consecutive ids.
    last = conn.execute(Q["last_id"]).fetchone()[0]
    return list(range(last - len(payloads) + 1, last + 1))


def insert_debounced(
    conn: sqlite3.Connection,
    queue: str,
    payload: bytes,
    key: str,
    push: bool,
    stamps: Stamps,
    now: float,
) -> Enqueued:
    """The pending job of debounce ``key`` gets ``payload`` (and with ``push`` the new
    run_at), or a new one holds the key. The single writer makes the look-up and
    the write one step: no claim can come between them."""
    rest = stamp_columns(stamps, now)
    found = conn.execute(Q["debounce_pending"], {"queue": queue, "key": key}).fetchone()
    if found is not None:
        params = {"id": found[0], "payload": payload, "run_at": rest[1] if push else None}
        conn.execute(Q["debounce_replace"], params)
        return Enqueued(int(found[0]), True)
    touch_fair(conn, queue, stamps)
    cur = conn.execute(Q["insert_debounced"], (queue, payload, *rest, key))
    return Enqueued(cur.lastrowid or 0, False)


def insert_keyed(
    conn: sqlite3.Connection,
    queue: str,
    payloads: Sequence[bytes],
    keys: Sequence[str | None],
    window_s: float | None,
    stamps: Stamps,
    now: float,
) -> list[Enqueued]:
    """The deduplicated insert on ``conn``, inside the transaction it holds."""
    rest = stamp_columns(stamps, now)
    touch_fair(conn, queue, stamps)

    def step(name: str, params: dict[str, Any]) -> Rows:
        rows: Rows = []
        keys = params.get("keys", ())
        if name == "insert":
            for payload, key in zip(params["payloads"], keys, strict=True):
                if key is None:
                    cur = conn.execute(Q["insert_job"], (queue, payload, *rest))
                    rows.append((cur.lastrowid, None))
                else:
                    row = conn.execute(Q["insert_keyed_job"], (queue, payload, *rest, key))
                    rows.extend(row.fetchall())
        elif name == "take_windows":
            until = now + params["window_s"]
            for key in keys:
                rows.extend(conn.execute(Q["take_window"], (queue, key, until, now)))
        elif name in ("window_jobs", "live_keys"):
            query = Q["window_job" if name == "window_jobs" else "live_key"]
            for key in keys:
                rows.extend(conn.execute(query, (queue, key)))
        elif name == "set_window_jobs":
            conn.executemany(
                Q["set_window_job"],
                [(job_id, queue, key) for key, job_id in zip(keys, params["ids"], strict=True)],
            )
        else:
            raise AssertionError(f"unknown dedupe step {name!r}")
        return rows

    return run_steps_sync(keyed_enqueue(payloads, keys, window_s), step)
