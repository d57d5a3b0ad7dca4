"""claim_one / claim_batch: exactly once, order, attempts, deadlines, the pre-claim sweep."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

import alkstore
from alkstore import EnqueueOpts, InvalidArgumentError, QueueOpts

from .conftest import Clock

SHORT = 0.3  # a visibility timeout that lapses within a test
LAPSE = 0.45  # advance the test clock this far to see it lapse


async def test_claim_marks_the_row_processing(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=60))
    job_id = await q.enqueue(b"p")
    handle = await q.claim_one("worker-1")
    assert handle is not None
    job = handle.job
    assert (job.id, job.state, job.attempts, job.worker_id) == (job_id, "processing", 1, "worker-1")
    assert job.payload == b"p"
    stored = await q.get_job(job_id)
    assert stored is not None
    assert (stored.state, stored.attempts, stored.worker_id) == ("processing", 1, "worker-1")
    assert stored.claim_expires_at == job.claim_expires_at
    assert await q.claim_one("worker-2") is None  # in flight: not claimable


async def test_the_deadline_comes_from_the_rows_stamp(store: alkstore.Store, qname: str) -> None:
    job_id = await store.queue(qname, QueueOpts(visibility_timeout_s=120)).enqueue(b"")
    claimer = store.queue(qname, QueueOpts(visibility_timeout_s=1))
    before = datetime.now(UTC)
    handle = await claimer.claim_one("w")
    after = datetime.now(UTC)
    assert handle is not None and handle.job.id == job_id
    deadline = handle.job.claim_expires_at
    assert deadline is not None
    assert before + timedelta(seconds=119) <= deadline <= after + timedelta(seconds=121)


async def test_empty_queue_claims_nothing(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    assert await q.claim_one("w") is None
    assert await q.claim_batch("w", 10) == []


@pytest.mark.parametrize("n", [0, -1, -1000])
async def test_extent_guard_returns_empty_without_a_statement(
    store: alkstore.Store, qname: str, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = store.queue(qname)
    await q.enqueue(b"")

    async def no_claim(*args: object) -> list[object]:
        raise AssertionError("the engine was asked to claim")

    monkeypatch.setattr(store._engine, "claim", no_claim)
    assert await q.claim_batch("w", n) == []
    monkeypatch.undo()
    assert len(await q.claim_batch("w", 5)) == 1  # the row was there all along


@pytest.mark.parametrize("n", [1.0, "3", None, True])
async def test_claim_batch_n_must_be_an_int(store: alkstore.Store, qname: str, n: object) -> None:
    with pytest.raises(InvalidArgumentError):
        await store.queue(qname).claim_batch("w", n)  # type: ignore[arg-type]


async def test_claim_batch_takes_at_most_n(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    ids = await q.enqueue_many([str(i) for i in range(7)])
    first = await q.claim_batch("w", 3)
    second = await q.claim_batch("w", 10)
    assert [h.job.id for h in first] == ids[:3]
    assert [h.job.id for h in second] == ids[3:]
    assert await q.claim_batch("w", 10) == []


async def test_two_workers_one_row(open_store, qname: str) -> None:  # type: ignore[no-untyped-def]
    s1, s2 = await open_store(), await open_store()
    for _ in range(20):
        job_id = await s1.queue(qname).enqueue(b"one")
        results = await asyncio.gather(
            s1.queue(qname).claim_one("a"),
            s2.queue(qname).claim_one("b"),
            s1.queue(qname).claim_batch("c", 5),
            s2.queue(qname).claim_batch("d", 5),
        )
        handles = [r for r in results[:2] if r is not None]
        handles += [h for r in results[2:] for h in r]  # type: ignore[union-attr]
        assert [h.job.id for h in handles] == [job_id]
        assert await handles[0].ack()


async def test_claim_order_is_priority_then_run_at_then_enqueue_order(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    now = datetime.now(UTC)
    earlier, earliest = now - timedelta(seconds=10), now - timedelta(seconds=20)
    expected = []
    # (label, priority, run_at); enqueued in this order
    rows = [
        ("low-now-1", 0, now),
        ("high-earlier", 5, earlier),
        ("low-earliest", 0, earliest),
        ("high-now-1", 5, now),
        ("low-now-2", 0, now),
        ("neg", -5, earliest),
        ("high-now-2", 5, now),
        ("mid-earliest", 1, earliest),
    ]
    ids = {}
    for label, priority, run_at in rows:
        ids[label] = await q.enqueue(label, EnqueueOpts(priority=priority, run_at=run_at))
    expected = [
        "high-earlier",
        "high-now-1",
        "high-now-2",
        "mid-earliest",
        "low-earliest",
        "low-now-1",
        "low-now-2",
        "neg",
    ]
    batch = await q.claim_batch("w", 3)
    singles = [await q.claim_one("w") for _ in range(5)]
    got = [h.job.payload.decode() for h in batch] + [
        h.job.payload.decode() for h in singles if h is not None
    ]
    assert got == expected
    assert [h.job.id for h in batch] == [ids[label] for label in expected[:3]]


async def test_equal_priority_and_run_at_claim_in_id_order(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    at = datetime.now(UTC) - timedelta(seconds=1)
    ids = [await q.enqueue(str(i), EnqueueOpts(run_at=at)) for i in range(10)]
    ids += await q.enqueue_many(["m"] * 5, EnqueueOpts(run_at=at))
    assert [h.job.id for h in await q.claim_batch("w", 15)] == ids


async def test_delayed_job_is_not_claimable_until_due(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"", EnqueueOpts(delay_s=SHORT))
    future = await q.enqueue(b"", EnqueueOpts(run_at=datetime.now(UTC) + timedelta(hours=1)))
    assert await q.claim_one("w") is None
    clock.advance(LAPSE)
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.id == job_id
    assert await q.claim_one("w") is None
    assert (await q.get_job(future)).state == "pending"  # type: ignore[union-attr]


async def test_expired_job_is_not_claimable(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"", EnqueueOpts(expires_in_s=0.2))
    clock.advance(0.35)
    assert await q.claim_one("w") is None
    job = await q.get_job(job_id)
    assert job is not None and job.state == "pending"  # still there until sweep_expired


async def test_expired_lapsed_claim_is_not_reclaimed(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=0.2))
    await q.enqueue(b"", EnqueueOpts(expires_in_s=0.3))
    assert await q.claim_one("w") is not None
    clock.advance(LAPSE)
    assert await q.claim_one("w") is None


async def test_reclaim_consumes_an_attempt(store: alkstore.Store, clock: Clock, qname: str) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT, max_attempts=3))
    job_id = await q.enqueue(b"r")
    first = await q.claim_one("w1")
    assert first is not None and first.job.attempts == 1
    assert await q.claim_one("w2") is None  # not lapsed yet
    clock.advance(LAPSE)
    second = await q.claim_one("w2")
    assert second is not None
    assert (second.job.id, second.job.attempts, second.job.worker_id) == (job_id, 2, "w2")
    assert second.job.claim_expires_at > first.job.claim_expires_at  # type: ignore[operator]
    clock.advance(LAPSE)
    third = await q.claim_one("w3")
    assert third is not None and third.job.attempts == 3


async def test_pre_claim_sweep_dead_letters_an_exhausted_lapsed_claim(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT, max_attempts=2))
    job_id = await q.enqueue(b"doomed")
    assert await q.claim_one("w") is not None
    clock.advance(LAPSE)
    last = await q.claim_one("w")
    assert last is not None and last.job.attempts == 2  # the last allowed claim
    clock.advance(LAPSE)  # ... and its worker died
    other = await q.enqueue(b"fine")
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.id == other
    job = await q.get_job(job_id)
    assert job is not None
    assert (job.state, job.last_error, job.attempts) == ("dead", "max attempts exceeded", 2)
    assert job.payload == b"doomed" and job.died_at is not None


async def test_pre_claim_sweep_runs_even_when_nothing_is_claimable(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT, max_attempts=1))
    job_id = await q.enqueue(b"")
    assert await q.claim_one("w") is not None
    clock.advance(LAPSE)
    assert await q.claim_batch("w", 3) == []
    job = await q.get_job(job_id)
    assert job is not None and (job.state, job.last_error) == ("dead", "max attempts exceeded")


async def test_pre_claim_sweep_leaves_unlapsed_and_other_queues_alone(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    opts = QueueOpts(visibility_timeout_s=SHORT, max_attempts=1)
    mine, theirs = store.queue(qname, opts), store.queue(qname + "-b", opts)
    lapsing = await theirs.enqueue(b"")
    assert await theirs.claim_one("w") is not None
    live = await mine.enqueue(b"", EnqueueOpts())
    long_q = store.queue(qname, QueueOpts(visibility_timeout_s=60, max_attempts=1))
    holding = await long_q.enqueue(b"")
    got = await mine.claim_batch("w", 2)
    assert {h.job.id for h in got} == {live, holding}
    clock.advance(LAPSE)
    assert await mine.claim_one("w") is None
    # the other queue's lapsed, exhausted row is not touched by this queue's sweep
    assert (await theirs.get_job(lapsing)).state == "processing"  # type: ignore[union-attr]
    # the unexpired claim (60 s) stays in flight
    assert (await mine.get_job(holding)).state == "processing"  # type: ignore[union-attr]


async def test_claims_are_scoped_to_their_queue(store: alkstore.Store, qname: str) -> None:
    a, b = store.queue(qname + "a"), store.queue(qname + "b")
    id_a = await a.enqueue(b"a")
    assert await b.claim_one("w") is None
    id_b = await b.enqueue(b"b")
    ha, hb = await a.claim_batch("w", 5), await b.claim_batch("w", 5)
    assert [h.job.id for h in ha] == [id_a] and [h.job.id for h in hb] == [id_b]


async def test_worker_id_is_recorded_verbatim(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.enqueue(b"")
    name = "host-1:pid 42 ✓ 'quoted' \"double\" ; DROP TABLE x"
    handle = await q.claim_one(name)
    assert handle is not None and handle.job.worker_id == name
    assert (await q.get_job(handle.job.id)).worker_id == name  # type: ignore[union-attr]


@pytest.mark.parametrize("worker_id", ["", None, 3, b"w"])
async def test_bad_worker_ids_are_rejected(
    store: alkstore.Store, qname: str, worker_id: object
) -> None:
    q = store.queue(qname)
    await q.enqueue(b"")
    with pytest.raises(InvalidArgumentError):
        await q.claim_one(worker_id)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        await q.claim_batch(worker_id, 1)  # type: ignore[arg-type]
    assert (await q.claim_one("w")) is not None  # nothing was claimed by the bad calls


async def test_a_huge_n_claims_everything(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    ids = await q.enqueue_many([b"1", b"2", b"3"])
    assert [h.job.id for h in await q.claim_batch("w", 2**70)] == ids


async def test_the_claimed_snapshot_is_the_stored_row(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=3))
    job_id = await q.enqueue({"k": 1}, EnqueueOpts(priority=2, expires_in_s=600))
    first = await q.claim_one("w")
    assert first is not None and first.job == await q.get_job(job_id)
    assert await first.retry("why", delay_s=0)
    second = await q.claim_one("w2")
    assert second is not None and second.job == await q.get_job(job_id)
    assert second.job.last_error == "why"  # the previous attempt's error stays visible
