"""The outbox on SQLAlchemy: ``enqueue_on(session, …)`` writes the job on the session's
own psycopg connection, so it commits or rolls back with the session's rows (sync
``Session`` through ``alkstore.sync``, ``AsyncSession`` through the async API)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, insert, select
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

import alkstore
from alkstore import EnqueueOpts, InvalidArgumentError, sync


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    """A schema of its own for the store and the app's table; dropped at teardown."""
    name = f"sa_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _sa_url(pg_url: str) -> str:
    return "postgresql+psycopg://" + pg_url.split("://", 1)[1]


def _orders(schema: str) -> Table:
    return Table("orders", MetaData(schema=schema), Column("id", Integer, primary_key=True))


def test_a_session_commit_commits_the_job_with_the_rows(pg_url: str, schema: str) -> None:
    engine = create_engine(_sa_url(pg_url))
    orders = _orders(schema)
    try:
        with sync.connect(pg_url, schema=schema) as store:
            orders.metadata.create_all(engine)
            emails = store.queue("emails")
            with Session(engine) as session, session.begin():
                session.execute(insert(orders).values(id=42))
                job = emails.enqueue_on(session, {"order": 42})
                both = emails.enqueue_many_on(session, [b"a", b"b"])
                assert emails.get_job(job) is None  # not committed yet: invisible elsewhere
            store.wake("emails")
            found = emails.get_job(job)
            assert found is not None and found.json() == {"order": 42}
            assert both == [job + 1, job + 2]
            with Session(engine) as session:
                assert session.scalars(select(orders.c.id)).all() == [42]
    finally:
        engine.dispose()


def test_a_session_rollback_leaves_neither_the_job_nor_the_rows(pg_url: str, schema: str) -> None:
    engine = create_engine(_sa_url(pg_url))
    orders = _orders(schema)
    try:
        with sync.connect(pg_url, schema=schema) as store:
            orders.metadata.create_all(engine)
            emails = store.queue("emails")
            with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
                session.execute(insert(orders).values(id=7))
                job = emails.enqueue_on(session.connection(), {"order": 7})
                raise RuntimeError("the view failed after enqueueing")
            assert emails.get_job(job) is None
            assert emails.claim_one("w") is None
            with Session(engine) as session:
                assert session.scalars(select(orders.c.id)).all() == []
    finally:
        engine.dispose()


async def test_an_async_session_commits_or_rolls_back_the_job_with_its_rows(
    pg_url: str, schema: str
) -> None:
    engine = create_async_engine(_sa_url(pg_url))
    orders = _orders(schema)
    try:
        async with await alkstore.connect(pg_url, schema=schema) as store:
            async with engine.begin() as conn:
                await conn.run_sync(orders.metadata.create_all)
            emails = store.queue("emails")
            async with AsyncSession(engine) as session, session.begin():
                await session.execute(insert(orders).values(id=1))
                kept = await emails.enqueue_unique_on(
                    session, {"order": 1}, EnqueueOpts(dedupe_key="order-1")
                )
                assert await emails.get_job(kept.id) is None
            await store.wake("emails")
            with pytest.raises(RuntimeError):
                async with AsyncSession(engine) as session, session.begin():
                    await session.execute(insert(orders).values(id=2))
                    dropped = await emails.enqueue_on(session, {"order": 2})
                    raise RuntimeError("rolled back")
            assert await emails.get_job(dropped) is None
            handle = await emails.claim_one("w")
            assert handle is not None and handle.job.id == kept.id
            assert handle.job.json() == {"order": 1}
            assert await emails.claim_one("w") is None
            async with AsyncSession(engine) as session:
                assert (await session.scalars(select(orders.c.id))).all() == [1]
    finally:
        await engine.dispose()


async def test_a_session_of_the_other_kind_is_refused_with_its_name(
    pg_url: str, schema: str
) -> None:
    engine = create_engine(_sa_url(pg_url))
    try:
        async with await alkstore.connect(pg_url, schema=schema) as store:
            with Session(engine) as session, pytest.raises(InvalidArgumentError, match="Session"):
                await store.queue("emails").enqueue_on(session, b"x")
    finally:
        engine.dispose()
