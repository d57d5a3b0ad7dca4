"""store.transaction(): enqueue visible and woken on commit only, nothing after rollback."""

from __future__ import annotations

import asyncio

import pytest

import alkstore
from alkstore import EnqueueOpts, QueueOpts

from .rawsql import count_rows

QUIET = 0.4  # how long to watch for a notification that must not come
WAIT = 20.0


class Boom(Exception):
    pass


async def next_note(sub: alkstore.Subscription, timeout: float = WAIT) -> alkstore.Notification:
    return await asyncio.wait_for(sub.__anext__(), timeout)


async def no_note(sub: alkstore.Subscription) -> bool:
    try:
        await asyncio.wait_for(sub.__anext__(), QUIET)
    except TimeoutError:
        return True
    return False


async def test_transactional_enqueue_is_visible_only_after_commit(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    store, other = await open_store(), await open_store()
    async with other.listen(qname) as sub:
        async with store.transaction() as tx:
            txq = tx.queue(qname, QueueOpts(priority=3))
            job_id = await txq.enqueue(b"in tx", EnqueueOpts(max_attempts=2))
            ids = await txq.enqueue_many([b"m1", b"m2"])
            assert await other.queue(qname).get_job(job_id) is None  # not yet committed
            assert await no_note(sub)  # no wake before commit
        note = await next_note(sub)
        assert note == alkstore.Notification(qname, "")
    job = await other.queue(qname).get_job(job_id)
    assert job is not None
    assert (job.payload, job.priority, job.max_attempts, job.state) == (b"in tx", 3, 2, "pending")
    assert [(await other.queue(qname).get_job(i)).payload for i in ids] == [b"m1", b"m2"]  # type: ignore[union-attr]
    handle = await other.queue(qname).claim_one("w")
    assert handle is not None and handle.job.id == job_id


async def test_rollback_leaves_nothing_and_sends_no_wake(
    open_store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    store, other = await open_store(), await open_store()
    before = await count_rows(store, target)
    async with other.listen(qname, "side") as sub:
        with pytest.raises(Boom):
            async with store.transaction() as tx:
                job_id = await tx.queue(qname).enqueue(b"doomed")
                await tx.queue(qname).enqueue_many([b"a", b"b"])
                await tx.notify("side", "never")
                raise Boom
        assert await no_note(sub)
    assert await store.queue(qname).get_job(job_id) is None
    assert await other.queue(qname).claim_one("w") is None
    assert await count_rows(store, target) == before


async def test_notify_inside_a_transaction_is_delivered_on_commit(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    store, other = await open_store(), await open_store()
    async with other.listen("events") as sub:
        async with store.transaction() as tx:
            await tx.notify("events", "one")
            await tx.notify("events", "two")
            assert await no_note(sub)
        assert (await next_note(sub)).payload == "one"
        assert (await next_note(sub)).payload == "two"


async def test_ids_of_a_committed_transaction_are_the_rows(
    store: alkstore.Store, qname: str
) -> None:
    async with store.transaction() as tx:
        ids = [await tx.queue(qname).enqueue(str(i)) for i in range(3)]
    assert ids == sorted(ids)
    assert [(await store.queue(qname).get_job(i)).payload for i in ids] == [b"0", b"1", b"2"]  # type: ignore[union-attr]


async def test_execute_runs_the_callers_sql_in_the_transaction(
    store: alkstore.Store,
) -> None:
    async with store.transaction() as tx:
        rows = await tx.execute("SELECT 1 + 1")
    assert [tuple(r) for r in rows] == [(2,)]


async def test_a_sql_error_rolls_back_and_is_an_engine_error(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    before = await count_rows(store, target)
    with pytest.raises(alkstore.EngineError) as e:
        async with store.transaction() as tx:
            await tx.queue(qname).enqueue(b"x")
            await tx.execute("SELECT * FROM no_such_table_here")
    assert e.value.__cause__ is not None
    assert await count_rows(store, target) == before
    # the store is still usable
    assert await store.queue(qname).enqueue(b"after") > 0


async def test_transactions_on_two_stores_do_not_mix(open_store, qname: str) -> None:  # type: ignore[no-untyped-def]
    s1, s2 = await open_store(), await open_store()
    async with s1.transaction() as tx:
        kept = await tx.queue(qname).enqueue(b"kept")
    with pytest.raises(Boom):
        async with s2.transaction() as tx:
            lost = await tx.queue(qname).enqueue(b"lost")
            raise Boom
    q = s1.queue(qname)
    assert (await q.get_job(kept)) is not None and await q.get_job(lost) is None


async def test_a_transaction_handle_is_dead_after_the_block(
    store: alkstore.Store, qname: str
) -> None:
    async with store.transaction() as tx:
        txq = tx.queue(qname)
    with pytest.raises(alkstore.AlkstoreError):
        await txq.enqueue(b"too late")
    with pytest.raises(alkstore.AlkstoreError):
        await tx.execute("SELECT 1")
    assert await store.queue(qname).claim_one("w") is None


async def test_an_enqueue_through_the_store_inside_its_transaction_joins_it(
    store: alkstore.Store, target: object, qname: str
) -> None:
    # the same atomicity on every engine: queue.enqueue and task.defer inside
    # `async with store.transaction()` commit and roll back with it
    q = store.queue(qname)
    with pytest.raises(Boom):
        async with store.transaction():
            await q.enqueue({"n": 1})
            await q.enqueue_many([{"n": 2}, {"n": 3}])
            raise Boom
    assert await count_rows(store, target) == (0, 0)  # type: ignore[arg-type]
    async with store.transaction():
        job_id = await q.enqueue({"n": 4})
    job = await q.get_job(job_id)
    assert job is not None and job.json() == {"n": 4}


async def test_a_task_deferred_inside_the_apps_transaction_rolls_back_with_it(
    target: object,
) -> None:
    app = alkstore.App(target.url, **target.connect_kwargs())  # type: ignore[attr-defined]

    @app.task(queue="joined")
    async def noop() -> None: ...

    try:
        store = await app.connect()
        with pytest.raises(Boom):
            async with store.transaction():
                await noop.defer()
                raise Boom
        assert await count_rows(store, target) == (0, 0)  # type: ignore[arg-type]
    finally:
        await app.close()


def test_a_sync_enqueue_inside_the_sync_transaction_joins_it(target: object, qname: str) -> None:
    from alkstore import sync

    with sync.connect(target.url, **target.connect_kwargs()) as store:  # type: ignore[attr-defined]
        q = store.queue(qname)
        with pytest.raises(Boom), store.transaction():
            q.enqueue(b"x")
            raise Boom
        assert q.claim_one("w") is None
        with store.transaction():
            q.enqueue(b"y")
        handle = q.claim_one("w")
        assert handle is not None and handle.job.payload == b"y"
