"""The store's kept connections (docs/postgres.md, "Wakes"): plain claims run on the
claim connection, the worker's receipted acks on the ack connection, when free (on
the pool otherwise); a statement whose connection died fails once with
``EngineError`` and the next one works on a new connection; nothing is lost,
claimed twice or acked without its receipt; the store's close closes them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import EngineError
from alkstore.engines.postgres import PostgresEngine


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[alkstore.Store]:
    schema = "claimconn_" + uuid.uuid4().hex[:8]
    store = await alkstore.connect(pg_url, schema=schema)
    try:
        yield store
    finally:
        await store.close()
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


def _engine(store: alkstore.Store) -> PostgresEngine:
    engine = store._engine
    assert isinstance(engine, PostgresEngine)
    return engine


async def _claimer(store: alkstore.Store) -> Any:
    """The claim connection, once the first claim opened it (in the background)."""
    engine = _engine(store)
    for _ in range(1000):
        if engine._claims.conn is not None:
            return engine._claims.conn
        await asyncio.sleep(0.01)
    raise AssertionError("the claim connection never opened")


async def _acker(store: alkstore.Store) -> Any:
    """The ack connection, once the first receipted ack opened it (in the background)."""
    kept = _engine(store)._acks
    for _ in range(1000):
        if kept.conn is not None:
            return kept.conn
        await asyncio.sleep(0.01)
    raise AssertionError("the ack connection never opened")


async def test_claims_survive_the_claim_connection_dying(
    pg_url: str, store: alkstore.Store
) -> None:
    q = store.queue("cc")
    ids = set(await q.enqueue_many([b"%d" % i for i in range(6)]))
    got = [h.job.id for h in await q.claim_batch("w1", 1)]  # on the pool; opens the claimer
    conn = await _claimer(store)
    got += [h.job.id for h in await q.claim_batch("w1", 1)]  # on the claim connection
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
    failed = 0
    while len(got) < len(ids):
        try:
            got += [h.job.id for h in await q.claim_batch("w1", 1)]
        except EngineError as e:
            failed += 1
            assert failed == 1, "only the claim on the dead connection fails"
            # the server ended that connection: not a sign the database is away
            assert e.connection_ended
    assert sorted(got) == sorted(ids)  # each job claimed once, none lost
    assert (await _claimer(store)) is not conn  # a new one was opened


async def test_concurrent_claims_share_out_the_jobs_once(store: alkstore.Store) -> None:
    q = store.queue("cc2")
    ids = set(await q.enqueue_many([b"%d" % i for i in range(40)]))
    first = [h.job.id for h in await q.claim_batch("w1", 1)]
    await _claimer(store)
    batches = await asyncio.gather(*(q.claim_batch(f"w{i}", 3) for i in range(13)))
    got = first + [h.job.id for b in batches for h in b]
    assert len(got) == len(set(got)) == len(ids)


async def test_close_closes_the_claim_connection(store: alkstore.Store) -> None:
    q = store.queue("cc3")
    await q.enqueue(b"x")
    await q.claim_batch("w1", 1)
    conn = await _claimer(store)
    await store.close()
    assert conn.closed and _engine(store)._claims.conn is None


async def test_receipted_acks_survive_the_ack_connection_dying(
    pg_url: str, store: alkstore.Store
) -> None:
    q = store.queue("ca")
    await q.enqueue_many([b"%d" % i for i in range(8)])
    handles = await q.claim_batch("w1", 8)
    # the first ack runs on the pool (its planner setting in a pipeline) and opens it
    assert await store._ack_receipted(handles[:2], "w1", uuid.uuid4().hex) == [True, True]
    conn = await _acker(store)
    async with conn.cursor() as cur:  # only the receipted ack runs here: index probes
        await cur.execute("SHOW enable_seqscan")
        assert await cur.fetchone() == ("off",)
    assert await store._ack_receipted(handles[2:4], "w1", uuid.uuid4().hex) == [True, True]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
    token = uuid.uuid4().hex
    with pytest.raises(EngineError):
        await store._ack_receipted(handles[4:6], "w1", token)
    # the batch's retry (same token) on a new connection or the pool: acked, by receipt
    assert await store._ack_receipted(handles[4:6], "w1", token) == [True, True]
    assert await store._ack_receipted(handles[6:], "w1", uuid.uuid4().hex) == [True, True]
    assert (await _acker(store)) is not conn
    assert await q.claim_batch("w2", 8) == []  # nothing left, nothing reclaimable


async def test_close_closes_the_ack_connection(store: alkstore.Store) -> None:
    q = store.queue("ca2")
    await q.enqueue(b"x")
    handles = await q.claim_batch("w1", 1)
    await store._ack_receipted(handles, "w1", uuid.uuid4().hex)
    conn = await _acker(store)
    await store.close()
    assert conn.closed and _engine(store)._acks.conn is None


async def _backend_alive(pg_url: str, pid: int) -> bool:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        cur = await admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
        row = await cur.fetchone()
    return row is not None and row[0] == 1


async def _backend_gone(pg_url: str, pid: int) -> bool:
    """Whether the backend ``pid`` exits (a closed socket ends it within moments)."""
    for _ in range(200):
        if not await _backend_alive(pg_url, pid):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_the_opens_own_connection_becomes_the_claim_connection(
    pg_url: str, store: alkstore.Store
) -> None:
    """A store opened on a current schema keeps the connection it read the schema on
    as a spare, and the first claim adopts it at once: a worker's claims cost no
    connect (and the server one backend start and exit less). A store whose open
    migrated keeps none (that session ran DDL under a lock)."""
    assert _engine(store)._spare is None  # the fixture's open created the schema
    q = store.queue("sp")
    ids = await q.enqueue_many([b"1", b"2"])
    other = await alkstore.connect(pg_url, schema=_engine(store).schema)
    try:
        engine = _engine(other)
        spare = engine._spare
        assert spare is not None and not spare.closed
        pid = spare.info.backend_pid
        got = [h.job.id for h in await other.queue("sp").claim_batch("w1", 1)]
        assert engine._claims.conn is spare and engine._spare is None  # adopted, not opened
        assert engine._claims.opening is None
        got += [h.job.id for h in await other.queue("sp").claim_batch("w1", 1)]
        assert sorted(got) == sorted(ids)
        assert await _backend_alive(pg_url, pid)
    finally:
        await other.close()
    assert spare.closed and await _backend_gone(pg_url, pid)


async def test_an_unused_spare_is_closed(
    pg_url: str, store: alkstore.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that never claims (a producer) does not keep the spare connection."""
    from alkstore.engines.postgres import connections

    monkeypatch.setattr(connections, "SPARE_S", 0.05)
    other = await alkstore.connect(pg_url, schema=_engine(store).schema)
    try:
        spare = _engine(other)._spare
        assert spare is not None
        pid = spare.info.backend_pid
        await other.queue("sp2").enqueue(b"x")  # the pool's work: the spare stays unused
        for _ in range(500):
            if spare.closed:
                break
            await asyncio.sleep(0.01)
        assert spare.closed and _engine(other)._spare is None
        assert await _backend_gone(pg_url, pid)
    finally:
        await other.close()
