"""Flow control on every engine: pause/resume, snooze, concurrency, partition and rate
limits (stored in the database, enforced in the claim), announced cancels."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

import alkstore
from alkstore import EnqueueOpts, QueueOpts, Rate

from .conftest import Clock
from .test_wake import until_idle

OpenStore = Callable[..., Awaitable[alkstore.Store]]


async def test_pause_stops_claims_but_accepts_enqueues(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.enqueue("before")
    await q.pause()
    job_id = await q.enqueue("during")  # enqueues still land
    assert await q.claim_one("w") is None
    info = await q.info()
    assert info.paused and info.pending == 2 and info.processing == 0
    await q.resume()
    claimed = await q.claim_batch("w", 10)
    assert sorted(h.job.id for h in claimed)[-1] == job_id and len(claimed) == 2
    assert not (await q.info()).paused


async def test_pause_is_stored_for_every_store_and_queue_apart(
    open_store: OpenStore, qname: str
) -> None:
    a, b = await open_store(), await open_store()
    await a.queue(qname).enqueue(1)
    await b.queue(qname + "x").enqueue(2)
    await a.queue(qname).pause()
    assert await b.queue(qname).claim_one("w") is None  # a sibling connection obeys it
    assert await b.queue(qname + "x").claim_one("w") is not None  # other queues do not
    c = await open_store()  # a store opened after the pause obeys it too
    assert await c.queue(qname).claim_one("w") is None
    listed = {i.queue: i for i in await c.admin().queues()}
    assert listed[qname].paused and not listed[qname + "x"].paused


async def test_resume_wakes_a_waiting_consumer(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.pause()
    await q.enqueue("x")
    got: asyncio.Queue[alkstore.JobHandle] = asyncio.Queue()

    async def consume() -> None:
        async for handle in q.jobs("w", poll_interval_s=3600):  # only a wake can end the wait
            await got.put(handle)

    task = asyncio.create_task(consume())
    try:
        await until_idle(store)  # it claimed, found the queue paused, and now waits
        assert got.empty()
        await q.resume()
        handle = await asyncio.wait_for(got.get(), 30)
        assert handle.job.text() == "x"
    finally:
        task.cancel()


async def test_snooze_returns_the_job_without_spending_an_attempt(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(retry_base_s=0))
    job_id = await q.enqueue("x")
    first = await q.claim_one("w")
    assert first is not None and first.job.attempts == 1
    assert await first.retry("once", delay_s=0)
    second = await q.claim_one("w")
    assert second is not None and second.job.attempts == 2
    assert await second.snooze(0)
    job = await q.get_job(job_id)
    assert job is not None and job.state == "pending" and job.attempts == 1
    assert job.last_error == "once" and job.worker_id is None
    third = await q.claim_one("w")
    assert third is not None and third.job.attempts == 2  # the snoozed run was not counted


async def test_snooze_delays_and_is_fenced(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue("x")
    handle = await q.claim_one("w")
    assert handle is not None
    assert await handle.snooze(3600)
    assert await q.claim_one("w") is None  # not due for an hour
    with pytest.raises(alkstore.HandleConsumedError):
        await handle.snooze(0)
    other = store.queue(qname + "o")
    await other.enqueue("y")
    gone = await other.claim_one("w")
    assert gone is not None
    with pytest.raises(alkstore.InvalidArgumentError, match="delay_s"):
        await gone.snooze(-1)
    assert not gone.consumed
    assert await other.cancel(gone.job.id)
    assert not await gone.snooze(0)  # the claim is no longer this handle's
    job = await q.get_job(job_id)
    assert job is not None and job.attempts == 0


async def test_concurrency_limit_holds_across_stores_and_frees_on_outcomes(
    open_store: OpenStore, qname: str
) -> None:
    a, b = await open_store(), await open_store()
    qa, qb = a.queue(qname), b.queue(qname)
    await qa.set_limits(concurrency=3)
    await qa.enqueue_many(range(10))
    held = await qa.claim_batch("a", 10)
    assert len(held) == 3
    assert await qb.claim_batch("b", 10) == []
    assert await held[0].ack()
    assert len(await qb.claim_batch("b", 10)) == 1
    assert await held[1].retry(delay_s=3600)
    assert await held[2].snooze(3600)
    assert len(await qb.claim_batch("b", 10)) == 2
    info = await qa.info()
    assert info.concurrency == 3 and info.processing == 3
    await qa.set_limits()  # no limits at all
    assert len(await qb.claim_batch("b", 10)) == 4  # the rest that is due


async def test_lapsed_claims_free_their_slot(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=30))
    await q.set_limits(concurrency=1)
    await q.enqueue_many([1, 2])
    first = await q.claim_one("w")
    assert first is not None
    assert await q.claim_one("w") is None
    clock.advance(31)  # the claim lapses
    again = await q.claim_batch("w", 10)
    assert len(again) == 1  # the lapsed slot is free again, and only one


async def test_partition_limit_counts_per_key(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.set_limits(partition_concurrency=2)
    for key in ("a", "a", "a", "b", "b", "b"):
        await q.enqueue(key, EnqueueOpts(partition_key=key))
    await q.enqueue_many(["none", "none"])  # no key: not limited by partition
    claimed = await q.claim_batch("w", 100)
    payloads = sorted(h.job.text() for h in claimed)
    assert payloads == ["a", "a", "b", "b", "none", "none"]
    assert await q.claim_batch("w", 100) == []
    a_handle = next(h for h in claimed if h.job.text() == "a")
    assert await a_handle.ack()
    assert [h.job.text() for h in await q.claim_batch("w", 100)] == ["a"]


async def test_a_requeued_dead_job_keeps_its_partition(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=30, max_attempts=1))
    await q.set_limits(partition_concurrency=1)
    failed_id = await q.enqueue("failed", EnqueueOpts(partition_key="a"))
    lapsed_id = await q.enqueue("lapsed", EnqueueOpts(partition_key="b"))
    first = await q.claim_batch("w", 10)
    assert {h.job.id for h in first} == {failed_id, lapsed_id}
    failed = next(h for h in first if h.job.id == failed_id)
    assert await failed.fail("boom")  # dead by dead_letter
    clock.advance(31)  # the other claim lapses with no attempts left: dead by the sweep
    assert await q.claim_batch("w", 10) == []
    admin = store.admin()
    assert await admin.requeue(failed_id) and await admin.requeue(lapsed_id)
    await q.enqueue("a again", EnqueueOpts(partition_key="a"))
    await q.enqueue("b again", EnqueueOpts(partition_key="b"))
    claimed = sorted(h.job.text() for h in await q.claim_batch("w", 10))
    # One per partition: the requeued jobs are back under their partitions' limit.
    assert claimed == ["failed", "lapsed"]


async def test_rate_limit_spends_a_burst_then_holds_until_the_next_slot(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    await q.set_limits(rate="1/h", burst=2)
    await q.enqueue_many(range(5))
    handles, hold = await q.claim_held("w", 5)
    assert len(handles) == 2 and hold is not None and hold > 0
    handles, hold = await q.claim_held("w", 5)
    assert handles == [] and hold is not None and hold > 0
    info = await q.info()
    assert info.rate == Rate(1, 3600.0) and info.burst == 2
    await q.set_limits(rate="1000/s")  # new limits start a fresh limiter
    assert len(await q.claim_batch("w", 5)) == 1  # default burst: one at a time


async def test_bad_limits_are_rejected_and_write_nothing(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.set_limits(concurrency=2)
    bad: list[dict[str, object]] = [
        {"concurrency": 0},
        {"concurrency": True},
        {"partition_concurrency": -1},
        {"rate": "fast"},
        {"rate": "0/s"},
        {"rate": "10/0s"},
        {"burst": 3},  # a burst needs a rate
        {"rate": "5/s", "burst": 0},
    ]
    for kwargs in bad:
        with pytest.raises(alkstore.InvalidArgumentError):
            await q.set_limits(**kwargs)  # type: ignore[arg-type]
    settings = await q.settings()
    assert settings.concurrency == 2 and settings.rate is None
    with pytest.raises(alkstore.InvalidArgumentError, match="partition_key"):
        EnqueueOpts(partition_key="")


async def _announcement(sub: AsyncIterator[alkstore.Notification]) -> alkstore.Notification:
    """The next note with a payload (an enqueue's coalesced empty wake may come first)."""
    async for note in sub:
        if note.payload:
            return note
    raise AssertionError("the subscription ended without an announcement")


@pytest.mark.parametrize("way", ["queue", "admin"])
async def test_cancel_is_announced_on_the_queue_channel(
    store: alkstore.Store, qname: str, way: str
) -> None:
    """Every way to cancel (``queue.cancel``, and ``admin.cancel`` behind the CLI and
    the dashboard) announces it, so a worker running the job stops its handler."""
    q = store.queue(qname)
    job_id = await q.enqueue("x")
    assert await q.claim_one("w") is not None
    async with store.listen(qname) as sub:
        assert await (q.cancel(job_id) if way == "queue" else store.admin().cancel(job_id))
        note = await asyncio.wait_for(_announcement(sub), 30)
    assert note == alkstore.Notification(qname, f"cancel:{job_id}")


@pytest.mark.parametrize(
    "limits",
    [{}, {"concurrency": 5}, {"partition_concurrency": 2}],
    ids=["unlimited", "concurrency", "partition"],
)
async def test_a_reclaim_of_a_lapsed_claim_is_announced(
    store: alkstore.Store, clock: Clock, qname: str, limits: dict[str, int]
) -> None:
    """Every claim path (the plain claim, and a limited queue's locked one with or
    without partitions) tells the worker still holding a lapsed claim."""
    q = store.queue(qname, QueueOpts(visibility_timeout_s=30))
    if limits:
        await q.set_limits(**limits)
    job_id = await q.enqueue("x", EnqueueOpts(partition_key="p"))
    first = await q.claim_one("old")
    assert first is not None
    clock.advance(31)  # the claim lapses
    async with store.listen(qname) as sub:
        again = await q.claim_one("new")
        assert again is not None and again.job.attempts == 2
        note = await asyncio.wait_for(_announcement(sub), 30)
    assert note == alkstore.Notification(qname, f"reclaimed:{job_id}:2")
