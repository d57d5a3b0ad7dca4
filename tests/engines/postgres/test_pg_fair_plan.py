"""PostgreSQL only: the fair claim's plan and connection. Once the planner has
statistics for its tables, ``fair_claim`` runs on its generic plan (planned once
per connection, not at every claim), on the store's fair-claim connection when it
is free (its session plans generically) or on the pool with the setting local to
the claim's transaction; before that, on the server's own choice."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import EngineError, EnqueueOpts
from alkstore.engines.postgres import PostgresEngine


@pytest.fixture
async def fair_store(pg_url: str) -> AsyncIterator[alkstore.Store]:
    """A store on a schema of its own with one pool connection (dropped at teardown)."""
    schema = f"alk_{uuid.uuid4().hex[:12]}"
    store = await alkstore.connect(f"{pg_url}?pool_max=1", schema=schema)
    try:
        yield store
    finally:
        await store.close()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


async def _plans_on(conn: Any) -> tuple[int, int]:
    """(generic, custom) plans of fair_claim's prepared statement on one connection."""
    cur = await conn.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
        ["%cur AS MATERIALIZED%"],
    )
    rows: list[Any] = await cur.fetchall()
    assert len(rows) <= 1, rows
    return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)


async def _pool_plans(engine: PostgresEngine) -> tuple[int, int]:
    """(generic, custom) plans of fair_claim on the pool's (one) connection."""
    async with engine.check_open().connection() as conn:
        return await _plans_on(conn)


async def _plans(engine: PostgresEngine) -> tuple[int, int]:
    """(generic, custom) plans of fair_claim: the pool's connection and the fair-claim one."""
    generic, custom = await _pool_plans(engine)
    kept = engine._fair_claims.conn
    if kept is not None:
        more = await _plans_on(kept)
        generic, custom = generic + more[0], custom + more[1]
    return generic, custom


async def _fair_claimer(engine: PostgresEngine) -> Any:
    """The fair-claim connection, once the first fair claim opened it (in the background)."""
    for _ in range(1000):
        if engine._fair_claims.conn is not None:
            return engine._fair_claims.conn
        await asyncio.sleep(0.01)
    raise AssertionError("the fair-claim connection never opened")


async def _claims(q: alkstore.Queue, times: int) -> None:
    for _ in range(times):
        handles = await q.claim_batch("w", 5)
        assert handles
        await q.ack_batch([h.job.id for h in handles])


async def _analyzed_fair_queue(
    store: alkstore.Store, pg_url: str, *, keys: int, per_key: int
) -> tuple[alkstore.Queue, PostgresEngine]:
    """A fair queue with ``per_key`` jobs on each of ``keys`` keys, its tables analyzed
    (the generic plan is taken only once the planner has statistics)."""
    q = store.queue("tenants")
    for k in range(keys):
        await q.enqueue_many([b"x"] * per_key, EnqueueOpts(partition_key=f"t{k:03}"))
    await q.set_fair()
    engine = store._engine
    assert isinstance(engine, PostgresEngine)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for table in ("alk_jobs", "alk_fair"):
            admin.execute(
                sql.SQL("ANALYZE {}.{}").format(
                    sql.Identifier(engine.schema), sql.Identifier(table)
                )
            )
    return q, engine


async def test_the_fair_claim_runs_on_its_generic_plan_once_its_tables_are_analyzed(
    fair_store: alkstore.Store, pg_url: str
) -> None:
    q, engine = await _analyzed_fair_queue(fair_store, pg_url, keys=200, per_key=20)
    await _claims(q, 12)
    # left to itself the server makes a custom plan at every claim for this statement
    assert await _plans(engine) == (12, 0)


async def test_the_generic_plan_setting_ends_with_the_claims_transaction(
    fair_store: alkstore.Store, pg_url: str
) -> None:
    q, engine = await _analyzed_fair_queue(fair_store, pg_url, keys=50, per_key=4)
    await _claims(q, 1)  # on the pool: the fair-claim connection opens meanwhile
    await _fair_claimer(engine)
    await _claims(q, 2)
    assert (await _plans(engine))[0] == 3  # the claims ran on the generic plan...
    pool = engine.check_open()
    async with pool.connection() as conn:  # ...and the pool's one connection is as it was
        cur = await conn.execute("SELECT current_setting('plan_cache_mode')")
        assert await cur.fetchall() == [("auto",)]


async def test_fair_claims_run_on_the_fair_claim_connection_and_survive_its_death(
    fair_store: alkstore.Store, pg_url: str
) -> None:
    q, engine = await _analyzed_fair_queue(fair_store, pg_url, keys=20, per_key=5)
    got = [h.job.id for h in await q.claim_batch("w", 5)]  # on the pool; opens the connection
    conn = await _fair_claimer(engine)
    async with conn.cursor() as cur:  # only fair claims run here: generic plans
        await cur.execute("SHOW plan_cache_mode")
        assert await cur.fetchone() == ("force_generic_plan",)
    before = await _pool_plans(engine)
    for _ in range(3):
        got += [h.job.id for h in await q.claim_batch("w", 5)]
    assert await _plans_on(conn) == (3, 0)  # these three ran there, generically...
    assert await _pool_plans(engine) == before  # ...and not on the pool
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
    failed = 0
    while len(got) < 100:
        try:
            handles = await q.claim_batch("w", 5)
        except EngineError:
            failed += 1
            assert failed == 1, "only the claim on the dead connection fails"
            continue
        assert handles
        got += [h.job.id for h in handles]
    assert len(set(got)) == 100  # each job claimed once, none lost
    assert (await _fair_claimer(engine)) is not conn  # a new one was opened
    await fair_store.close()
    assert engine._fair_claims.conn is None


async def test_without_prepared_statements_fair_claims_stay_on_the_pool(pg_url: str) -> None:
    """``prepare=off`` (PgBouncer): no plan to keep, and a session setting could outlive
    the client's use of a pooled server connection: no fair-claim connection is opened."""
    schema = f"alk_{uuid.uuid4().hex[:12]}"
    store = await alkstore.connect(f"{pg_url}?prepare=off", schema=schema)
    try:
        q, engine = await _analyzed_fair_queue(store, pg_url, keys=10, per_key=3)
        await _claims(q, 3)
        await asyncio.sleep(0.05)
        assert engine._fair_claims.conn is None and engine._fair_claims.opening is None
    finally:
        await store.close()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
