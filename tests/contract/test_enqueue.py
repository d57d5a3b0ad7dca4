"""Enqueue, resolution of the stamps, payloads, ids and get_job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import alkstore
from alkstore import EnqueueOpts, QueueOpts

from . import catalog
from .conftest import Clock
from .rawsql import count_rows

EPS = 0.01  # seconds: tolerance for clock readings taken on two sides of a round trip


def close_to(a: datetime | None, b: datetime, eps: float = EPS) -> bool:
    return a is not None and abs((a - b).total_seconds()) <= eps


async def test_enqueued_job_is_pending_with_the_queue_stamps(
    store: alkstore.Store, qname: str
) -> None:
    opts = QueueOpts(visibility_timeout_s=7, max_attempts=3, retry_base_s=2, priority=4)
    q = store.queue(qname, opts)
    before = datetime.now(UTC)
    job_id = await q.enqueue(b"hello")
    after = datetime.now(UTC)
    job = await q.get_job(job_id)
    assert job is not None
    assert (job.id, job.queue, job.payload, job.state) == (job_id, qname, b"hello", "pending")
    assert (job.priority, job.attempts, job.max_attempts) == (4, 0, 3)
    assert (job.visibility_timeout_s, job.retry_base_s) == (7.0, 2.0)
    assert job.expires_at is None and job.worker_id is None and job.claim_expires_at is None
    assert job.last_error is None and job.died_at is None
    assert before - timedelta(seconds=1) <= job.created_at <= after + timedelta(seconds=1)
    # one clock reading per enqueue: no delay means run_at is exactly created_at
    assert job.run_at == job.created_at


async def test_times_are_utc_aware(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(expires_in_s=60))
    job = await q.get_job(await q.enqueue(b""))
    assert job is not None
    for value in (job.run_at, job.created_at, job.expires_at):
        assert value is not None and value.tzinfo is UTC


async def test_delay_is_relative_to_the_enqueue_clock(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    job = await q.get_job(await q.enqueue(b"", EnqueueOpts(delay_s=90)))
    assert job is not None
    assert close_to(job.run_at, job.created_at + timedelta(seconds=90), 0.001)


async def test_run_at_is_used_as_given(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    at = datetime(2031, 3, 4, 5, 6, 7, 123000, tzinfo=UTC)
    job = await q.get_job(await q.enqueue(b"", EnqueueOpts(run_at=at)))
    assert job is not None and close_to(job.run_at, at, 0.000_01)
    past = datetime.now(UTC) - timedelta(days=3)
    job = await q.get_job(await q.enqueue(b"", EnqueueOpts(run_at=past)))
    assert job is not None and close_to(job.run_at, past, 0.000_01)


async def test_delay_wins_over_run_at(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    far = datetime(2040, 1, 1, tzinfo=UTC)
    job = await q.get_job(await q.enqueue(b"", EnqueueOpts(delay_s=5, run_at=far)))
    assert job is not None
    assert close_to(job.run_at, job.created_at + timedelta(seconds=5), 0.001)


async def test_expiry_is_relative_from_opts_else_queue_default(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(expires_in_s=600))
    default = await q.get_job(await q.enqueue(b""))
    override = await q.get_job(await q.enqueue(b"", EnqueueOpts(expires_in_s=30)))
    never = await store.queue(qname).get_job(await store.queue(qname).enqueue(b""))
    assert default is not None and override is not None and never is not None
    assert close_to(default.expires_at, default.created_at + timedelta(seconds=600), 0.001)
    assert close_to(override.expires_at, override.created_at + timedelta(seconds=30), 0.001)
    assert never.expires_at is None


async def test_expiry_counts_from_enqueue_not_from_run_at(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    job = await q.get_job(await q.enqueue(b"", EnqueueOpts(delay_s=100, expires_in_s=10)))
    assert job is not None
    assert close_to(job.expires_at, job.created_at + timedelta(seconds=10), 0.001)


async def test_priority_from_opts_else_queue_default(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(priority=7))
    a = await q.get_job(await q.enqueue(b""))
    b = await q.get_job(await q.enqueue(b"", EnqueueOpts(priority=-3)))
    c = await q.get_job(await q.enqueue(b"", EnqueueOpts(priority=0)))
    assert (a and a.priority, b and b.priority, c and c.priority) == (7, -3, 0)


async def test_max_attempts_is_the_one_per_job_override(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=5, visibility_timeout_s=11, retry_base_s=3))
    job = await q.get_job(await q.enqueue(b"", EnqueueOpts(max_attempts=1)))
    assert job is not None
    assert (job.max_attempts, job.visibility_timeout_s, job.retry_base_s) == (1, 11.0, 3.0)


async def test_stamps_are_copied_at_enqueue(store: alkstore.Store, qname: str) -> None:
    old = store.queue(qname, QueueOpts(visibility_timeout_s=5, max_attempts=2, retry_base_s=4))
    job_id = await old.enqueue(b"x")
    new = store.queue(qname, QueueOpts(visibility_timeout_s=99, max_attempts=9, retry_base_s=8))
    job = await new.get_job(job_id)  # another handle, other opts: the row is unchanged
    assert job is not None
    assert (job.visibility_timeout_s, job.max_attempts, job.retry_base_s) == (5.0, 2, 4.0)
    handle = await new.claim_one("w")
    assert handle is not None and handle.job.id == job_id
    assert handle.job.claim_expires_at is not None
    deadline = (handle.job.claim_expires_at - datetime.now(UTC)).total_seconds()
    assert 3 < deadline <= 5.5  # the row's 5 s, not the new handle's 99 s


async def test_payloads_are_stored_exactly(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    cases: list[tuple[object, bytes]] = [
        (b"\x00\xff raw", b"\x00\xff raw"),
        (bytearray(b"ba"), b"ba"),
        (memoryview(b"mv"), b"mv"),
        (b"", b""),
        ("text é ✓", "text é ✓".encode()),
        ("", b""),
        ({"b": [1, 2.5, None, True], "a": "é"}, '{"b":[1,2.5,null,true],"a":"é"}'.encode()),
        ([], b"[]"),
        (42, b"42"),
        (None, b"null"),
    ]
    for payload, stored in cases:
        job = await q.get_job(await q.enqueue(payload))
        assert job is not None and job.payload == stored, payload
    job = await q.get_job(await q.enqueue({"k": [1, "two"]}))
    assert job is not None and job.json() == {"k": [1, "two"]}


async def test_enqueue_many_writes_every_payload_with_one_set_of_stamps(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(priority=2))
    ids = await q.enqueue_many([b"a", "b", {"c": 1}], EnqueueOpts(delay_s=60, max_attempts=2))
    assert len(ids) == 3 and ids == sorted(ids) and len(set(ids)) == 3
    jobs = [await q.get_job(i) for i in ids]
    assert [j and j.payload for j in jobs] == [b"a", b"b", b'{"c":1}']
    assert all(j is not None and (j.priority, j.max_attempts) == (2, 2) for j in jobs)
    assert len({j and j.created_at for j in jobs}) == 1
    assert all(j is not None and j.run_at == jobs[0].run_at for j in jobs)  # type: ignore[union-attr]
    assert await q.enqueue_many([]) == []


async def test_enqueue_many_accepts_any_iterable(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    ids = await q.enqueue_many(str(i) for i in range(5))
    assert [(await q.get_job(i)).payload for i in ids] == [b"0", b"1", b"2", b"3", b"4"]  # type: ignore[union-attr]


async def test_ids_are_unique_and_increase_in_enqueue_order(
    store: alkstore.Store, qname: str
) -> None:
    a, b = store.queue(qname), store.queue(qname + "b")
    ids = []
    for i in range(20):
        ids.append(await (a if i % 2 else b).enqueue(str(i)))
    ids += await a.enqueue_many(["x"] * 10)
    assert all(type(i) is int for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


async def test_ids_are_never_reused(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    first = await q.enqueue(b"1")
    handle = await q.claim_one("w")
    assert handle is not None and await handle.ack()  # the highest id is gone
    second = await q.enqueue(b"2")
    assert second > first
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail()  # the highest id moved to dead
    third = await q.enqueue(b"3")
    assert third > second
    assert await q.cancel(third)
    assert await q.enqueue(b"4") > third


async def test_ids_are_unique_across_stores(open_store, qname: str) -> None:  # type: ignore[no-untyped-def]
    s1, s2 = await open_store(), await open_store()
    ids = [await s.queue(qname).enqueue(b"") for s in (s1, s2, s1, s2)]
    assert ids == sorted(ids) and len(set(ids)) == 4


async def test_two_handles_with_one_name_see_the_same_rows(
    store: alkstore.Store, qname: str
) -> None:
    job_id = await store.queue(qname).enqueue(b"shared")
    other = store.queue(qname, QueueOpts(priority=9))
    job = await other.get_job(job_id)
    assert job is not None and job.payload == b"shared"
    handle = await other.claim_one("w")
    assert handle is not None and handle.job.id == job_id


async def test_queue_handles_are_free_and_write_nothing(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    before = (await count_rows(store, target), catalog.row_counts(target))
    for i in range(50):
        store.queue(f"{qname}.{i}", QueueOpts(max_attempts=i + 1))
    # every table of the store, not only the job tables, is as it was
    assert (await count_rows(store, target), catalog.row_counts(target)) == before
    assert catalog.row_counts(target), "no tables were counted"
    assert await store.admin().stats() == []


async def test_get_job_is_scoped_to_its_queue(store: alkstore.Store, qname: str) -> None:
    job_id = await store.queue(qname).enqueue(b"")
    assert await store.queue(qname + "-other").get_job(job_id) is None
    assert await store.queue(qname).get_job(job_id + 1000) is None


async def test_get_job_is_a_pure_read(store: alkstore.Store, clock: Clock, qname: str) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"")
    first = await q.get_job(job_id)
    clock.advance(3600)  # a read that stamped "now" anywhere would show an hour's difference
    assert await q.get_job(job_id) == first
    assert await q.get_job(job_id) == first


async def test_enqueue_is_durable_across_reconnect(open_store, qname: str) -> None:  # type: ignore[no-untyped-def]
    s1 = await open_store()
    job_id = await s1.queue(qname).enqueue(b"kept")
    await s1.close()
    s2 = await open_store()
    job = await s2.queue(qname).get_job(job_id)
    assert job is not None and job.payload == b"kept"
