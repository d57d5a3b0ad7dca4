"""The ring layout of ``alk_jobs`` (schema v13, ``engines/postgres/ring.py``): where rows
go, the maintenance step turning and truncating under a real workload, stragglers
moved forward, truncation skipped behind a lock, and a live migration from schema 11
with old-version workers and producers running.

Every test works in a schema of its own, dropped at teardown.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import EnqueueOpts
from alkstore.engine_door import engine_of
from alkstore.engines.postgres import PostgresEngine
from alkstore.engines.postgres import migrator as pg_migrate
from alkstore.engines.postgres.ring import RING_CAP, RING_SIZE


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    name = f"alk_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
async def admin(pg_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
async def store(pg_url: str, schema: str) -> AsyncIterator[alkstore.Store]:
    async with await alkstore.connect(pg_url, schema=schema) as opened:
        _engine(opened).ring_min_turn_s = 0.0  # turn at every 1,000 jobs, however fast
        yield opened


def _engine(store: alkstore.Store) -> PostgresEngine:
    engine = engine_of(store)
    assert isinstance(engine, PostgresEngine)
    return engine


def _sql(schema: str, text: str) -> sql.Composed:
    return sql.SQL(text).format(s=sql.Identifier(schema))


async def _value(admin: psycopg.AsyncConnection[Any], schema: str, text: str) -> Any:
    cur = await admin.execute(_sql(schema, text))
    row = await cur.fetchone()
    assert row is not None
    return row[0]


async def _slot(admin: psycopg.AsyncConnection[Any], schema: str) -> int:
    return int(await _value(admin, schema, "SELECT slot FROM {s}.alk_ring"))


async def _part(admin: psycopg.AsyncConnection[Any], schema: str, job_id: int) -> int:
    cur = await admin.execute(_sql(schema, "SELECT part FROM {s}.alk_jobs WHERE id = %s"), [job_id])
    row = await cur.fetchone()
    assert row is not None, f"job {job_id} is gone"
    return int(row[0])


async def _sizes(admin: psycopg.AsyncConnection[Any], schema: str) -> list[int]:
    return [
        int(await _value(admin, schema, f"SELECT pg_relation_size('{{s}}.alk_jobs_p{k}')"))
        for k in range(RING_SIZE)
    ]


async def _step(store: alkstore.Store) -> Any:
    """One maintenance step of our own (waiting out a background one that holds the row)."""
    engine = _engine(store)
    for _ in range(200):
        step = await engine.ring_step()
        if not step.busy:
            return step
        await asyncio.sleep(0.01)
    raise AssertionError("the ring's row stayed locked")


async def _fill_turn(admin: psycopg.AsyncConnection[Any], schema: str, slot: int) -> None:
    """Make the ring current on ``slot`` with its cap reached (the next step turns)."""
    await admin.execute(
        _sql(schema, "UPDATE {s}.alk_ring SET slot = %s, turned_id = %s, turned_at = %s"),
        [slot, -RING_CAP, datetime(2000, 1, 1, tzinfo=UTC)],
    )


# -- where rows go ---------------------------------------------------------------------
async def test_plain_jobs_go_to_the_ring_and_long_lived_or_keyed_ones_to_keep(
    store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    q = store.queue("where")
    plain = await q.enqueue("plain")
    many = await q.enqueue_many(["a", "b"])
    keyed = await q.enqueue_unique("keyed", EnqueueOpts(dedupe_key="k"))
    debounced = await q.enqueue("debounced", EnqueueOpts(debounce_key="d"))
    delayed = await q.enqueue("delayed", EnqueueOpts(delay_s=3600))
    async with store.transaction() as tx:
        in_tx = await tx.queue("where").enqueue("in a transaction")
    async with admin.transaction():  # the outbox: the caller's own connection
        outbox = await q.enqueue_on(admin, "on the caller's connection")
    slot = await _slot(admin, schema)
    for job_id in (plain, *many, in_tx, outbox):
        assert await _part(admin, schema, job_id) == slot
    for job_id in (keyed.id, debounced, delayed):
        assert await _part(admin, schema, job_id) == -1
    # a second enqueue of the debounce key replaces the row in keep (the conflict
    # target holds `part`): still one job, and the replace is told apart
    again = await q.enqueue_unique("debounced 2", EnqueueOpts(debounce_key="d"))
    assert again.id == debounced and again.duplicate
    dup = await q.enqueue_unique("keyed 2", EnqueueOpts(dedupe_key="k"))
    assert dup.id == keyed.id and dup.duplicate


async def test_the_check_fails_an_insert_that_puts_a_keyed_row_in_the_ring(
    store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    insert = (
        "INSERT INTO {s}.alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,"
        " visibility_timeout_s, retry_base_s, {col}, part)"
        " VALUES ('q', 'x', 0, now(), now(), 1, 30, 1, 'k', %s)"
    )
    for col in ("dedupe_key", "debounce_key"):
        text = insert.replace("{col}", col)
        with pytest.raises(psycopg.errors.CheckViolation, match="alk_jobs_keyed"):
            await admin.execute(_sql(schema, text), [0])
        await admin.execute(_sql(schema, text), [-1])  # keep takes it


# -- the maintenance step ----------------------------------------------------------------
async def test_the_ring_turns_and_truncates_drained_partitions_under_a_workload(
    store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    q = store.queue("churn")
    seen = {await _slot(admin, schema)}
    truncated: set[int] = set()
    acked: list[int] = []
    enqueued: list[int] = []
    for _ in range(30):  # 30 x 400 = 12,000 jobs: 1.5 laps of the ring
        enqueued += await q.enqueue_many([b"x"] * 400)
        while handles := await q.claim_batch("w", 150):
            ids = [h.job.id for h in handles]
            assert await q.ack_batch(ids) == len(ids)
            acked += ids
        step = await _step(store)
        truncated.update(step.truncated)
        seen.add(await _slot(admin, schema))
    assert sorted(acked) == sorted(enqueued)  # each job once
    assert len(set(acked)) == len(acked)
    assert seen == set(range(RING_SIZE)), seen  # every partition took its turn
    assert len(truncated) >= RING_SIZE - 1, truncated
    # drained: nothing left in any partition but the current one's file
    step = await _step(store)
    sizes = await _sizes(admin, schema)
    assert [k for k, size in enumerate(sizes) if size and k != step.slot] == []
    assert await _value(admin, schema, "SELECT count(*) FROM {s}.alk_jobs") == 0


async def test_the_step_also_runs_by_itself_as_jobs_are_claimed(
    store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    q = store.queue("auto")
    first = await _slot(admin, schema)
    for _ in range(12):
        await q.enqueue_many([b"x"] * 500)
        while handles := await q.claim_batch("w", 200):
            await q.ack_batch([h.job.id for h in handles])
        await asyncio.sleep(0.05)  # let the background step run
    assert await _slot(admin, schema) != first


async def test_a_retry_in_backoff_moves_forward_and_its_partition_is_truncated(
    store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    q = store.queue("straggle")
    straggler = await q.enqueue("later")
    others = await q.enqueue_many(["a", "b", "c"])
    assert await _part(admin, schema, straggler) == 0
    handles = await q.claim_batch("w", 10)
    assert sorted(h.job.id for h in handles) == sorted([straggler, *others])
    for h in handles:
        if h.job.id == straggler:
            assert await h.retry("boom", delay_s=3600)  # pending, due in an hour
        else:
            assert await h.ack()
    await _fill_turn(admin, schema, 7)  # partition 0 is the next one; 7 is full
    step = await _step(store)
    assert step.moved == 1
    assert await _part(admin, schema, straggler) == 7  # moved forward, untouched otherwise
    assert 0 in step.truncated
    assert step.slot == 0 and await _slot(admin, schema) == 0
    job = await q.get_job(straggler)
    assert job is not None and job.attempts == 1 and job.last_error == "boom"
    assert job.state == "pending"


async def test_a_processing_row_pins_its_partition_and_the_ring_waits(
    store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    q = store.queue("pinned")
    await q.enqueue("long job")
    (handle,) = await q.claim_batch("w", 1)
    await _fill_turn(admin, schema, 7)
    step = await _step(store)
    assert step.moved == 0 and step.slot == 7 and 0 not in step.truncated
    assert await _part(admin, schema, handle.job.id) == 0
    assert await handle.ack()
    step = await _step(store)
    assert 0 in step.truncated and step.slot == 0


async def test_truncation_is_skipped_while_a_session_holds_a_lock_and_claims_go_on(
    pg_url: str, store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    q = store.queue("held")
    await q.enqueue_many(["a", "b"])
    for h in await q.claim_batch("w", 2):
        assert await h.ack()
    await _fill_turn(admin, schema, 7)  # partition 0: drained, not current, has a file
    assert (await _sizes(admin, schema))[0] > 0
    async with await psycopg.AsyncConnection.connect(pg_url) as holder:
        # an open transaction that read alk_jobs: ACCESS SHARE on every partition
        await holder.execute(_sql(schema, "SELECT count(*) FROM {s}.alk_jobs"))
        step = await _step(store)
        assert 0 in step.skipped and 0 not in step.truncated
        assert step.slot == 7  # not turned onto a partition it could not truncate
        # the request was withdrawn: no lock on the partition is waiting now
        waiting = await _value(
            admin,
            schema,
            "SELECT count(*) FROM pg_locks WHERE NOT granted"
            " AND relation = '{s}.alk_jobs_p0'::regclass",
        )
        assert waiting == 0
        # claims and enqueues go on while the holder holds (and the partition waits)
        await q.enqueue("during")
        (h,) = await q.claim_batch("w", 1)
        assert await h.ack()
        # the next step does not ask again at once: it pauses that partition
        step = await _step(store)
        assert 0 in step.skipped and 0 not in step.truncated
        await holder.rollback()
    _engine(store)._ring_pause.clear()  # the pause would end in a second
    step = await _step(store)
    assert 0 in step.truncated and step.slot == 0


async def test_a_claim_waits_behind_a_truncation_no_longer_than_its_lock_timeout(
    pg_url: str, store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    # The step's lock request carries lock_timeout (a claim queued behind it waits
    # at most that long): shown by the setting the step's session uses, read back
    # from a transaction that runs ring_lock_timeout as the step does.
    engine = _engine(store)
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        await conn.execute(engine.q["ring_lock_timeout"])
        cur = await conn.execute("SHOW lock_timeout")
        row = await cur.fetchone()
        assert row is not None and row[0] == "50ms"
        await conn.rollback()
        cur = await conn.execute("SHOW lock_timeout")
        row = await cur.fetchone()
        assert row is not None and row[0] == "0"  # local to the truncation's transaction


# -- a live migration from schema 11 -------------------------------------------------------
OLD_CLIENT = r"""
import json, sys, time
import psycopg
from psycopg import sql
url, schema, role, name, seconds = sys.argv[1:6]
s = sql.Identifier(schema)
CLAIM = sql.SQL(
    "UPDATE {s}.alk_jobs SET state = 'processing', attempts = attempts + 1, worker_id = %s,"
    " claim_expires_at = now() + interval '300 s'"
    " WHERE id = ANY(ARRAY(SELECT id FROM {s}.alk_jobs WHERE queue = 'live'"
    " AND state = 'pending' AND run_at <= now() ORDER BY priority DESC, run_at, id"
    " LIMIT 20 FOR UPDATE SKIP LOCKED)) RETURNING id"
).format(s=s)
ACK = sql.SQL(
    "DELETE FROM {s}.alk_jobs WHERE id = ANY(%s) AND state = 'processing' AND worker_id = %s"
    " RETURNING id"
).format(s=s)
ENQUEUE = sql.SQL(
    "INSERT INTO {s}.alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,"
    " visibility_timeout_s, retry_base_s)"
    " SELECT 'live', 'x', 0, now(), now(), 5, 300, 1 FROM generate_series(1, 10) RETURNING id"
).format(s=s)
out = []
end = time.monotonic() + float(seconds)
with psycopg.connect(url, autocommit=True) as conn:
    print("ready", flush=True)
    while time.monotonic() < end:
        try:
            if role == "producer":
                out += [r[0] for r in conn.execute(ENQUEUE).fetchall()]
                time.sleep(0.002)
            else:
                ids = [r[0] for r in conn.execute(CLAIM, [name]).fetchall()]
                if ids:
                    out += [r[0] for r in conn.execute(ACK, [ids, name]).fetchall()]
                else:
                    time.sleep(0.005)
        except psycopg.errors.LockNotAvailable:
            pass
print(json.dumps(out), flush=True)
"""


def _old_client(url: str, schema: str, role: str, name: str, seconds: float) -> Any:
    proc = subprocess.Popen(
        [sys.executable, "-c", OLD_CLIENT, url, schema, role, name, str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    return proc


def _finished(proc: Any) -> list[int]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return [int(i) for i in json.loads(out.strip().splitlines()[-1])]


async def test_a_live_store_migrates_from_schema_11_with_old_workers_running(
    pg_url: str, schema: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    migrations = list(pg_migrate.MIGRATIONS)
    assert migrations[-1].version == 13
    conn = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
    try:
        assert await pg_migrate.migrate_connection(conn, schema, migrations[:-2]) == 11
    finally:
        await conn.close()
    # a backlog of every kind before the migration: plain, keyed, processing
    await admin.execute(
        _sql(
            schema,
            "INSERT INTO {s}.alk_jobs (queue, payload, priority, run_at, created_at,"
            " max_attempts, visibility_timeout_s, retry_base_s, dedupe_key)"
            " SELECT 'live', 'x', 0, now(), now(), 5, 300, 1,"
            " CASE WHEN i % 10 = 0 THEN 'k' || i END FROM generate_series(1, 3000) AS i",
        )
    )
    before = [
        int(r[0])
        for r in await (await admin.execute(_sql(schema, "SELECT id FROM {s}.alk_jobs"))).fetchall()
    ]
    run_s = 6.0
    producers = [_old_client(pg_url, schema, "producer", f"p{i}", run_s) for i in range(2)]
    workers = [_old_client(pg_url, schema, "worker", f"w{i}", run_s + 4) for i in range(2)]
    await asyncio.sleep(1.0)  # the old processes at work
    conn = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
    try:
        assert await pg_migrate.migrate_connection(conn, schema, migrations) == 13
    finally:
        await conn.close()
    # the new version alongside the old ones: enqueues (to the ring) and claims
    new_ids: list[int] = []
    new_acked: list[int] = []
    async with await alkstore.connect(pg_url, schema=schema, migrate="off") as store:
        q = store.queue("live")
        for _ in range(10):
            new_ids += await q.enqueue_many([b"y"] * 50)
            for h in await q.claim_batch("new", 30):
                if await h.ack():
                    new_acked.append(h.job.id)
            await asyncio.sleep(0.1)
        enqueued = before + new_ids + [i for p in producers for i in _finished(p)]
        old_acked = [i for w in workers for i in _finished(w)]
        while handles := await q.claim_batch("new", 200):  # what the old workers left
            for h in handles:
                assert await h.ack()
                new_acked.append(h.job.id)
    acked = old_acked + new_acked
    assert len(acked) == len(set(acked)), "a job ran twice"
    assert sorted(acked) == sorted(enqueued), "a job was lost (or made up)"
    assert await _value(admin, schema, "SELECT count(*) FROM {s}.alk_jobs") == 0
    kind = await _value(
        admin, schema, "SELECT relkind::text FROM pg_class WHERE oid = '{s}.alk_jobs'::regclass"
    )
    assert kind == "p"


async def test_a_cancel_that_meets_a_row_the_ring_moved_meanwhile_runs_again(
    pg_url: str, store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    # A move forward (ring_move) holds the row while the cancel waits for it; once
    # the move commits, the cancel's DELETE fails with SQLSTATE 40001 (the row went
    # to another partition) and the engine runs it again, where the row now is.
    q = store.queue("moved")
    job = await q.enqueue("x")
    assert await _part(admin, schema, job) == 0
    async with await psycopg.AsyncConnection.connect(pg_url) as mover:
        await mover.execute(_sql(schema, "UPDATE {s}.alk_jobs SET part = 5 WHERE id = %s"), [job])
        cancel = asyncio.create_task(q.cancel(job))
        waiting = 0
        for _ in range(500):  # until the cancel waits on the mover's row lock
            waiting = await _value(admin, schema, "SELECT count(*) FROM pg_locks WHERE NOT granted")
            if waiting:
                break
            await asyncio.sleep(0.01)
        assert waiting, "the cancel never waited for the moved row"
        await mover.commit()
    assert await cancel
    assert await q.get_job(job) is None


async def test_a_claim_passes_over_a_row_being_moved_and_takes_it_where_it_went(
    pg_url: str, store: alkstore.Store, admin: psycopg.AsyncConnection[Any], schema: str
) -> None:
    q = store.queue("moving")
    job = await q.enqueue("x")
    async with await psycopg.AsyncConnection.connect(pg_url) as mover:
        await mover.execute(_sql(schema, "UPDATE {s}.alk_jobs SET part = 5 WHERE id = %s"), [job])
        assert await q.claim_batch("w", 5) == []  # SKIP LOCKED: not waited for, no error
        await mover.commit()
    (handle,) = await q.claim_batch("w", 5)
    assert handle.job.id == job and handle.job.attempts == 1
    assert await _part(admin, schema, job) == 5
    assert await handle.ack()
