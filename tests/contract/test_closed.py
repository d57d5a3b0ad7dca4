"""A closed store fails closed: every operation of it and of its handles raises StoreClosedError."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import alkstore
from alkstore import QueueOpts, StoreClosedError
from alkstore.admin import Admin
from alkstore.bookkeeping import Bookkeeping

from .rawsql import count_rows


async def _closed_store_with_handles(open_store, qname: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    store = await open_store()
    q = store.queue(qname, QueueOpts(max_attempts=3))
    await q.enqueue_many([b"1", b"2", b"3", b"4", b"5"])
    handles = await q.claim_batch("w", 4)
    pending_tx = store.transaction()  # made, not entered
    sub = store.listen("ch")  # made, not entered
    await store.close()
    return {"store": store, "q": q, "handles": handles, "tx": pending_tx, "sub": sub}


OPS: dict[str, Callable[[dict[str, Any]], Awaitable[object] | object]] = {
    "store.queue": lambda c: c["store"].queue("other"),
    "store.transaction": lambda c: c["store"].transaction(),
    "store.notify": lambda c: c["store"].notify("ch", "x"),
    "store.listen": lambda c: c["store"].listen("ch"),
    "queue.enqueue": lambda c: c["q"].enqueue(b"x"),
    "queue.enqueue_many": lambda c: c["q"].enqueue_many([b"x"]),
    "queue.enqueue_many_empty": lambda c: c["q"].enqueue_many([]),
    "queue.claim_one": lambda c: c["q"].claim_one("w"),
    "queue.claim_batch": lambda c: c["q"].claim_batch("w", 5),
    "queue.claim_batch_zero": lambda c: c["q"].claim_batch("w", 0),
    "queue.ack_batch": lambda c: c["q"].ack_batch([c["handles"][0].job.id]),
    "queue.ack_batch_empty": lambda c: c["q"].ack_batch([]),
    "queue.cancel": lambda c: c["q"].cancel(c["handles"][0].job.id),
    "queue.get_job": lambda c: c["q"].get_job(c["handles"][0].job.id),
    "queue.sweep_expired": lambda c: c["q"].sweep_expired(),
    "queue.jobs": lambda c: c["q"].jobs("w").__anext__(),
    "handle.ack": lambda c: c["handles"][0].ack(),
    "handle.retry": lambda c: c["handles"][1].retry("e", delay_s=0),
    "handle.fail": lambda c: c["handles"][2].fail("e"),
    "handle.heartbeat": lambda c: c["handles"][3].heartbeat(),
    "transaction.enter": lambda c: c["tx"].__aenter__(),
    "subscription.enter": lambda c: c["sub"].__aenter__(),
}


@pytest.mark.parametrize("op", list(OPS))
async def test_every_operation_of_a_closed_store_raises(
    open_store,
    target,
    qname: str,
    op: str,  # type: ignore[no-untyped-def]
) -> None:
    closed = await _closed_store_with_handles(open_store, qname)
    witness = await open_store()
    before = await count_rows(witness, target)
    snapshot = [await witness.queue(qname).get_job(h.job.id) for h in closed["handles"]]
    with pytest.raises(StoreClosedError):
        result = OPS[op](closed)
        if isinstance(result, Awaitable):
            await result
    assert await count_rows(witness, target) == before  # nothing was written
    assert [await witness.queue(qname).get_job(h.job.id) for h in closed["handles"]] == snapshot


async def test_handles_are_not_consumed_by_a_refusal_of_the_closed_store(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    closed = await _closed_store_with_handles(open_store, qname)
    handle = closed["handles"][0]
    with pytest.raises(StoreClosedError):
        await handle.ack()
    with pytest.raises(StoreClosedError):  # still closed, not "consumed"
        await handle.ack()


# Every admin operation, called on an Admin made while its store was open.
ADMIN_OPS: dict[str, Callable[[Admin, str], Awaitable[object]]] = {
    "list_jobs": lambda a, q: a.list_jobs(q),
    "list_dead": lambda a, q: a.list_dead(),
    "outcomes": lambda a, q: a.outcomes(q),
    "outcome": lambda a, q: a.outcome(1),
    "schedule_marks": lambda a, q: a.schedule_marks(["s"]),
    "find_job": lambda a, q: a.find_job(1),
    "requeue": lambda a, q: a.requeue(1),
    "requeue_many": lambda a, q: a.requeue_many([1]),
    "stats": lambda a, q: a.stats(),
    "cancel": lambda a, q: a.cancel(1),
    "workers": lambda a, q: a.workers(),
    "workers_page": lambda a, q: a.workers_page(),
    "outcome_history": lambda a, q: a.outcome_history(),
    "queues": lambda a, q: a.queues(),
    "queues_page": lambda a, q: a.queues_page(),
    "queue_info": lambda a, q: a.queue_info(q),
    "health": lambda a, q: a.health(),
    "find": lambda a, q: a.find(f"queue:{q}"),
    "bulk": lambda a, q: a.bulk().preview("retry", f"queue:{q}"),
}


def test_the_admin_list_covers_every_admin_operation() -> None:
    public = {n for n, m in vars(Admin).items() if not n.startswith("_") and callable(m)}
    assert public == set(ADMIN_OPS)


@pytest.mark.parametrize("op", list(ADMIN_OPS))
async def test_every_admin_operation_of_a_closed_store_raises(
    open_store,
    target,
    qname: str,
    op: str,  # type: ignore[no-untyped-def]
) -> None:
    store = await open_store()
    admin = store.admin()
    await store.queue(qname).enqueue(b"")
    await store.close()
    witness = await open_store()
    before = await count_rows(witness, target)
    with pytest.raises(StoreClosedError):
        await ADMIN_OPS[op](admin, qname)
    assert await count_rows(witness, target) == before  # nothing was written


# Every bookkeeping write (the worker's and the schedules'), on a store closed since.
BOOKKEEPING_OPS: dict[str, Callable[[Bookkeeping, str], Awaitable[object]]] = {
    "schedule_marks": lambda b, q: b.schedule_marks(["s"]),
    "mark_schedule": lambda b, q: b.mark_schedule("s", 1.0, None),
    "report_worker": lambda b, q: b.report_worker("w", "h", 1, [q], 1, 0),
    "remove_worker": lambda b, q: b.remove_worker("w"),
    "purge_workers": lambda b, q: b.purge_workers(1.0),
    "record_outcomes": lambda b, q: b.record_outcomes([(q, "success", 1)]),
}


def test_the_bookkeeping_list_covers_every_bookkeeping_operation() -> None:
    public = {n for n, m in vars(Bookkeeping).items() if not n.startswith("_") and callable(m)}
    assert public == set(BOOKKEEPING_OPS)


@pytest.mark.parametrize("op", list(BOOKKEEPING_OPS))
async def test_every_bookkeeping_operation_of_a_closed_store_raises(
    open_store,
    target,
    qname: str,
    op: str,  # type: ignore[no-untyped-def]
) -> None:
    store = await open_store()
    books = Bookkeeping(store)
    await store.queue(qname).enqueue(b"")
    await store.close()
    witness = await open_store()
    before = await count_rows(witness, target)
    with pytest.raises(StoreClosedError):
        await BOOKKEEPING_OPS[op](books, qname)
    assert await count_rows(witness, target) == before  # nothing was written


async def test_close_is_idempotent(open_store) -> None:  # type: ignore[no-untyped-def]
    store = await open_store()
    assert not store.closed
    await store.close()
    await store.close()
    assert store.closed


async def test_async_with_closes_the_store(target, qname: str) -> None:  # type: ignore[no-untyped-def]
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        q = store.queue(qname)
        await q.enqueue(b"")
    assert store.closed
    with pytest.raises(StoreClosedError):
        await q.claim_one("w")


async def test_closing_inside_an_open_transaction_fails_the_rest_of_it(
    open_store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    store, witness = await open_store(), await open_store()
    before = await count_rows(witness, target)
    with pytest.raises(StoreClosedError):
        async with store.transaction() as tx:
            txq = tx.queue(qname)
            await txq.enqueue(b"never committed")
            await store.close()
            await txq.enqueue(b"after close")
    for call in (
        lambda: tx.execute("SELECT 1"),
        lambda: tx.notify("ch"),
        lambda: txq.enqueue(b""),
        lambda: txq.enqueue_many([b""]),
    ):
        with pytest.raises(StoreClosedError):
            await call()
    with pytest.raises(StoreClosedError):
        tx.queue(qname)
    assert await count_rows(witness, target) == before


async def test_closing_one_store_leaves_its_siblings_open(open_store, qname: str) -> None:  # type: ignore[no-untyped-def]
    a, b = await open_store(), await open_store()
    job_id = await a.queue(qname).enqueue(b"")
    await a.close()
    assert (await b.queue(qname).get_job(job_id)) is not None
