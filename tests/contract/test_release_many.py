"""release_many: the give-back of many claims of one queue in one fenced transaction
(a stopping worker's claim-ahead buffer), answered per claim like JobHandle.release."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import alkstore
from alkstore import HandleConsumedError, InvalidArgumentError, QueueOpts
from alkstore.core.job import Job
from alkstore.job_handle import release_many

from .conftest import Clock
from .test_wake import until_idle

SHORT = 0.3
LAPSE = 0.45


def counting(store: alkstore.Store) -> list[tuple[str, int]]:
    """Record the engine's release_batch calls (the database underneath stays real)."""
    engine: Any = store._engine
    calls: list[tuple[str, int]] = []
    original = engine.release_batch

    async def spy(queue: str, items: Any) -> set[int]:
        calls.append((queue, len(items)))
        return await original(queue, items)  # type: ignore[no-any-return]

    engine.release_batch = spy
    return calls


async def test_release_many_gives_every_claim_back_at_its_place_in_line(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    ids = await q.enqueue_many([{"n": i} for i in range(20)])
    before = {i: await q.get_job(i) for i in ids}
    handles = await q.claim_batch("w", 20)
    assert all(h.job.attempts == 1 for h in handles)
    calls = counting(store)
    assert await release_many(handles) == [True] * 20
    assert calls == [(qname, 20)]  # one engine call, one transaction
    assert all(h.consumed for h in handles)
    for job_id in ids:
        job, old = await q.get_job(job_id), before[job_id]
        assert job is not None and old is not None
        assert (job.state, job.attempts, job.worker_id) == ("pending", 0, None)
        assert job.run_at == old.run_at  # keeps its place in line
    # at max_attempts=1 each still runs once, in the same order as before
    again = await q.claim_batch("w2", 20)
    assert [h.job.id for h in again] == [h.job.id for h in handles]
    assert all(h.job.attempts == 1 for h in again)


async def test_release_many_refuses_a_stale_claim_and_releases_the_others(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT, max_attempts=3))
    await q.enqueue_many([{"n": i} for i in range(4)])
    first = await q.claim_batch("old", 4)
    clock.advance(LAPSE)
    fresh = await q.claim_batch("new", 4)  # all four lapsed and reclaimed: attempt 2
    assert [h.job.attempts for h in fresh] == [2] * 4
    # the first handle of the old claim is stale; the other three of the new one are fresh
    answers = await release_many([first[0], *fresh[1:]])
    assert answers == [False, True, True, True]
    stolen = await q.get_job(first[0].job.id)
    assert stolen is not None
    assert (stolen.state, stolen.attempts, stolen.worker_id) == ("processing", 2, "new")
    for h in fresh[1:]:
        job = await q.get_job(h.job.id)
        assert job is not None and (job.state, job.attempts, job.worker_id) == ("pending", 1, None)
    assert await fresh[0].release() is True  # the holder still gives it back itself


async def test_release_many_refuses_a_wrong_attempt_count(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    await q.enqueue_many([b"a", b"b"])
    handles = await q.claim_batch("w", 2)
    row = handles[0].job._row
    forged = alkstore.JobHandle(q, Job((*row[:7], 5, *row[8:])))  # attempts 5, not 1
    assert await release_many([forged, handles[1]]) == [False, True]
    job = await q.get_job(handles[0].job.id)
    assert job is not None and (job.state, job.attempts) == ("processing", 1)


async def test_an_empty_release_many_is_a_no_op(store: alkstore.Store, qname: str) -> None:
    calls = counting(store)
    assert await release_many([]) == []
    assert calls == []


async def test_release_many_checks_its_handles_before_writing(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    other = store.queue(qname + "-other")
    await q.enqueue_many([b"a", b"b"])
    await other.enqueue(b"o")
    a, b = await q.claim_batch("w", 2)
    foreign = await other.claim_one("w")
    assert foreign is not None
    calls = counting(store)
    with pytest.raises(InvalidArgumentError, match="takes job handles, got 42"):
        await release_many([a, 42])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="handles of one queue"):
        await release_many([a, foreign])
    with pytest.raises(InvalidArgumentError, match=f"got job {a.job.id} twice"):
        await release_many([a, b, a])
    assert await b.release() is True
    with pytest.raises(HandleConsumedError):
        await release_many([a, b])
    assert calls == []  # nothing reached the engine
    assert not a.consumed
    assert await release_many([a]) == [True]


async def test_release_many_frees_a_limited_queue_and_wakes_its_consumer(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    await q.set_limits(concurrency=3)
    await q.enqueue_many([{"n": i} for i in range(5)])
    held = await q.claim_batch("a", 10)
    assert len(held) == 3
    got: asyncio.Queue[alkstore.JobHandle] = asyncio.Queue()

    async def consume() -> None:
        async for handle in q.jobs("b", poll_interval_s=3600):  # only a wake ends the wait
            await got.put(handle)

    task = asyncio.create_task(consume())
    try:
        await until_idle(store)  # it claimed, found every slot taken, and now waits
        assert got.empty()
        assert await release_many(held) == [True] * 3
        handle = await asyncio.wait_for(got.get(), 30)
        assert handle.job.id == held[0].job.id  # back at its place in line
    finally:
        task.cancel()
