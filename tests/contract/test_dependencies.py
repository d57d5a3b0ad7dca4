"""Dependencies (docs/contract.md, "Dependencies"): blocked jobs, fan-in, dead parents."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import EnqueueOpts, QueueOpts
from alkstore.errors import DependencyError, InvalidArgumentError

from .test_wake import until_idle


async def _run(q: alkstore.Queue) -> list[int]:
    """Claim and ack everything claimable now; the ids, in claim order."""
    done = []
    while (handle := await q.claim_one("w")) is not None:
        assert await handle.ack()
        done.append(handle.job.id)
    return done


async def test_a_child_is_blocked_until_its_parent_is_acked(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    parent = await q.enqueue("p")
    child = await q.enqueue("c", EnqueueOpts(after=(parent,)))
    job = await q.get_job(child)
    assert job is not None and job.state == "blocked"
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.id == parent
    assert await q.claim_one("w") is None  # never claimed while blocked
    assert await handle.ack()
    job = await q.get_job(child)
    assert job is not None and job.state == "pending"
    assert await _run(q) == [child]


async def test_blocked_jobs_are_counted_apart_in_stats_and_queue_info(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    parent = await q.enqueue("p")
    await q.enqueue("c1", EnqueueOpts(after=(parent,)))
    await q.enqueue("c2", EnqueueOpts(after=(parent,)))
    admin = store.admin()
    s = {s.queue: s for s in await admin.stats()}[qname]
    assert (s.pending, s.delayed, s.blocked, s.processing, s.dead) == (1, 0, 2, 0, 0)
    info = await admin.queue_info(qname)
    assert (info.pending, info.blocked) == (1, 2)
    handle = await q.claim_one("w")
    assert handle is not None and await handle.ack()
    s = {s.queue: s for s in await admin.stats()}[qname]
    assert (s.pending, s.blocked) == (2, 0)


@pytest.mark.parametrize("path", ["ack", "ack_result", "ack_batch", "ack_many"])
async def test_fan_in_across_queues_through_every_ack_path(
    store: alkstore.Store, qname: str, path: str
) -> None:
    a, b, c = store.queue(qname + "a"), store.queue(qname + "b"), store.queue(qname + "c")
    parents = [await a.enqueue(i) for i in range(3)] + [await b.enqueue(i) for i in range(2)]
    child = await c.enqueue("sum", EnqueueOpts(after=tuple(parents)))
    handles = await a.claim_batch("w", 10) + await b.claim_batch("w", 10)
    assert len(handles) == 5
    for i, handle in enumerate(handles):
        assert await c.claim_one("w") is None
        job = await c.get_job(child)
        assert job is not None and job.state == "blocked", i
        if path == "ack":
            assert await handle.ack()
        elif path == "ack_result":
            assert await handle.ack_result(i, keep_s=60)
        elif path == "ack_batch":
            assert await store.queue(handle.job.queue).ack_batch([handle.job.id]) == 1
        else:
            got = await store.ack_many([handle])
            assert got == [True]
    assert await _run(c) == [child]


async def test_an_unknown_parent_is_a_typed_error_naming_it_and_writes_nothing(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    parent = await q.enqueue("p")
    with pytest.raises(DependencyError, match="987654") as err:
        await q.enqueue("c", EnqueueOpts(after=(parent, 987654)))
    assert err.value.job_id == 987654
    assert await _run(q) == [parent]  # no child was written, the parent kept no mark
    with pytest.raises(DependencyError, match=str(parent)):  # acked without a kept result
        await q.enqueue("c", EnqueueOpts(after=(parent,)))
    assert await q.claim_one("w") is None


async def test_bad_after_values_are_refused_before_any_write(store: alkstore.Store) -> None:
    for bad in ([0], ["1"], [True], "12", 5):
        with pytest.raises(InvalidArgumentError, match="after"):
            EnqueueOpts(after=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="after_policy"):
        EnqueueOpts(after=(1,), after_policy="sometimes")
    with pytest.raises(InvalidArgumentError, match="dedupe_key"):
        EnqueueOpts(after=(1,), dedupe_key="k")


async def test_a_parent_with_a_kept_result_is_already_done(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    parent = await q.enqueue("p")
    handle = await q.claim_one("w")
    assert handle is not None and await handle.ack_result({"n": 1}, keep_s=60)
    child = await q.enqueue("c", EnqueueOpts(after=(parent,)))
    job = await q.get_job(child)
    assert job is not None and job.state == "pending"
    assert await _run(q) == [child]


async def test_a_dead_parent_takes_its_dependents_down_transitively(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    parent = await q.enqueue("p")
    child = await q.enqueue("c", EnqueueOpts(after=(parent,)))
    grandchild = await q.enqueue("g", EnqueueOpts(after=(child,)))
    anyway = await q.enqueue("finally", EnqueueOpts(after=(parent,), after_policy="complete"))
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("boom")
    dead = await q.get_job(child)
    assert dead is not None and dead.state == "dead"
    assert dead.last_error == f"dependency {parent} died: boom"
    dead = await q.get_job(grandchild)
    assert dead is not None and dead.state == "dead"
    assert dead.last_error == f"dependency {child} died: dependency {parent} died: boom"
    assert await _run(q) == [anyway]  # the run-anyway callback runs
    # a new child of the dead parent is dead at once
    late = await q.enqueue("late", EnqueueOpts(after=(parent,)))
    job = await q.get_job(late)
    assert job is not None and job.state == "dead" and str(parent) in (job.last_error or "")


async def test_requeue_of_the_dead_parent_revives_what_it_took_down(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    parent = await q.enqueue("p")
    child = await q.enqueue("c", EnqueueOpts(after=(parent,)))
    grandchild = await q.enqueue("g", EnqueueOpts(after=(child,)))
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("boom")
    assert await store.admin().requeue(parent)
    for job_id in (child, grandchild):
        job = await q.get_job(job_id)
        assert job is not None and job.state == "blocked", job_id
    assert await _run(q) == [parent, child, grandchild]


async def test_an_expired_parent_kills_and_a_cancelled_one_too(
    store: alkstore.Store, qname: str, clock
) -> None:  # type: ignore[no-untyped-def]
    q = store.queue(qname)
    expiring = await q.enqueue("p", EnqueueOpts(expires_in_s=10))
    child = await q.enqueue("c", EnqueueOpts(after=(expiring,)))
    clock.advance(11)
    await q.sweep_expired()
    job = await q.get_job(child)
    assert job is not None and job.state == "dead"
    assert job.last_error == f"dependency {expiring} died: expired"

    cancelled = await q.enqueue("p2")
    child2 = await q.enqueue("c2", EnqueueOpts(after=(cancelled,)))
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.id == cancelled  # processing: cancel, not ack
    assert await q.cancel(cancelled)
    job = await q.get_job(child2)
    assert job is not None and job.state == "dead"
    assert job.last_error == f"dependency {cancelled} was cancelled"
    assert await q.claim_one("w") is None


async def test_cancel_of_a_blocked_job_leaves_its_parent_untouched(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    parent = await q.enqueue("p")
    child = await q.enqueue("c", EnqueueOpts(after=(parent,)))
    assert await q.cancel(child)
    assert await q.get_job(child) is None
    assert await _run(q) == [parent]


async def test_a_rolled_back_transaction_leaves_no_child_and_no_mark(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    parent = await q.enqueue("p")
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await tx.queue(qname).enqueue("c", EnqueueOpts(after=(parent,)))
            raise RuntimeError("no")
    async with store.transaction() as tx:
        child = await tx.queue(qname).enqueue("c", EnqueueOpts(after=(parent,)))
    assert await _run(q) == [parent, child]


async def test_a_parents_result_is_kept_until_its_dependents_finished(
    store: alkstore.Store,
    qname: str,
    clock,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    parent = await q.enqueue("p")
    child = await q.enqueue("c", EnqueueOpts(after=(parent,)))
    handle = await q.claim_one("w")
    assert handle is not None and await handle.ack_result({"rows": 7}, keep_s=1)
    clock.advance(10)
    await q.sweep_expired()  # past its expiry, but the child has not run
    outcomes = await q.parent_outcomes(child)
    assert outcomes[parent] is not None and outcomes[parent].value == {"rows": 7}
    running = await q.claim_one("w")
    assert running is not None and running.job.id == child
    assert (await q.parent_outcomes(child))[parent].value == {"rows": 7}  # type: ignore[union-attr]
    assert await running.ack()
    await q.sweep_expired()  # the child finished: now it goes
    assert await q.outcome(parent) is None


async def test_a_parent_acked_without_a_value_reads_as_succeeded_with_none(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    parent = await q.enqueue("p")
    child = await q.enqueue("c", EnqueueOpts(after=(parent,)))
    assert await _run(q) == [parent, child]
    parent2 = await q.enqueue("p2")
    child2 = await q.enqueue("c2", EnqueueOpts(after=(parent2,)))
    handle = await q.claim_one("w")
    assert handle is not None and await handle.ack()
    got = (await q.parent_outcomes(child2))[parent2]
    assert got is not None and got.outcome == "success" and got.value is None


async def test_the_last_parents_ack_wakes_the_childs_consumers(
    store: alkstore.Store, qname: str
) -> None:
    import asyncio

    parents, children = store.queue(qname), store.queue(qname + "c")
    parent = await parents.enqueue("p")
    child = await children.enqueue("c", EnqueueOpts(after=(parent,)))
    got: asyncio.Queue[int] = asyncio.Queue()

    async def consume() -> None:  # re-polls only every hour: only a wake brings the child
        async for handle in children.jobs("w", poll_interval_s=3600):
            await got.put(handle.job.id)
            await handle.ack()

    task = asyncio.create_task(consume())
    try:
        await until_idle(store)  # the consumer found nothing and waits on its channel
        handle = await parents.claim_one("w")
        assert handle is not None and await handle.ack()
        assert await asyncio.wait_for(got.get(), 60) == child
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
