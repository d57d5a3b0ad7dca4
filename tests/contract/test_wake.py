"""The wake-driven claim loop, ``queue.jobs(...)``: wake, re-poll fallback, delayed self-wake.

Each test that proves a *wake* (rather than a re-poll) sets the re-poll interval
far above the generous time it waits for the event, so only the wake can deliver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import alkstore
from alkstore import EnqueueOpts, InvalidArgumentError, JobHandle, QueueOpts

from .rawsql import make_due_now, store_whose_wakes_fail

NEVER = 600.0  # a re-poll interval that never fires within a test
WAIT = 20.0  # generous: how long a test waits for an event that should come
PROCS = Path(__file__).with_name("procs.py")


@contextlib.asynccontextmanager
async def consumer(
    q: alkstore.Queue, poll: float = NEVER, batch: int = 1
) -> AsyncIterator[asyncio.Queue[JobHandle]]:
    """Run ``q.jobs(...)`` in a task, feeding claimed handles into an asyncio queue."""
    got: asyncio.Queue[JobHandle] = asyncio.Queue()

    async def run() -> None:
        async for handle in q.jobs("consumer", batch, poll_interval_s=poll):
            await got.put(handle)

    task = asyncio.create_task(run())
    try:
        yield got
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def next_job(got: asyncio.Queue[JobHandle]) -> JobHandle:
    return await asyncio.wait_for(got.get(), WAIT)


async def until_idle(store: alkstore.Store) -> None:
    """Until a claim loop of ``store`` waits with nothing to claim (its own readiness signal)."""
    async with asyncio.timeout(WAIT):
        while not any(loop.idle.is_set() for loop in list(store._loops)):
            await asyncio.sleep(0.001)  # polling the signal, not waiting out a duration


async def test_jobs_yields_backlog_then_wakes_on_enqueue_across_connections(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    producer, consuming = await open_store(), await open_store()
    first = await producer.queue(qname).enqueue(b"backlog")
    async with consumer(consuming.queue(qname)) as got:
        handle = await next_job(got)
        assert handle.job.id == first and await handle.ack()
        await until_idle(consuming)  # the loop is now waiting on its channel
        for i in range(5):
            job_id = await producer.queue(qname).enqueue(f"woken {i}")
            handle = await next_job(got)
            assert handle.job.id == job_id and handle.job.worker_id == "consumer"
            assert await handle.ack()


async def test_jobs_wakes_on_enqueue_many_and_claims_in_batches(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    producer, consuming = await open_store(), await open_store()
    async with consumer(consuming.queue(qname), batch=4) as got:
        await until_idle(consuming)
        ids = await producer.queue(qname).enqueue_many([str(i) for i in range(10)])
        handles = [await next_job(got) for _ in ids]
        assert [h.job.id for h in handles] == ids
        assert await consuming.queue(qname).ack_batch(ids) == 10


async def test_jobs_wakes_on_transactional_enqueue_after_commit(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    producer, consuming = await open_store(), await open_store()
    async with consumer(consuming.queue(qname)) as got:
        await until_idle(consuming)
        async with producer.transaction() as tx:
            job_id = await tx.queue(qname).enqueue(b"tx")
        handle = await next_job(got)
        assert handle.job.id == job_id


async def test_a_wake_that_comes_while_the_loop_claims_is_kept_for_its_next_wait(
    store: alkstore.Store, qname: str
) -> None:
    # A claim loop is mid-claim (not waiting) when the wake of a job committed after
    # its claim's snapshot arrives: its next wait must return at once, not sleep
    # until the re-poll. The probe subscription gets the same note in the same
    # delivery, so once the probe has it the loop's subscription has it too.
    async with store._wake_subscription(qname) as sub, store.listen(qname) as probe:
        await store.queue(qname).enqueue(b"x")
        await asyncio.wait_for(probe.__anext__(), WAIT)
        assert await asyncio.wait_for(sub.wait(NEVER), WAIT) is True
        assert await sub.wait(0.001) is False  # taken: the next wait sleeps


async def test_poll_only_fallback_claims_a_job_whose_wake_never_came(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"silent", EnqueueOpts(delay_s=3600))
    async with consumer(q, poll=0.3) as got:
        await until_idle(store)  # waiting; its next self-wake is an hour away
        await make_due_now(store, target, job_id)  # due now, and no wake is sent
        handle = await next_job(got)
        assert handle.job.id == job_id


async def test_delayed_job_wakes_the_loop_when_it_becomes_due(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    producer, consuming = await open_store(), await open_store()
    async with consumer(consuming.queue(qname)) as got:
        await until_idle(consuming)
        job_id = await producer.queue(qname).enqueue(b"later", EnqueueOpts(delay_s=0.5))
        handle = await next_job(got)
        assert handle.job.id == job_id
        assert handle.job.run_at <= handle.job.claim_expires_at  # type: ignore[operator]


async def test_lapsed_claim_wakes_the_loop_for_a_reclaim(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=0.4))
    job_id = await q.enqueue(b"")
    async with consumer(q) as got:
        first = await next_job(got)  # claimed, then abandoned
        second = await next_job(got)  # reclaimed once the claim lapsed
        assert first.job.id == second.job.id == job_id
        assert second.job.attempts == 2


async def test_the_loops_timer_looks_only_as_far_as_its_next_poll(
    store: alkstore.Store, qname: str
) -> None:
    """A delayed job or a lapse past the look's horizon is not reported (the loop
    polls again before it anyway), so the look never walks the entries of acked
    claims, which lie a visibility timeout ahead; within the horizon it is."""
    q = store.queue(qname)
    assert await q._next_wake_in(60) is None  # nothing waits
    await q.enqueue(b"later", EnqueueOpts(delay_s=20))
    assert await q._next_wake_in(5) is None
    due = await q._next_wake_in(60)
    assert due is not None and 15 < due <= 20
    await store.queue(qname, QueueOpts(visibility_timeout_s=3)).enqueue(b"now")
    (claimed,) = await q.claim_batch("w1", 1)  # its claim lapses in 3 s
    assert claimed.job.payload == b"now"
    due = await q._next_wake_in(10)
    assert due is not None and 0 < due <= 3  # the lapse comes first
    assert await q._next_wake_in(0.5) is None  # neither within half a second
    await claimed.ack()
    assert await q._next_wake_in(10) is None
    due = await q._next_wake_in(60)
    assert due is not None and 15 < due <= 20


async def test_jobs_ignores_other_queues(open_store, qname: str) -> None:  # type: ignore[no-untyped-def]
    producer, consuming = await open_store(), await open_store()
    async with consumer(consuming.queue(qname)) as got:
        await until_idle(consuming)
        other = await producer.queue(qname + "-other").enqueue(b"not mine")
        mine = await producer.queue(qname).enqueue(b"mine")
        handle = await next_job(got)
        assert handle.job.id == mine
        await until_idle(consuming)  # it claimed again, found nothing and waits
        assert got.empty()
        untouched = await producer.queue(qname + "-other").get_job(other)
        assert untouched is not None and untouched.state == "pending"
        assert untouched.attempts == 0


async def test_jobs_ends_when_the_store_closes(open_store, qname: str) -> None:  # type: ignore[no-untyped-def]
    store = await open_store()
    q = store.queue(qname)

    async def run() -> int:
        count = 0
        async for _ in q.jobs("w", poll_interval_s=NEVER):
            count += 1
        return count

    task = asyncio.create_task(run())
    await until_idle(store)
    await store.close()
    assert await asyncio.wait_for(task, WAIT) == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"worker_id": ""},
        {"worker_id": "w", "batch": 0},
        {"worker_id": "w", "batch": 1.5},
        {"worker_id": "w", "poll_interval_s": 0},
        {"worker_id": "w", "poll_interval_s": -1},
    ],
)
async def test_jobs_validates_its_arguments(
    store: alkstore.Store, qname: str, kwargs: dict[str, object]
) -> None:
    with pytest.raises(InvalidArgumentError):
        async for _ in store.queue(qname).jobs(**kwargs):  # type: ignore[arg-type]
            pass


async def _spawn(target, *args: str) -> asyncio.subprocess.Process:  # type: ignore[no-untyped-def]
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(PROCS),
        args[0],
        target.url,
        target.schema,
        *args[1:],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


@pytest.mark.slow
async def test_wake_crosses_processes(store: alkstore.Store, target, qname: str) -> None:  # type: ignore[no-untyped-def]
    """A producer process enqueues; a consumer process waiting in jobs() gets it by wake."""
    proc = await _spawn(target, "consume", qname, "2", str(NEVER))
    try:
        assert proc.stdout is not None
        await store.queue(qname).enqueue("ping")
        line = await asyncio.wait_for(proc.stdout.readline(), WAIT)
        assert line.decode().strip() == "ping"
        line = await asyncio.wait_for(proc.stdout.readline(), WAIT)
        assert line.decode().strip() == "waiting"  # its claim loop now waits for a wake
        producer = await _spawn(target, "produce", qname, "from another process")
        out, _ = await asyncio.wait_for(producer.communicate(), WAIT)
        assert producer.returncode == 0
        job_id = int(out)
        line = await asyncio.wait_for(proc.stdout.readline(), WAIT)
        assert line.decode().strip() == "from another process"
        assert await asyncio.wait_for(proc.wait(), WAIT) == 0
        assert await store.queue(qname).get_job(job_id) is None  # acked by the consumer
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_failed_wake_never_fails_a_committed_enqueue(
    target,
    qname: str,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    caplog.set_level(logging.WARNING, logger="alkstore")
    async with store_whose_wakes_fail(target, WAIT) as store:
        q = store.queue(qname)
        job_id = await q.enqueue(b"still here")
        ids = await q.enqueue_many([b"a", b"b"])
        async with store.transaction() as tx:
            tx_id = await tx.queue(qname).enqueue(b"tx")
        claimed = await q.claim_batch("w", 10)
        assert sorted(h.job.id for h in claimed) == [job_id, *ids, tx_id]
        assert await store.ack_many(claimed) == [True] * 4
    # closed: the waker's last sends are done; each failed wake was logged
    failed = [
        r
        for r in caplog.records
        if r.name.startswith("alkstore") and r.levelno == logging.WARNING and "wake" in r.message
    ]
    assert failed, caplog.text
    assert all(qname in r.message for r in failed)
