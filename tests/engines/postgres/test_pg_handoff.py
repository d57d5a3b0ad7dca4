"""Hand-offs (docs/postgres.md "Hand-offs"): an enqueue of an immediately due job
with no key, into a queue nothing gates, inserts it already claimed by an idle
worker, which starts it on the notification alone. Only PostgreSQL hands off; the
processes' side (several workers, a killed or frozen one) is in
tests/acceptance/test_worker_handoff.py."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import EnqueueOpts, current_job
from alkstore.engines.postgres.handoff import handoff_key, lock_class

Conn = psycopg.AsyncConnection[Any]


@pytest.fixture
async def schema(pg_url: str) -> AsyncIterator[str]:
    name = "handoff_" + uuid.uuid4().hex[:8]
    yield name
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
async def conn(pg_url: str) -> AsyncIterator[Conn]:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as c:
        yield c


async def until(check: Callable[[], Awaitable[object] | object], what: str) -> None:
    """Poll ``check`` (the pytest timeout is the real bound; this names the wait)."""
    deadline = time.monotonic() + 30
    while True:
        got = check()
        if isinstance(got, Awaitable):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def idle_locks(conn: Conn, schema: str) -> int:
    """The idle marks held now: exclusive advisory locks of the schema's class."""
    cur = await conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s::oid"
        " AND mode = 'ExclusiveLock' AND granted",
        (lock_class(schema) % 2**32,),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_an_idle_worker_starts_a_due_job_the_enqueue_handed_it(
    pg_url: str, schema: str, conn: Conn
) -> None:
    app = alkstore.App(pg_url, schema=schema)
    ran: list[tuple[int, int, str | None]] = []

    @app.task(queue="q", name="t")
    async def t(i: int, note: str = "") -> None:
        job = current_job()
        assert job is not None
        assert len(note) == i or not note
        ran.append((i, job.attempts, job.worker_id))

    worker = app.worker(concurrency=2, poll_interval_s=30)  # no re-poll claims meanwhile
    run = asyncio.create_task(worker.run())
    try:
        await until(lambda: idle_locks(conn, schema), "the worker to be idle")
        for i in range(3):
            await t.defer(i)

            def done(n: int = i + 1) -> bool:
                return len(ran) == n

            await until(done, f"job {i} to run")
            await until(lambda: idle_locks(conn, schema), "the worker to be idle again")
        assert ran == [(i, 1, worker.worker_id) for i in range(3)]
        assert worker._producer.handed == 3  # started on the notes: never claimed
        for size in (200, 6000):  # base64 over several lines; too large for a note
            await until(lambda: idle_locks(conn, schema), "the worker to be idle")
            await t.defer(size, note="x" * size)
        await until(lambda: len(ran) == 5, "the larger jobs to run")
        assert ran[3:] == [(200, 1, worker.worker_id), (6000, 1, worker.worker_id)]
        assert worker._producer.handed == 5
    finally:
        worker.stop()
        await run
        await app.close()
    cur = await conn.execute(
        sql.SQL("SELECT count(*) FROM {}.alk_handoff").format(sql.Identifier(schema))
    )
    assert await cur.fetchone() == (0,)  # the stop deletes the worker's slot


async def test_gated_queues_and_keyed_delayed_or_batched_jobs_are_never_handed(
    pg_url: str, schema: str, conn: Conn
) -> None:
    app = alkstore.App(pg_url, schema=schema)
    ran: list[str] = []

    @app.task(queue="q", name="t")
    async def t(what: str) -> None:
        ran.append(what)

    worker = app.worker(concurrency=4, poll_interval_s=0.2)
    run = asyncio.create_task(worker.run())
    store = await app.connect()
    q = store.queue("q")
    try:
        idle = lambda: idle_locks(conn, schema)  # noqa: E731

        async def defer_idle(what: str, **opts: Any) -> None:
            await until(idle, "the worker to be idle")
            await t.configure(**opts).defer(what)

        await defer_idle("dedupe", dedupe_key="k")
        await defer_idle("partition", partition_key="p")
        await defer_idle("delay", delay_s=0.05)
        await until(idle, "the worker to be idle")
        await t.defer_many([{"what": "many-1"}, {"what": "many-2"}])
        await until(lambda: len(ran) == 5, "the first five to run")
        await q.set_limits(concurrency=3)
        await defer_idle("limited")
        await until(lambda: len(ran) == 6, "the limited queue's job to run")
        await q.set_limits()
        await q.set_fair(True)
        await defer_idle("fair")
        await until(lambda: len(ran) == 7, "the fair queue's job to run")
        await q.set_fair(False)
        await q.pause()
        await defer_idle("paused")
        # not handed: the enqueue's own statement inserted it pending (no waiting
        # for a claim that must not come: the row says what the insert did)
        cur = await conn.execute(
            sql.SQL("SELECT state, attempts FROM {}.alk_jobs WHERE queue = 'q'").format(
                sql.Identifier(schema)
            )
        )
        assert await cur.fetchall() == [("pending", 0)]
        assert "paused" not in ran
        await q.resume()
        await until(lambda: len(ran) == 8, "the paused queue's job to run after resume")
        assert sorted(ran) == sorted(
            ["dedupe", "partition", "delay", "many-1", "many-2", "limited", "fair", "paused"]
        )
        assert worker._producer.handed == 0
        await defer_idle("plain")  # and a plain job is handed: the worker was idle
        await until(lambda: len(ran) == 9, "the plain job to run")
        assert worker._producer.handed == 1
    finally:
        worker.stop()
        await run
        await app.close()


async def _pin(conn: Conn, schema: str, slot: int) -> None:
    """Hold ``slot``'s idle keys of this second and the next on ``conn``, as the
    worker's listener does while it is idle (a hand-off racing its unlock)."""
    second = math.floor(time.time())
    for s in (second - 1, second, second + 1, second + 2):
        await conn.execute(
            "SELECT pg_advisory_lock(%s, %s)", (lock_class(schema), handoff_key(slot, s))
        )


async def test_a_job_handed_to_a_worker_without_a_free_slot_goes_back_in_line(
    pg_url: str, schema: str, conn: Conn
) -> None:
    """A hand-off never waits behind the worker's running job: it is given back, and
    the jobs behind run in claim order (priority first), each at its first attempt."""
    app = alkstore.App(pg_url, schema=schema)
    order: list[tuple[str, int]] = []
    gate = asyncio.Event()

    @app.task(queue="q", name="t")
    async def t(name: str) -> None:
        job = current_job()
        assert job is not None
        order.append((name, job.attempts))
        if name == "a":
            await gate.wait()

    worker = app.worker(concurrency=1, poll_interval_s=30)
    run = asyncio.create_task(worker.run())
    try:
        await until(lambda: idle_locks(conn, schema), "the worker to be idle")
        await t.defer("a")
        await until(lambda: len(order) == 1, "a to start")
        # the worker is busy: it dropped its idle mark. The test holds the mark in
        # its place, as if the worker's unlock had not gone through yet
        cur = await conn.execute(
            sql.SQL("SELECT slot FROM {}.alk_handoff").format(sql.Identifier(schema))
        )
        (slot,) = await cur.fetchone() or (None,)
        assert slot is not None
        await _pin(conn, schema, slot)
        await t.configure(priority=0).defer("b")
        await t.configure(priority=9).defer("c")
        producer = worker._producer
        await until(lambda: producer.given_back == 2 and not producer.giving, "b, c given back")
        assert producer.handed == 1
        await conn.execute("SELECT pg_advisory_unlock_all()")
        gate.set()
        await until(lambda: len(order) == 3, "b and c to run")
        assert order == [("a", 1), ("c", 1), ("b", 1)]
    finally:
        gate.set()
        worker.stop()
        await run
        await app.close()


async def test_the_enqueue_hands_off_only_to_a_key_of_the_current_second(
    pg_url: str, schema: str, conn: Conn
) -> None:
    """A worker's idle mark names a second: one that stopped moving its keys on (a
    frozen process) is handed nothing once they are past."""
    store = await alkstore.connect(pg_url, schema=schema)
    q = store.queue("q")
    table = sql.Identifier(schema)
    try:
        cur = await conn.execute(
            sql.SQL(
                "INSERT INTO {}.alk_handoff (worker_id, queues, channel, created_at)"
                " VALUES ('ghost', ARRAY['q'], 'alk_h_ghost', now()) RETURNING slot"
            ).format(table)
        )
        row = await cur.fetchone()
        assert row is not None
        slot = row[0]
        second = math.floor(time.time())
        async with await psycopg.AsyncConnection.connect(conn.info.dsn, autocommit=True) as ghost:
            await ghost.execute("LISTEN alk_h_ghost")
            stale = handoff_key(slot, second - 5)
            await ghost.execute("SELECT pg_advisory_lock(%s, %s)", (lock_class(schema), stale))
            first = await q.enqueue({"n": 1})
            for s in (second, second + 1, second + 2):
                key = handoff_key(slot, s)
                await ghost.execute("SELECT pg_advisory_lock(%s, %s)", (lock_class(schema), key))
            other = await q.enqueue({"n": 2}, EnqueueOpts(delay_s=1))
            second_job = await q.enqueue({"n": 3})
            await ghost.execute("SELECT 1")
            notes = [n.payload async for n in ghost.notifies(timeout=1, stop_after=1)]
        states = await conn.execute(
            sql.SQL("SELECT id, state, attempts, worker_id FROM {}.alk_jobs ORDER BY id").format(
                table
            )
        )
        assert await states.fetchall() == [
            (first, "pending", 0, None),
            (other, "pending", 0, None),
            (second_job, "processing", 1, "ghost"),
        ]
        assert len(notes) == 1 and notes[0].startswith(f"[{second_job}, ")
    finally:
        await store.close()


async def test_the_idle_mark_comes_back_after_the_listening_connection_is_cut(
    pg_url: str, schema: str, conn: Conn
) -> None:
    """The mark lives in the listener's session: a killed backend takes it away
    (nothing is handed to a worker that cannot hear), and the reconnected listener
    takes it again, so hand-offs resume."""
    app = alkstore.App(pg_url, schema=schema)
    ran: list[int] = []

    @app.task(queue="q", name="t")
    async def t(i: int) -> None:
        ran.append(i)

    worker = app.worker(concurrency=2, poll_interval_s=0.2)
    run = asyncio.create_task(worker.run())
    try:
        await until(lambda: idle_locks(conn, schema), "the worker to be idle")
        store = await app.connect()
        listener = store._engine._listener  # type: ignore[attr-defined]
        cut = listener.backend_pid
        await conn.execute("SELECT pg_terminate_backend(%s)", (cut,))

        async def back() -> bool:
            return listener.backend_pid != cut and await idle_locks(conn, schema) > 0

        await until(back, "the listener to reconnect and mark the worker idle again")
        await t.defer(1)
        await until(lambda: ran == [1], "the job to run")
        assert worker._producer.handed == 1
    finally:
        worker.stop()
        await run
        await app.close()
