"""The one engine-specific corner of the contract suite: raw SQL for test set-up.

The tests themselves stay engine-neutral; when they must reach under the API
(to count rows, or to move a row's ``run_at`` without sending a wake) they
call these helpers, which know each engine's tables and parameter style:

- SQLite: tables ``alk_jobs`` / ``alk_dead``, times REAL POSIX seconds, ``?`` params.
- PostgreSQL: the same tables in schema ``target.schema``, times timestamptz,
  ``%s`` params.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import alkstore
from alkstore.engine_door import engine_of


class Target(Protocol):
    engine: str
    url: str
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


@contextlib.asynccontextmanager
async def store_whose_wakes_fail(target: Target, wait_s: float) -> AsyncIterator[alkstore.Store]:
    """A store on ``target`` on which every wake fails, for real, and writes do not.

    SQLite: a wake is a row of ``alk_notes``; the table is dropped under the open store.
    PostgreSQL: the store logs in as a role of its own (it owns its schema). Once its
    pool and its waker hold a connection each, the role may no longer log in and the
    waker's backend is terminated from another connection: the waker's kept
    connection is dead and its reconnect is refused, while the pool's connection
    keeps working. The role and the schema are dropped on exit.
    """
    if target.engine == "sqlite":
        async with await alkstore.connect(target.url) as store:
            conn = sqlite3.connect(target.url.removeprefix("sqlite:///"))
            conn.execute("DROP TABLE alk_notes")
            conn.commit()
            conn.close()
            yield store
        return
    import psycopg
    from psycopg import sql

    role = f"alk_wake_{uuid.uuid4().hex[:10]}"
    ident = sql.Identifier(role)
    parts = urlsplit(target.url)
    role_url = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))
    async with await psycopg.AsyncConnection.connect(target.url, autocommit=True) as admin:
        database = (await (await admin.execute("SELECT current_database()")).fetchone())[0]  # type: ignore[index]
        await admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
        try:
            grant = sql.SQL("GRANT CREATE ON DATABASE {} TO {}")
            await admin.execute(grant.format(sql.Identifier(database), ident))
            async with await alkstore.connect(role_url, schema=target.schema) as store:
                await store.admin().stats()  # the pool's connection is open
                # the waker's own send (an enqueue's wake may ride on its insert)
                await engine_of(store).wake("wake-probe")  # opens the waker's connection
                async with asyncio.timeout(wait_s):
                    while True:
                        cur = await admin.execute(
                            "SELECT pid FROM pg_stat_activity WHERE usename = %s AND query LIKE %s",
                            [role, "%pg_notify(c, '')%"],
                        )
                        waker = await cur.fetchone()
                        if waker is not None:
                            break
                        await asyncio.sleep(0.01)  # polling for the waker's backend
                await admin.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(ident))
                await admin.execute("SELECT pg_terminate_backend(%s)", [waker[0]])
                yield store
        finally:
            schema = sql.Identifier(target.schema)
            await admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                [role],
            )
            await admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            await admin.execute(sql.SQL("DROP ROLE {}").format(ident))
