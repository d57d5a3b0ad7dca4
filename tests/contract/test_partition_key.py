"""A job's partition key (EnqueueOpts.partition_key) on every Job the API returns:
claimed (each claim path), read, listed, searched, dead; None for a job without one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import alkstore
from alkstore import EnqueueOpts, InvalidArgumentError
from alkstore.worker import current_job

from .catalog import Target
from .conftest import Clock


async def _two(q: alkstore.Queue) -> tuple[int, int]:
    """One job of tenant acme, then one without a key."""
    keyed = await q.enqueue(b"k", EnqueueOpts(partition_key="acme"))
    plain = await q.enqueue(b"p")
    return keyed, plain


async def _claimed_keys(q: alkstore.Queue) -> dict[int, str | None]:
    return {h.job.id: h.job.partition_key for h in await q.claim_batch("w", 10)}


async def test_a_claimed_job_carries_its_partition_key_and_one_without_has_none(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    keyed, plain = await _two(q)
    assert await _claimed_keys(q) == {keyed: "acme", plain: None}


async def test_a_fair_claim_and_a_partition_limited_claim_carry_the_key(
    store: alkstore.Store, qname: str
) -> None:
    fair, limited = store.queue(qname), store.queue(qname + "-lim")
    await fair.set_fair()
    await limited.set_limits(partition_concurrency=5)
    for q in (fair, limited):
        keyed, plain = await _two(q)
        assert await _claimed_keys(q) == {keyed: "acme", plain: None}
    # a drained fair key is pruned (fair_claim's 'empty' marker) and claims go on
    again = await fair.enqueue(b"k2", EnqueueOpts(partition_key="beta"))
    assert await _claimed_keys(fair) == {again: "beta"}


async def test_a_lapsed_claim_taken_over_carries_the_key(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"k", EnqueueOpts(partition_key="acme"))
    first = await q.claim_one("w1")
    assert first is not None and first.job.partition_key == "acme"
    clock.advance(first.job.visibility_timeout_s + 1)
    again = await q.claim_one("w2")
    assert again is not None and (again.job.id, again.job.partition_key) == (job_id, "acme")


async def test_get_job_find_job_and_a_dead_letter_carry_the_key(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    keyed, plain = await _two(q)
    admin = store.admin()
    for job_id, key in ((keyed, "acme"), (plain, None)):
        job = await q.get_job(job_id)
        assert job is not None and job.partition_key == key
        found = await admin.find_job(job_id)
        assert found is not None and found.partition_key == key
    for handle in await q.claim_batch("w", 10):
        assert await handle.fail("boom")
    for job_id, key in ((keyed, "acme"), (plain, None)):
        dead = await q.get_job(job_id)
        assert dead is not None and dead.state == "dead" and dead.partition_key == key
        found = await admin.find_job(job_id)
        assert found is not None and found.partition_key == key
    dead_page = [j for j in await admin.list_dead(limit=10_000) if j.queue == qname]
    assert {j.id: j.partition_key for j in dead_page} == {keyed: "acme", plain: None}


async def test_listings_and_searches_carry_the_key_of_live_and_dead_jobs(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    dying = await q.enqueue(b"d", EnqueueOpts(partition_key="gone"))
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("boom")
    keyed, plain = await _two(q)
    want = {dying: "gone", keyed: "acme", plain: None}
    admin = store.admin()
    listed = await admin.list_jobs(qname)
    assert {j.id: j.partition_key for j in listed} == want
    before = await admin.list_jobs(qname, before=plain + 1)
    assert {j.id: j.partition_key for j in before} == want
    page = await admin.find(f"queue:{qname}")
    assert {j.id: j.partition_key for j in page.jobs} == want
    preview = await admin.bulk().preview("cancel", f"queue:{qname}")
    assert {j.id: j.partition_key for j in preview.sample} == {keyed: "acme", plain: None}
    assert listed[0].as_dict()["partition_key"] == "gone"


async def test_a_handler_reads_its_jobs_partition_key(target: Target, qname: str) -> None:
    seen: dict[str, str | None] = {}
    both = asyncio.Event()
    app = alkstore.App(target.url, schema=target.schema)

    @app.task(queue=qname, name="tenant_work")
    async def tenant_work(name: str) -> None:
        job = current_job()
        assert job is not None
        seen[name] = job.partition_key
        if len(seen) == 2:
            both.set()

    async with app:
        await tenant_work.configure(partition_key="acme").defer(name="keyed")
        await tenant_work.defer(name="plain")
        worker = app.worker(handle_signals=False, poll_interval_s=0.2)
        running: asyncio.Task[Any] = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(both.wait(), 30)  # set by the second handler
        finally:
            worker.stop()
            await running
    assert seen == {"keyed": "acme", "plain": None}


async def test_list_jobs_of_one_partition_key_gives_its_pending_and_processing_jobs(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    acme = EnqueueOpts(partition_key="acme")
    dying = await q.enqueue(b"d", acme)
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("boom")  # dead: no index holds its key
    running = await q.enqueue(b"r", acme)
    assert (await q.claim_one("w")) is not None
    pending = await q.enqueue_many([b"a", b"b", b"c"], acme)
    await q.enqueue(b"other", EnqueueOpts(partition_key="beta"))
    await q.enqueue(b"plain")
    await store.queue(qname + "-other").enqueue(b"x", acme)
    admin = store.admin()

    async def ids(**kw: Any) -> list[int]:
        return [j.id for j in await admin.list_jobs(qname, partition_key="acme", **kw)]

    assert dying not in await ids()
    assert await ids() == [running, *pending]
    assert await ids(state="pending") == pending
    assert await ids(state="processing") == [running]
    assert await ids(limit=2) == [running, pending[0]]
    assert await ids(limit=2, after=pending[0]) == pending[1:]
    assert await ids(limit=2, before=pending[2]) == pending[:2]
    assert await ids(limit=2, before=pending[1]) == [running, pending[0]]
    jobs = await admin.list_jobs(qname, partition_key="acme")
    assert {j.partition_key for j in jobs} == {"acme"}
    assert await admin.list_jobs(qname, partition_key="nobody") == []
    for bad in ({"state": "dead"}, {"state": "blocked"}, {"partition_key": ""}):
        with pytest.raises(InvalidArgumentError):
            await admin.list_jobs(qname, **{"partition_key": "acme", **bad})  # type: ignore[arg-type]
