"""What only the PostgreSQL engine has: SKIP LOCKED under real concurrency, the
claim plan, migrations racing, schemas, LISTEN reconnects, pooled connection
loss, poll-only mode, and the transactional outbox on the caller's connection.

Every test works in a schema of its own, dropped at teardown (the session's
database itself is dropped by ``tests/conftest.py``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import (
    EngineError,
    Enqueued,
    EnqueueOpts,
    InvalidArgumentError,
    InvalidNameError,
)
from alkstore.engines.postgres import SCHEMA_VERSION, PostgresEngine, migrate
from alkstore.engines.postgres.listener import Listener
from alkstore.engines.postgres.settings import CONNECTION_DEFAULTS

WORKERS = Path(__file__).with_name("pg_workers.py")


# -- fixtures -----------------------------------------------------------------------------
@pytest.fixture
def schemas(pg_url: str) -> Iterator[list[str]]:
    """Fresh schema names; every one of them is dropped at teardown."""
    made: list[str] = []
    yield made
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for name in made:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def schema(schemas: list[str]) -> str:
    name = f"alk_{uuid.uuid4().hex[:12]}"
    schemas.append(name)
    return name


@pytest.fixture
async def admin(pg_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A plain autocommit connection for looking behind the store's back."""
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
async def stores(pg_url: str, schema: str) -> AsyncIterator[list[alkstore.Store]]:
    """Stores opened by a test on its schema (append to the list); all closed at teardown."""
    opened: list[alkstore.Store] = []
    yield opened
    for store in opened:
        await store.close()


async def _open(
    stores: list[alkstore.Store], url: str, schema: str, **options: Any
) -> alkstore.Store:
    store = await alkstore.connect(url, schema=schema, **options)
    stores.append(store)
    return store


def _engine(store: alkstore.Store) -> PostgresEngine:
    engine = store._engine
    assert isinstance(engine, PostgresEngine)
    return engine


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKERS), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _start_together(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()


def _finish(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=100)
    assert proc.returncode == 0, out
    return out


# -- exactly once under concurrency: tests/contract/test_concurrency.py -----------------
async def test_the_claim_walks_the_partial_claim_index(
    pg_url: str, schema: str, stores: list[alkstore.Store], admin: psycopg.AsyncConnection[Any]
) -> None:
    store = await _open(stores, pg_url, schema)
    q = store.queue("plan")
    for _ in range(20):
        await q.enqueue_many([b"x"] * 1000)
    engine = _engine(store)
    claimed = await q.claim_batch("w", 100)

    async def plan(name: str, params: dict[str, Any]) -> str:
        async with admin.transaction(force_rollback=True):
            cur = await admin.execute(b"EXPLAIN (ANALYZE, COSTS OFF) " + engine.q[name], params)
            return "\n".join(row[0] for row in await cur.fetchall())

    # First with the statistics of a table never analyzed (a fresh, busy queue),
    # then as autovacuum leaves them: the claim walks its index in order either
    # way (no sort of the backlog), and ack_batch goes by primary key.
    for _ in ("stale", "analyzed"):
        claim = await plan(
            "claim",
            {"queue": "plan", "worker": "w", "n": 100, "exhausted_error": "x", "gated": True},
        )
        assert "Index Scan using alk_jobs_claim" in claim, claim
        assert "Seq Scan" not in claim and "external" not in claim, claim
        ack = await plan("ack_batch", {"queue": "plan", "ids": [h.job.id for h in claimed]})
        assert "alk_jobs_pkey" in ack and "alk_jobs_processing" not in ack, ack
        await admin.execute(sql.SQL("ANALYZE {}.alk_jobs").format(sql.Identifier(schema)))


# -- migrations and schemas (upgrades: tests/contract/test_migrations.py) ---------------
async def test_migrate_alone_is_idempotent_and_reports_the_version(
    pg_url: str, schema: str
) -> None:
    assert await migrate(pg_url, schema=schema) == SCHEMA_VERSION
    assert await migrate(pg_url, schema=schema) == SCHEMA_VERSION


async def test_two_schemas_in_one_database_never_see_each_other(
    pg_url: str, schemas: list[str], stores: list[alkstore.Store]
) -> None:
    schemas += ["iso_a_" + uuid.uuid4().hex[:8], "iso_b_" + uuid.uuid4().hex[:8]]
    a = await _open(stores, pg_url, schemas[-2])
    b = await _open(stores, pg_url, schemas[-1])
    job = await a.queue("same").enqueue(b"only in a")
    assert await b.queue("same").get_job(job) is None
    assert await b.queue("same").claim_one("w") is None
    assert await b.queue("same").ack_batch([job]) == 0
    assert await b.queue("same").cancel(job) is False
    handle = await a.queue("same").claim_one("w")
    assert handle is not None and handle.job.payload == b"only in a"
    assert await b.admin().stats() == []


@pytest.mark.parametrize(
    "bad", ['q"; DROP TABLE alk_jobs; --', "with space", 'quo"te', "_reserved", "", "x" * 64]
)
async def test_names_with_quotes_spaces_or_sql_are_rejected_before_any_sql(
    pg_url: str, schema: str, stores: list[alkstore.Store], bad: str
) -> None:
    store = await _open(stores, pg_url, schema)
    await _engine(store).close()  # any SQL now would raise StoreClosedError, not InvalidNameError
    with pytest.raises(InvalidNameError):
        store.queue(bad)
    with pytest.raises(InvalidNameError):
        await store.notify(bad, "")
    with pytest.raises(InvalidNameError):
        store.listen(bad)
    with pytest.raises(InvalidNameError):
        await store.wake(bad)


@pytest.mark.parametrize("bad", ['x"; DROP SCHEMA public; --', "with space", 'Quo"te', ""])
async def test_schema_names_with_quotes_spaces_or_sql_are_rejected_before_connecting(
    bad: str,
) -> None:
    # An unreachable URL: reaching the network at all would raise EngineError instead.
    with pytest.raises(InvalidNameError):
        await alkstore.connect("postgresql://nobody@127.0.0.1:1/none", schema=bad)


async def test_names_that_need_quoting_round_trip_through_listen_and_notify(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    store = await _open(stores, pg_url, schema)
    channel = "Mixed.Case:with-dash"
    async with store.listen(channel) as sub:
        await store.notify(channel, 'it\'s "quoted"')
        note = await asyncio.wait_for(sub.__anext__(), 30)
    assert note == alkstore.Notification(channel, 'it\'s "quoted"')


# -- LISTEN across reconnects -------------------------------------------------------------
async def test_listen_survives_termination_of_its_connection(
    pg_url: str, schema: str, stores: list[alkstore.Store], admin: psycopg.AsyncConnection[Any]
) -> None:
    consumer = await _open(stores, pg_url, schema)
    producer = await _open(stores, pg_url, schema)
    q = consumer.queue("wakes")
    got: asyncio.Queue[bytes] = asyncio.Queue()

    async def consume() -> None:
        # A re-poll interval far beyond the test timeout: only wakes and gaps move it.
        async for handle in q.jobs("consumer", poll_interval_s=3600):
            await got.put(handle.job.payload)
            await handle.ack()

    # The consumer calls next_wake_in right before it goes to sleep: a spy tells us it is idle.
    engine = _engine(consumer)
    idle = asyncio.Event()
    next_wake_in = engine.next_wake_in

    async def spy(queue: str, within_s: float) -> float | None:
        due = await next_wake_in(queue, within_s)
        idle.set()
        return due

    engine.next_wake_in = spy  # type: ignore[method-assign]
    task = asyncio.create_task(consume())
    try:
        await producer.queue("wakes").enqueue(b"before")
        assert await asyncio.wait_for(got.get(), 30) == b"before"
        idle.clear()
        await asyncio.wait_for(idle.wait(), 30)
        listener = _engine(consumer)._listener
        assert listener is not None and listener.backend_pid is not None
        old_pid = listener.backend_pid

        # A job committed with no wake at all, then the listener's connection dies:
        # only the gap after the reconnect can make the consumer look again.
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            await producer.queue("wakes").enqueue_on(conn, b"silent")
        await admin.execute("SELECT pg_terminate_backend(%s)", [old_pid])
        assert await asyncio.wait_for(got.get(), 30) == b"silent"
        assert listener.reconnects >= 1 and listener.backend_pid != old_pid

        await producer.queue("wakes").enqueue(b"after")  # a wake after the reconnect arrives
        assert await asyncio.wait_for(got.get(), 30) == b"after"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _listener_on(pg_url: str, notes: list[tuple[str, str]]) -> tuple[Listener, list[Any]]:
    """A bare Listener whose connections the test can reach (the list fills as it connects)."""
    conns: list[Any] = []

    async def connect() -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
        conns.append(conn)
        return conn

    return Listener(connect, lambda batch: notes.extend(batch)), conns


async def test_a_note_read_while_the_listener_runs_a_statement_reaches_the_sink_once(
    pg_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    # Between its statements the listener reads in a reader callback; during one, the
    # statement's own read takes the notes in, and they come through psycopg's handler.
    notes: list[tuple[str, str]] = []
    listener, conns = await _listener_on(pg_url, notes)
    try:
        await listener.listen(["alk_a"])
        conn = conns[0]
        execute = conn.execute

        async def notify_first(query: Any, *args: Any, **kwargs: Any) -> Any:
            await admin.execute("NOTIFY alk_a, 'during'")
            await asyncio.sleep(0.05)  # on the listener's socket, no reader registered
            return await execute(query, *args, **kwargs)

        conn.execute = notify_first
        await listener.listen(["alk_b"])
        conn.execute = execute
        await admin.execute("NOTIFY alk_b, 'after'")
        for _ in range(300):
            if len(notes) >= 2:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # a duplicate would have arrived by now
        assert notes == [("alk_a", "during"), ("alk_b", "after")]
    finally:
        await listener.stop()


async def test_listener_stop_does_not_wait_out_a_statement_stuck_on_a_dead_connection(
    pg_url: str,
) -> None:
    # A statement in flight on a cut connection, cancelled: psycopg sends a cancel
    # request and waits for the statement (up to ~10 s). The store's close, and so a
    # cut-off worker's exit, must not wait for that: the task ends in the background.
    listener, conns = await _listener_on(pg_url, [])
    await listener.listen(["alk_a"])
    stuck = asyncio.Event()

    async def hang(query: Any, *args: Any, **kwargs: Any) -> Any:
        stuck.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(1.5)  # the cancel request and the wait for the statement
            raise

    conns[0].execute = hang
    unlisten = asyncio.create_task(listener.unlisten(["alk_a"]))
    await asyncio.wait_for(stuck.wait(), 10)
    began = time.monotonic()
    await listener.stop()
    assert time.monotonic() - began < 1.2
    await unlisten  # released by the stop
    for _ in range(300):  # the task ends by itself and closes its connection
        if conns[0].closed:
            break
        await asyncio.sleep(0.01)
    assert conns[0].closed


async def test_poll_only_mode_still_delivers_jobs_by_re_polling(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    consumer = await _open(stores, pg_url, schema, listen="off", prepare="off")
    producer = await _open(stores, pg_url, schema)
    assert _engine(consumer).settings.listen is False
    assert consumer.listens is False and producer.listens is True  # a capability, asked
    with pytest.raises(InvalidArgumentError, match="poll-only"):
        consumer.listen("anything")
    q = consumer.queue("polled")
    got = []

    async def consume() -> None:
        async for handle in q.jobs("consumer", poll_interval_s=0.05):
            got.append(handle.job.payload)
            assert await handle.ack()
            if len(got) == 3:
                return

    task = asyncio.create_task(consume())
    for payload in (b"1", b"2", b"3"):
        await producer.queue("polled").enqueue(payload)
    await asyncio.wait_for(task, 60)
    assert got == [b"1", b"2", b"3"]
    assert _engine(consumer)._listener is None  # nothing ever LISTENed


# -- connection loss ----------------------------------------------------------------------
@pytest.mark.parametrize("pool_size", [1, 3])
async def test_after_one_backend_kill_only_the_operation_on_it_fails_and_the_next_works(
    pg_url: str,
    schema: str,
    stores: list[alkstore.Store],
    admin: psycopg.AsyncConnection[Any],
    pool_size: int,
) -> None:
    app = f"alk_kill_{uuid.uuid4().hex[:8]}"
    store = await _open(
        stores, f"{pg_url}?application_name={app}", schema, pool_min=pool_size, pool_max=pool_size
    )
    pool = _engine(store)._pool
    assert pool is not None
    await pool.wait()  # every pooled connection open and idle
    q = store.queue("loss")
    job = await q.enqueue(b"x")
    for round_ in range(3):  # and again: the replacements are as good as the first ones
        cur = await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            [app],
        )
        assert len(await cur.fetchall()) >= pool_size, round_  # and the wake connection
        with pytest.raises(EngineError) as caught:
            await q.get_job(job)
        assert isinstance(caught.value.__cause__, psycopg.OperationalError)
        found = await q.get_job(job)  # the very next operation, no retry loop
        assert found is not None and found.payload == b"x"
        await pool.wait()


# -- transactions -----------------------------------------------------------------------
async def test_a_callers_own_transaction_rolled_back_leaves_no_job(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    store = await _open(stores, pg_url, schema)
    q = store.queue("outbox")
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                job = await q.enqueue_on(conn, {"order": 1})
                many = await q.enqueue_many_on(conn, [b"a", b"b"])
                assert many == [job + 1, job + 2]
                raise RuntimeError("the caller's own failure")
    assert await q.get_job(job) is None
    assert await q.claim_one("w") is None


async def test_a_callers_own_transaction_committed_leaves_the_job_and_store_wake_wakes(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    store = await _open(stores, pg_url, schema)
    listener = await _open(stores, pg_url, schema)
    q = store.queue("outbox")
    async with listener.listen("outbox") as sub:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            async with conn.transaction():
                await conn.execute("CREATE TEMP TABLE orders (id int)")
                await conn.execute("INSERT INTO orders VALUES (42)")
                job = await q.enqueue_on(conn, {"order": 42})
                job_invisible = await q.get_job(job)  # another connection: not yet committed
            await store.wake("outbox")
        note = await asyncio.wait_for(sub.__anext__(), 30)
    assert job_invisible is None
    assert note == alkstore.Notification("outbox", "")
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.json() == {"order": 42}


async def test_enqueue_on_takes_a_blocking_connection_in_the_sync_facade(
    pg_url: str, schema: str
) -> None:
    from alkstore import sync

    def work() -> bytes:
        with sync.connect(pg_url, schema=schema) as store, psycopg.connect(pg_url) as conn:
            q = store.queue("sync-outbox")
            with pytest.raises(InvalidArgumentError):
                q.enqueue_on(object(), b"x")
            q.enqueue_on(conn, b"from sync")
            conn.commit()
            store.wake("sync-outbox")
            handle = q.claim_one("w")
            assert handle is not None
            return handle.job.payload

    assert await asyncio.to_thread(work) == b"from sync"


async def test_outbox_enqueue_dedupes_per_item_in_the_callers_transaction(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    store = await _open(stores, pg_url, schema)
    q = store.queue("outbox-keys")
    held = await q.enqueue_unique(b"held", EnqueueOpts(dedupe_key="b"))
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        async with conn.transaction():
            a = await q.enqueue_unique_on(conn, b"a", EnqueueOpts(dedupe_key="a"))
            again = await q.enqueue_unique_on(conn, b"a2", EnqueueOpts(dedupe_key="a"))
            many = await q.enqueue_many_on(conn, [b"x", b"y"], dedupe_keys=["b", "c"])
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await q.enqueue_on(conn, b"d", EnqueueOpts(dedupe_key="d", dedupe_window_s=60))
                raise RuntimeError("rolled back: the key and its window with it")
    assert not a.duplicate and again == Enqueued(a.id, True)
    assert many[0] == held.id and many[1] not in (a.id, held.id)
    assert not (await q.enqueue_unique(b"d", EnqueueOpts(dedupe_key="d"))).duplicate

    from alkstore import sync

    def blocking() -> tuple[Enqueued, Enqueued]:
        with sync.connect(pg_url, schema=schema) as sstore, psycopg.connect(pg_url) as bconn:
            sq = sstore.queue("outbox-keys")
            first = sq.enqueue_unique_on(bconn, b"s", EnqueueOpts(dedupe_key="s"))
            second = sq.enqueue_unique_on(bconn, b"s", EnqueueOpts(dedupe_key="s"))
            bconn.commit()
            return first, second

    first, second = await asyncio.to_thread(blocking)
    assert not first.duplicate and second == Enqueued(first.id, True)


async def test_store_transaction_wakes_only_after_commit(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    store = await _open(stores, pg_url, schema)
    listener = await _open(stores, pg_url, schema)
    async with listener.listen("tx-q") as sub:
        with pytest.raises(RuntimeError):
            async with store.transaction() as tx:
                await tx.queue("tx-q").enqueue(b"rolled back")
                raise RuntimeError
        async with store.transaction() as tx:
            job = await tx.queue("tx-q").enqueue(b"committed")
            rows = await tx.execute(
                sql.SQL("SELECT count(*) FROM {}.alk_jobs")
                .format(sql.Identifier(schema))
                .as_string(),
                None,
            )
            assert rows == [(1,)]  # our own insert, inside our transaction
        note = await asyncio.wait_for(sub.__anext__(), 30)
    assert note.channel == "tx-q"
    handle = await store.queue("tx-q").claim_one("w")
    assert handle is not None and handle.job.id == job


# -- wakes and options ------------------------------------------------------------------
async def test_wakes_of_a_burst_are_coalesced_and_the_trailing_one_arrives(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    # A window far longer than the burst takes: the first enqueue's wake goes out at
    # once (leading edge), the other 49 merge into one wake at the window's end
    # (trailing edge), which must arrive on its own, with no close to flush it.
    store = await _open(stores, pg_url, schema, wake_coalesce_ms=1000)
    listener = await _open(stores, pg_url, schema)
    q = store.queue("burst")
    waker = _engine(store)._waker
    assert waker is not None
    async with listener.listen("burst") as sub:
        await q.enqueue(0)
        assert (await asyncio.wait_for(sub.__anext__(), 30)).channel == "burst"  # leading
        for i in range(1, 50):
            await q.enqueue(i)
        assert (await asyncio.wait_for(sub.__anext__(), 30)).channel == "burst"  # trailing
        await waker.close()  # (its count is bumped after the statement returns)
        assert 2 <= waker.led + waker.sent < 50
    assert len(await listener.queue("burst").claim_batch("w", 500)) == 50


async def test_an_idle_wakers_wake_rides_on_the_insert_and_the_next_one_still_comes(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    # Idle waker: the enqueue's own insert carries the wake (delivered at its commit,
    # no statement after it). An enqueue within the window after it is not covered
    # by that note (it committed later): its wake comes as the trailing edge.
    store = await _open(stores, pg_url, schema, wake_coalesce_ms=1000)
    listener = await _open(stores, pg_url, schema)
    waker = _engine(store)._waker
    assert waker is not None
    async with listener.listen("led") as sub:
        await store.queue("led").enqueue(b"first")
        assert (await asyncio.wait_for(sub.__anext__(), 30)).channel == "led"
        assert (waker.led, waker.sent) == (1, 0)
        await store.queue("led").enqueue(b"second")  # (within the window: the trailing edge)
        assert (await asyncio.wait_for(sub.__anext__(), 30)).channel == "led"
        await waker.close()
        assert waker.led + waker.sent == 2
    assert len(await listener.queue("led").claim_batch("w", 10)) == 2


@pytest.mark.parametrize("mode", ["on", "off"])
async def test_wake_modes(
    pg_url: str, schema: str, stores: list[alkstore.Store], mode: str
) -> None:
    store = await _open(stores, pg_url, schema, wake=mode)
    listener = await _open(stores, pg_url, schema)
    async with listener.listen("modes") as sub:
        await store.queue("modes").enqueue(b"x")
        await store.notify("modes", "marker")  # always sent: orders what came before it
        notes = [await asyncio.wait_for(sub.__anext__(), 30)]
        if notes[0].payload == "":
            notes.append(await asyncio.wait_for(sub.__anext__(), 30))
    expected = ["", "marker"] if mode == "on" else ["marker"]
    assert [n.payload for n in notes] == expected


def test_unknown_options_are_rejected_by_name(pg_url: str) -> None:
    with pytest.raises(InvalidArgumentError, match="pool_maks"):
        PostgresEngine.from_url(pg_url, "s", {"pool_maks": 3})
    with pytest.raises(InvalidArgumentError, match="bogus"):
        PostgresEngine.from_url(pg_url + "?bogus=1", "s", {})
    with pytest.raises(InvalidArgumentError, match="wake"):
        PostgresEngine.from_url(pg_url, "s", {"wake": "sometimes"})
    with pytest.raises(InvalidArgumentError, match="pool_max"):
        PostgresEngine.from_url(pg_url + "?pool_min=5&pool_max=2", "s", {})


def test_pool_size_comes_from_the_url_and_alkstore_options_never_reach_libpq(
    pg_url: str,
) -> None:
    engine = PostgresEngine.from_url(
        pg_url + "?pool_min=2&pool_max=7&connect_timeout=5&wake=off", "s", {"pool_max": 9}
    )
    assert (engine.settings.pool_min, engine.settings.pool_max) == (2, 9)  # keywords win
    assert engine.settings.wake == "off"
    assert "?connect_timeout=5&keepalives=1&" in engine.settings.conninfo  # defaults after


def test_connection_defaults_bound_a_dead_network_and_the_url_overrides_them(
    pg_url: str,
) -> None:
    def params(url: str) -> dict[str, str]:
        conninfo = PostgresEngine.from_url(url, "s", {}).settings.conninfo
        return dict(parse_qsl(urlsplit(conninfo).query))

    assert params(pg_url) == CONNECTION_DEFAULTS
    mine = params(pg_url + "?tcp_user_timeout=0&keepalives=0&connect_timeout=30")
    assert mine == {
        **CONNECTION_DEFAULTS,
        "tcp_user_timeout": "0",
        "keepalives": "0",
        "connect_timeout": "30",
    }


async def test_libpq_parameters_with_spaces_reach_the_server_as_written(
    pg_url: str, schema: str
) -> None:
    """``options=-c x=y`` (percent-encoded in the URL) sets a server setting: the URL
    alkstore hands libpq keeps ``%20``, never a ``+`` that libpq would keep as is."""
    url = pg_url + "?options=-c%20synchronous_commit%3Doff&pool_max=2"
    async with await alkstore.connect(url, schema=schema) as store:
        async with store.transaction() as tx:
            rows = await tx.execute("SHOW synchronous_commit")
        assert [tuple(row) for row in rows] == [("off",)]


async def test_every_operation_after_close_raises_store_closed(pg_url: str, schema: str) -> None:
    store = await alkstore.connect(pg_url, schema=schema)
    engine = _engine(store)
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(alkstore.StoreClosedError):
        await engine.claim("q", "w", 1, "max attempts exceeded")
    with pytest.raises(alkstore.StoreClosedError):
        await engine.begin()


async def test_a_poll_only_worker_stops_a_cancelled_handler_at_its_next_poll_beat(
    pg_url: str, schema: str
) -> None:
    """listen=off hears no cancel announcement: the running job's heartbeat, every
    poll_interval_s there, is refused and stops the handler long before a third
    of its visibility timeout (100 s here)."""
    app = alkstore.App(f"{pg_url}?listen=off", schema=schema)
    started = asyncio.Event()
    stopped = asyncio.Event()

    @app.task(queue="poll", name="forever", visibility_timeout_s=300)
    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopped.set()
            raise

    async with app:
        job = await forever.defer()
        worker = app.worker(concurrency=1, poll_interval_s=0.2, handle_signals=False, grace_s=1)
        run = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(started.wait(), 30)
            async with await alkstore.connect(pg_url, schema=schema) as other:
                assert await other.queue("poll").cancel(job.id)
            await asyncio.wait_for(stopped.wait(), 30)  # not 100 s: the poll beat caught it
            for _ in range(3000):  # the outcome is counted once the handler has ended
                if worker.counts:
                    break
                await asyncio.sleep(0.01)
            # the refused beat is named by what the database did: the job's row is gone
            assert worker.counts == {"cancelled": 1}
        finally:
            worker.stop(force=True)
            await run


async def test_a_workflow_graph_in_the_callers_own_transaction_commits_or_rolls_back_with_it(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    from alkstore.workflows import Graph

    store = await _open(stores, pg_url, schema)
    g = Graph()
    g.add("outbox", "second", after=[g.add("outbox", "first")])
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                gone = await g.enqueue_on(store, conn)
                raise RuntimeError("the caller's own failure")
        assert [await store.queue("outbox").get_job(i) for i in gone] == [None, None]
        async with conn.transaction():
            ids = await g.enqueue_on(store, conn)
            assert await store.queue("outbox").get_job(ids[0]) is None  # not yet committed
    q = store.queue("outbox")
    job = await q.get_job(ids[1])
    assert job is not None and job.state == "blocked"
    first = await q.claim_one("w")
    assert first is not None and first.job.id == ids[0] and await first.ack()
    second = await q.claim_one("w")
    assert second is not None and second.job.id == ids[1]


async def test_the_claim_waits_for_the_flush(
    pg_url: str, schema: str, stores: list[alkstore.Store]
) -> None:
    # A claim lost in a server crash would give its attempt number (the fence) to a
    # second claimant while the first still runs the job: the claim keeps the
    # session's synchronous_commit (docs/postgres.md, "Durability").
    store = await _open(stores, pg_url, schema)
    await store.queue("quick").enqueue(b"x")
    engine = _engine(store)
    params = {"queue": "quick", "worker": "w", "n": 1, "exhausted_error": "e", "gated": True}
    async with (
        await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn,
        conn.transaction(),
    ):
        rows = await (await conn.execute(engine.q["claim"], params)).fetchall()
        assert len(rows) == 1
        inside = await (await conn.execute("SHOW synchronous_commit")).fetchone()
    assert inside == ("on",)


async def test_the_lean_claim_steps_aside_for_a_lapsed_claim(
    pg_url: str, schema: str, stores: list[alkstore.Store], admin: psycopg.AsyncConnection[Any]
) -> None:
    # claim_lean has no takeover arm: with a lapsed claim of the queue it claims
    # nothing and says so, and the engine's claim (the full statement) takes the
    # lapsed job over first, in claim order, before the pending one.
    store = await _open(stores, pg_url, schema)
    q = store.queue("lean")
    first = await q.enqueue(b"a")
    held = await q.claim_one("w1")
    assert held is not None and held.job.id == first
    second = await q.enqueue(b"b")
    await admin.execute(
        sql.SQL(
            "UPDATE {}.alk_jobs SET claim_expires_at = now() - interval '1 second' WHERE id = %s"
        ).format(sql.Identifier(schema)),
        (first,),
    )
    engine = _engine(store)
    params = {"queue": "lean", "worker": "w2", "n": 2, "exhausted_error": "e", "gated": True}
    rows = await (await admin.execute(engine.q["claim_lean"], params)).fetchall()
    assert [(row[0], row[3]) for row in rows] == [(None, "lapsed")]
    assert (await q.get_job(second)).state == "pending"  # type: ignore[union-attr]
    taken = await q.claim_batch("w2", 2)
    assert [(h.job.id, h.job.attempts) for h in taken] == [(first, 2), (second, 1)]


async def test_a_gated_queue_is_claimed_with_the_full_claim_until_it_claims_plainly(
    pg_url: str, schema: str, stores: list[alkstore.Store], admin: psycopg.AsyncConnection[Any]
) -> None:
    store = await _open(stores, pg_url, schema)
    q = store.queue("gate")
    engine = _engine(store)
    await q.enqueue(b"x")
    await q.pause()
    params = {"queue": "gate", "worker": "w", "n": 1, "exhausted_error": "e", "gated": True}
    rows = await (await admin.execute(engine.q["claim_lean"], params)).fetchall()
    assert [(row[0], row[3]) for row in rows] == [(None, "gated")]
    assert await q.claim_batch("w", 1) == []
    assert "gate" in engine._gated
    await q.resume()
    assert len(await q.claim_batch("w", 1)) == 1
    assert "gate" not in engine._gated
