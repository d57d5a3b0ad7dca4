"""The admin operations (alkstore/admin.py), the same on both engines."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import EnqueueOpts, InvalidArgumentError, InvalidNameError, QueueOpts
from alkstore.bookkeeping import Bookkeeping
from alkstore.engine_door import engine_of

from .conftest import Clock
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


async def test_list_jobs_pages_live_and_dead_jobs_by_id_both_ways(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    ids = await q.enqueue_many([f"j{i}".encode() for i in range(7)])
    await store.queue(qname + "-other").enqueue(b"not this queue")
    for _ in range(2):  # the first two die: pages merge live and dead rows by id
        handle = await q.claim_one("w")
        assert handle is not None and await handle.fail("x")
    admin = store.admin()
    first = await admin.list_jobs(qname, limit=3)
    second = await admin.list_jobs(qname, limit=3, after=first[-1].id)
    third = await admin.list_jobs(qname, limit=3, after=second[-1].id)
    assert [[j.id for j in page] for page in (first, second, third)] == [
        ids[:3],
        ids[3:6],
        ids[6:],
    ]
    assert [j.state for j in first] == ["dead", "dead", "pending"]
    back = await admin.list_jobs(qname, limit=3, before=third[0].id)  # the page before, in order
    assert [j.id for j in back] == ids[3:6]
    assert [j.id for j in await admin.list_jobs(qname, limit=3, before=ids[2])] == ids[:2]
    assert [j.id for j in await admin.list_jobs(qname, "dead", after=ids[0])] == [ids[1]]
    assert await admin.list_jobs(qname, after=ids[-1]) == []
    with pytest.raises(InvalidArgumentError, match="after or before"):
        await admin.list_jobs(qname, after=1, before=5)
    with pytest.raises(InvalidArgumentError):
        await admin.list_jobs(qname, after=0)


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


async def test_requeue_clears_a_past_expiry_and_keeps_a_future_one_at_the_same_moment(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname)
    start = clock.now
    lapsing = await q.enqueue(b"lapsing", EnqueueOpts(expires_in_s=60))
    lasting = await q.enqueue(b"lasting", EnqueueOpts(expires_in_s=7200))
    for handle in await q.claim_batch("w", 2):
        assert await handle.fail()
    clock.advance(61)  # the first expiry is a second past, the second still ahead
    assert await store.admin().requeue_many([lapsing, lasting]) == 2
    gone, kept = await q.get_job(lapsing), await q.get_job(lasting)
    assert gone is not None and gone.expires_at is None
    assert kept is not None and kept.expires_at is not None
    assert kept.expires_at.timestamp() == pytest.approx(start + 7200, abs=1e-3)
    assert {h.job.id for h in await q.claim_batch("w", 2)} == {lapsing, lasting}


async def test_the_engine_requeues_with_the_values_it_is_given(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    """The policy is alkstore.admin's (attempts 0, due now, a past expiry cleared);
    the engines only apply the values: attempts, a delay and an expiry cutoff."""
    q = store.queue(qname)
    inside = await q.enqueue(b"inside", EnqueueOpts(expires_in_s=1800))
    beyond = await q.enqueue(b"beyond", EnqueueOpts(expires_in_s=7200))
    for handle in await q.claim_batch("w", 2):
        assert await handle.fail()
    engine = engine_of(store)
    for job_id in (inside, beyond):
        assert await engine.requeue_dead(job_id, 2, 60.0, 3600.0)
    cleared, kept = await q.get_job(inside), await q.get_job(beyond)
    assert cleared is not None and kept is not None
    assert cleared.attempts == kept.attempts == 2
    assert cleared.run_at.timestamp() == pytest.approx(clock.now + 60, abs=1e-3)
    assert cleared.expires_at is None  # not later than now + the cutoff
    assert kept.expires_at is not None  # later: kept
    assert await q.claim_one("w") is None  # due in a minute
    clock.advance(60)
    assert {h.job.id for h in await q.claim_batch("w", 2)} == {inside, beyond}


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


async def test_list_dead_pages_every_queues_dead_jobs_by_id(store: alkstore.Store) -> None:
    """Keyset pages: each page starts after the last id of the one before (or ends
    before the first id of the one after), across queues, never skipping or repeating."""
    dead = []
    for i in range(7):
        q = store.queue(f"dl{i % 3}")
        job_id = await q.enqueue(b"x")
        handle = await q.claim_one("w")
        assert handle is not None and await handle.fail("boom")
        dead.append(job_id)
        await store.queue("dl-live").enqueue(b"live")  # live jobs are never listed
    admin = store.admin()
    first = await admin.list_dead(limit=3)
    assert [j.id for j in first] == dead[:3] and {j.state for j in first} == {"dead"}
    second = await admin.list_dead(after=first[-1].id, limit=3)
    assert [j.id for j in second] == dead[3:6]
    last = await admin.list_dead(after=second[-1].id, limit=3)
    assert [j.id for j in last] == dead[6:]
    assert await admin.list_dead(after=last[-1].id, limit=3) == []
    back = await admin.list_dead(before=last[0].id, limit=3)
    assert [j.id for j in back] == dead[3:6]  # the page before, in id order
    assert [j.id for j in await admin.list_dead(before=dead[1], limit=3)] == dead[:1]
    assert [j.queue for j in first] == ["dl0", "dl1", "dl2"]


@pytest.mark.parametrize(
    "kwargs",
    [{"after": 1, "before": 2}, {"after": 0}, {"before": "3"}, {"limit": 0}, {"limit": True}],
)
async def test_list_dead_refuses_bad_arguments(
    store: alkstore.Store, kwargs: dict[str, object]
) -> None:
    with pytest.raises(alkstore.InvalidArgumentError):
        await store.admin().list_dead(**kwargs)  # type: ignore[arg-type]


async def test_workers_page_by_id_both_ways(store: alkstore.Store) -> None:
    books = Bookkeeping(store)
    ids = [f"w{i:02d}" for i in range(7)]
    for wid in reversed(ids):  # started in reverse: pages go by id, not start time
        await books.report_worker(wid, "h", 1, ["q"], 1, 0)
    admin = store.admin()
    first = await admin.workers_page(limit=3)
    second = await admin.workers_page(limit=3, after=first[-1].id)
    third = await admin.workers_page(limit=3, after=second[-1].id)
    assert [[w.id for w in p] for p in (first, second, third)] == [ids[:3], ids[3:6], ids[6:]]
    assert all(w.alive and w.queues == ("q",) for w in first)
    back = await admin.workers_page(limit=3, before=third[0].id)  # in id order too
    assert [w.id for w in back] == ids[3:6]
    assert [w.id for w in await admin.workers_page(limit=3, before=ids[2])] == ids[:2]
    assert await admin.workers_page(after=ids[-1]) == []
    assert [w.id for w in await admin.workers_page()] == ids
    assert [w.id for w in await admin.workers()] == ids[::-1]  # unpaged: by start time
    with pytest.raises(InvalidArgumentError, match="after or before"):
        await admin.workers_page(after="w00", before="w05")
    for bad in ({"limit": 0}, {"limit": 10_001}, {"after": ""}, {"before": 5}):
        with pytest.raises(InvalidArgumentError):
            await admin.workers_page(**bad)  # type: ignore[arg-type]


async def test_queues_page_by_name_both_ways(store: alkstore.Store, qname: str) -> None:
    names = [f"{qname}-{i}" for i in range(5)]
    for name in names[:4]:
        await store.queue(name).enqueue(b"x")
    await store.queue(names[4]).pause()  # stored settings only: listed too
    admin = store.admin()
    first = await admin.queues_page(limit=2)
    second = await admin.queues_page(limit=2, after=first[-1].queue)
    third = await admin.queues_page(limit=2, after=second[-1].queue)
    assert [[i.queue for i in p] for p in (first, second, third)] == [
        names[:2],
        names[2:4],
        names[4:],
    ]
    assert first[0].pending == 1 and third[0].paused
    back = await admin.queues_page(limit=2, before=third[0].queue)
    assert [i.queue for i in back] == names[2:4]
    assert [i.queue for i in await admin.queues_page(before=names[1])] == names[:1]
    assert await admin.queues_page(after=names[-1]) == []
    assert await admin.queues_page() == await admin.queues()
    with pytest.raises(InvalidArgumentError, match="after or before"):
        await admin.queues_page(after=names[0], before=names[3])
    for bad in ({"limit": 0}, {"limit": 1.5}):
        with pytest.raises(InvalidArgumentError):
            await admin.queues_page(**bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidNameError):
        await admin.queues_page(after="_bad")
