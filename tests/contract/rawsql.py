"""The one engine-specific corner of the contract suite: raw SQL for test set-up.

The tests themselves stay engine-neutral; when they must reach under the API
(to count rows, or to move a row's ``run_at`` without sending a wake) they
call these helpers, which know each engine's tables and parameter style:

- SQLite: tables ``alk_jobs`` / ``alk_dead``, times REAL POSIX seconds, ``?`` params.
- PostgreSQL: the same tables in schema ``target.schema``, times timestamptz,
  ``%s`` params.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from typing import Protocol

import alkstore


class Target(Protocol):
    engine: str
    schema: str


def _tables(target: Target) -> tuple[str, str]:
    if target.engine == "sqlite":
        return "alk_jobs", "alk_dead"
    schema = '"' + target.schema.replace('"', '""') + '"'
    return f"{schema}.alk_jobs", f"{schema}.alk_dead"


def _param(target: Target) -> str:
    return "?" if target.engine == "sqlite" else "%s"


async def count_rows(store: alkstore.Store, target: Target) -> tuple[int, int]:
    """``(live, dead)`` row counts over every queue of the store."""
    live, dead = _tables(target)
    async with store.transaction() as tx:
        rows = await tx.execute(
            f"SELECT (SELECT count(*) FROM {live}), (SELECT count(*) FROM {dead})"
        )
    return int(rows[0][0]), int(rows[0][1])


async def make_due_now(store: alkstore.Store, target: Target, job_id: int) -> None:
    """Set a pending job's ``run_at`` to one second ago, with no wake."""
    live, _ = _tables(target)
    p = _param(target)
    async with store.transaction() as tx:
        if target.engine == "sqlite":
            await tx.execute(
                f"UPDATE {live} SET run_at = {p} WHERE id = {p}", (time.time() - 1, job_id)
            )
        else:
            await tx.execute(
                f"UPDATE {live} SET run_at = now() - interval '1 second' WHERE id = {p}", (job_id,)
            )


def fail_fast_options(target: Target) -> dict[str, object]:
    """Store options under which a locked database fails an operation quickly."""
    return {"busy_timeout_s": 0.05} if target.engine == "sqlite" else {}


@contextlib.asynccontextmanager
async def claims_refused(target: Target, url: str) -> AsyncIterator[None]:
    """The database refuses the store's next operations, for real.

    SQLite: another connection holds the write lock until the block ends (a
    store opened with :func:`fail_fast_options` gets "database is locked").
    PostgreSQL: every other connection to the database is terminated on entry
    (the pool's idle connections are dead the next time they are used).
    """
    if target.engine == "sqlite":
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    yield


async def expire_now(store: alkstore.Store, target: Target, job_id: int) -> None:
    """Set a live job's ``expires_at`` to one second ago, with no wake."""
    live, _ = _tables(target)
    p = _param(target)
    async with store.transaction() as tx:
        if target.engine == "sqlite":
            await tx.execute(
                f"UPDATE {live} SET expires_at = {p} WHERE id = {p}", (time.time() - 1, job_id)
            )
        else:
            await tx.execute(
                f"UPDATE {live} SET expires_at = now() - interval '1 second' WHERE id = {p}",
                (job_id,),
            )


async def _exec(store: alkstore.Store, sql: str, params: tuple[object, ...] = ()) -> None:
    async with store.transaction() as tx:
        await tx.execute(sql, params)


async def end_dedupe_windows(store: alkstore.Store, target: Target) -> None:
    """Move every dedupe window's end one second into the past."""
    table = "alk_dedupe" if target.engine == "sqlite" else f'"{target.schema}".alk_dedupe'
    if target.engine == "sqlite":
        await _exec(store, f"UPDATE {table} SET expires_at = ?", (time.time() - 1,))
    else:
        await _exec(store, f"UPDATE {table} SET expires_at = now() - interval '1 second'")


async def expire_results(store: alkstore.Store, target: Target) -> None:
    """Move every kept result's expiry one second into the past."""
    table = "alk_results" if target.engine == "sqlite" else f'"{target.schema}".alk_results'
    if target.engine == "sqlite":
        await _exec(store, f"UPDATE {table} SET expires_at = ?", (time.time() - 1,))
    else:
        await _exec(store, f"UPDATE {table} SET expires_at = now() - interval '1 second'")
