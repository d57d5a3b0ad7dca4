"""The admin operations (alkstore/admin.py), the same on both engines."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import EnqueueOpts, InvalidArgumentError, QueueOpts

from .rawsql import expire_now, make_due_now


async def test_list_jobs_is_in_id_order_with_a_limit_and_a_state(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    ids = await q.enqueue_many([b"a", b"b", b"c", b"d"])
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("x")
    admin = store.admin()
    assert [j.id for j in await admin.list_jobs(qname)] == ids
    assert [j.id for j in await admin.list_jobs(qname, limit=2)] == ids[:2]
    assert [j.id for j in await admin.list_jobs(qname, "dead")] == [ids[0]]
    assert [j.id for j in await admin.list_jobs(qname, "pending")] == ids[1:]
    assert await admin.list_jobs(qname, "processing") == []
    assert await admin.list_jobs(qname + "-other") == []
    for bad in ({"state": "done"}, {"limit": 0}, {"limit": 10_001}, {"limit": 1.5}):
        with pytest.raises(InvalidArgumentError):
            await admin.list_jobs(qname, **bad)  # type: ignore[arg-type]


async def test_requeue_gives_a_fresh_budget_and_clears_a_past_expiry(
    store: alkstore.Store, target, qname: str
) -> None:  # type: ignore[no-untyped-def]
    q = store.queue(qname, QueueOpts(max_attempts=1))
    job_id = await q.enqueue(b"late", EnqueueOpts(expires_in_s=3600, delay_s=3600))
    await expire_now(store, target, job_id)
    assert (await q.sweep_expired()).expired == 1
    dead = await q.get_job(job_id)
    assert dead is not None and dead.state == "dead" and dead.last_error == "expired"
    admin = store.admin()
    assert await admin.requeue(job_id) is True
    assert await admin.requeue(job_id) is False  # no longer dead
    job = await q.get_job(job_id)
    assert job is not None and job.state == "pending" and job.attempts == 0
    assert job.expires_at is None  # else it would expire again at once
    assert job.last_error == "expired"  # the history stays
    handle = await q.claim_one("w")  # claimable now, though it was delayed an hour
    assert handle is not None and handle.job.id == job_id and await handle.ack()
    assert await admin.requeue(job_id) is False  # gone


async def test_requeue_keeps_an_expiry_still_in_the_future(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"", EnqueueOpts(expires_in_s=3600))
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail()
    assert await store.admin().requeue(job_id)
    job = await q.get_job(job_id)
    assert job is not None and job.expires_at is not None


async def test_stats_count_each_state_and_the_oldest_due_age(
    store: alkstore.Store, target, qname: str
) -> None:  # type: ignore[no-untyped-def]
    q = store.queue(qname)
    due = await q.enqueue(b"due", EnqueueOpts(delay_s=3600))
    await make_due_now(store, target, due)  # due since a second ago
    await q.enqueue(b"delayed", EnqueueOpts(delay_s=3600))
    p1, _ = await q.enqueue_many([b"p1", b"p2"])
    claimed = await q.claim_batch("w", 1)
    assert [h.job.id for h in claimed] == [due]
    oldest = await q.enqueue(b"oldest", EnqueueOpts(delay_s=3600))
    await make_due_now(store, target, oldest)
    failing = await q.claim_batch("w", 1)
    assert await failing[0].fail()
    await make_due_now(store, target, p1)  # the oldest due pending job: due a second ago
    stats = {s.queue: s for s in await store.admin().stats()}
    s = stats[qname]
    assert (s.pending, s.delayed, s.processing, s.dead) == (2, 1, 1, 1)
    assert s.oldest_pending_age_s is not None and 0.9 <= s.oldest_pending_age_s < 3600
    empty = store.queue(qname + "-empty")
    assert empty.name not in stats


async def test_stats_age_is_none_without_a_due_job(store: alkstore.Store, qname: str) -> None:
    await store.queue(qname).enqueue(b"", EnqueueOpts(delay_s=3600))
    (s,) = [s for s in await store.admin().stats() if s.queue == qname]
    assert s.delayed == 1 and s.pending == 0 and s.oldest_pending_age_s is None


async def test_find_job_looks_in_every_queue(store: alkstore.Store, qname: str) -> None:
    job_id = await store.queue(qname).enqueue(b"")
    found = await store.admin().find_job(job_id)
    assert found is not None and found.queue == qname
    assert await store.admin().find_job(job_id + 10_000) is None
    with pytest.raises(InvalidArgumentError):
        await store.admin().find_job(0)
