"""ack_batch, cancel and sweep_expired (with retention)."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import EnqueueOpts, InvalidArgumentError, QueueOpts

from .conftest import Clock

SHORT = 0.3
LAPSE = 0.45


async def test_ack_batch_counts_only_valid_claims_of_its_queue(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=60))
    short = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT))
    other = store.queue(qname + "-other", QueueOpts(visibility_timeout_s=60))

    valid_a = await q.enqueue(b"a")
    valid_b = await q.enqueue(b"b")
    claimed = await q.claim_batch("w1", 2)
    assert {h.job.id for h in claimed} == {valid_a, valid_b}
    valid_c = await q.enqueue(b"c")
    assert (await q.claim_one("another-worker")).job.id == valid_c  # type: ignore[union-attr]
    dead = await q.enqueue(b"dead")
    assert await (await q.claim_one("w1")).fail()  # type: ignore[union-attr]
    foreign = await other.enqueue(b"foreign")
    assert (await other.claim_one("w1")) is not None
    lapsed = await short.enqueue(b"lapsed")
    assert (await short.claim_one("w0")).job.id == lapsed  # type: ignore[union-attr]
    clock.advance(LAPSE)
    pending = await q.enqueue(b"pending")
    unknown = max(lapsed, valid_a, valid_b, valid_c, pending, foreign, dead) + 1000

    ids = [lapsed, valid_a, pending, foreign, unknown, valid_b, dead, valid_c, valid_a]
    assert await q.ack_batch(ids) == 3  # no worker filter: valid_c was another worker's

    for gone in (valid_a, valid_b, valid_c):
        assert await q.get_job(gone) is None
    assert (await q.get_job(lapsed)).state == "processing"  # type: ignore[union-attr]
    assert (await q.get_job(pending)).state == "pending"  # type: ignore[union-attr]
    assert (await other.get_job(foreign)).state == "processing"  # type: ignore[union-attr]
    assert (await q.get_job(dead)).state == "dead"  # type: ignore[union-attr]


async def test_ack_batch_of_nothing_is_zero(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    assert await q.ack_batch([]) == 0
    assert await q.ack_batch(iter([])) == 0


async def test_ack_batch_of_a_large_claim(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.enqueue_many([b"x"] * 500)
    handles = await q.claim_batch("w", 500)
    assert len(handles) == 500
    assert await q.ack_batch(h.job.id for h in handles) == 500
    assert await q.claim_one("w") is None


@pytest.mark.parametrize("ids", [1, "12", [1, "2"], [1.0], [None], [True]])
async def test_ack_batch_rejects_bad_ids(store: alkstore.Store, qname: str, ids: object) -> None:
    with pytest.raises(InvalidArgumentError):
        await store.queue(qname).ack_batch(ids)  # type: ignore[arg-type]


async def test_handle_after_ack_batch_is_refused(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.enqueue(b"")
    handle = await q.claim_one("w")
    assert handle is not None
    assert await q.ack_batch([handle.job.id]) == 1
    assert await handle.ack() is False


async def test_cancel_deletes_a_pending_job(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"", EnqueueOpts(delay_s=3600))
    assert await q.cancel(job_id) is True
    assert await q.get_job(job_id) is None
    assert await q.cancel(job_id) is False


async def test_cancel_deletes_a_processing_job_and_its_handle_is_refused(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"")
    handle = await q.claim_one("w")
    assert handle is not None
    assert await q.cancel(job_id) is True
    assert await q.get_job(job_id) is None
    assert await handle.heartbeat() is False
    assert await handle.retry(delay_s=0) is False
    assert await q.get_job(job_id) is None  # the refused retry did not bring it back


async def test_cancel_is_false_when_there_is_no_live_row(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"")
    assert await store.queue(qname + "-other").cancel(job_id) is False  # another queue's
    assert await q.cancel(job_id + 1000) is False  # unknown
    assert await q.cancel(-1) is False
    assert await (await q.claim_one("w")).fail()  # type: ignore[union-attr]
    assert await q.cancel(job_id) is False  # dead rows are not live
    assert (await q.get_job(job_id)).state == "dead"  # type: ignore[union-attr]


@pytest.mark.parametrize("job_id", ["1", 1.0, None, 2**64])
async def test_cancel_and_get_job_reject_bad_ids(
    store: alkstore.Store, qname: str, job_id: object
) -> None:
    q = store.queue(qname)
    with pytest.raises(InvalidArgumentError):
        await q.cancel(job_id)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        await q.get_job(job_id)  # type: ignore[arg-type]


async def test_sweep_expired_moves_expired_rows_in_both_states(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=60))
    pending = await q.enqueue(b"p", EnqueueOpts(expires_in_s=SHORT, delay_s=3600))
    processing = await q.enqueue(b"r", EnqueueOpts(expires_in_s=SHORT))
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.id == processing
    keep = await q.enqueue(b"k", EnqueueOpts(expires_in_s=3600))
    forever = await q.enqueue(b"f")
    other = store.queue(qname + "-other")
    elsewhere = await other.enqueue(b"o", EnqueueOpts(expires_in_s=SHORT))
    clock.advance(LAPSE)

    result = await q.sweep_expired()
    assert result == alkstore.SweepResult(expired=2, purged=0)
    for job_id in (pending, processing):
        job = await q.get_job(job_id)
        assert job is not None
        assert (job.state, job.last_error) == ("dead", "expired")
        assert job.died_at is not None and job.expires_at is not None
    assert (await q.get_job(keep)).state == "pending"  # type: ignore[union-attr]
    assert (await q.get_job(forever)).state == "pending"  # type: ignore[union-attr]
    assert (await other.get_job(elsewhere)).state == "pending"  # type: ignore[union-attr]
    assert await handle.ack() is False  # its row moved to dead
    assert await q.sweep_expired() == (0, 0, 0, 0)


async def test_sweep_expired_keeps_the_row_whole(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=60, max_attempts=4, retry_base_s=2))
    job_id = await q.enqueue(b"whole", EnqueueOpts(expires_in_s=SHORT, priority=3))
    handle = await q.claim_one("w")
    assert handle is not None
    clock.advance(LAPSE)
    await q.sweep_expired()
    job = await q.get_job(job_id)
    assert job is not None
    assert (job.id, job.payload, job.priority, job.attempts) == (job_id, b"whole", 3, 1)
    assert (job.max_attempts, job.visibility_timeout_s, job.retry_base_s) == (4, 60.0, 2.0)
    assert job.created_at == handle.job.created_at


async def test_retention_purges_old_dead_rows(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(dead_letter_retention_s=SHORT))
    old = await q.enqueue(b"old")
    assert await (await q.claim_one("w")).fail()  # type: ignore[union-attr]
    other = store.queue(qname + "-other", QueueOpts(dead_letter_retention_s=SHORT))
    theirs = await other.enqueue(b"theirs")
    assert await (await other.claim_one("w")).fail()  # type: ignore[union-attr]
    assert await q.sweep_expired() == (0, 0, 0, 0)  # died just now: kept
    assert (await q.get_job(old)).state == "dead"  # type: ignore[union-attr]
    clock.advance(LAPSE)
    young = await q.enqueue(b"young")
    assert await (await q.claim_one("w")).fail()  # type: ignore[union-attr]
    assert await q.sweep_expired() == (0, 1, 0, 0)
    assert await q.get_job(old) is None
    assert (await q.get_job(young)).state == "dead"  # type: ignore[union-attr]
    assert (await other.get_job(theirs)).state == "dead"  # type: ignore[union-attr]


async def test_retention_comes_from_the_sweeping_handle(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    job_id = await store.queue(qname).enqueue(b"")
    assert await (await store.queue(qname).claim_one("w")).fail()  # type: ignore[union-attr]
    clock.advance(LAPSE)
    forever = store.queue(qname)  # dead_letter_retention_s=None
    assert await forever.sweep_expired() == (0, 0, 0, 0)
    assert (await forever.get_job(job_id)).state == "dead"  # type: ignore[union-attr]
    short = store.queue(qname, QueueOpts(dead_letter_retention_s=SHORT))
    assert await short.sweep_expired() == (0, 1, 0, 0)
    assert await short.get_job(job_id) is None


async def test_expired_and_purged_in_one_sweep(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(dead_letter_retention_s=SHORT))
    dead = await q.enqueue(b"")
    assert await (await q.claim_one("w")).fail()  # type: ignore[union-attr]
    expiring = await q.enqueue(b"", EnqueueOpts(expires_in_s=SHORT))
    clock.advance(LAPSE)
    assert await q.sweep_expired() == (1, 1, 0, 0)  # the just-expired row is young: not purged
    assert await q.get_job(dead) is None
    assert (await q.get_job(expiring)).last_error == "expired"  # type: ignore[union-attr]


async def test_zero_retention_purges_every_dead_row(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(dead_letter_retention_s=0))
    ids = await q.enqueue_many([b"1", b"2"])
    for h in await q.claim_batch("w", 2):
        assert await h.fail()
    clock.advance(0.05)
    assert await q.sweep_expired() == (0, 2, 0, 0)
    assert [await q.get_job(i) for i in ids] == [None, None]
