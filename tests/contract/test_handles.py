"""JobHandle: the fenced validity predicate, heartbeat, retry/backoff, dead letters."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import alkstore
from alkstore import HandleConsumedError, InvalidArgumentError, JobHandle, QueueOpts

from .conftest import Clock

SHORT = 0.3
LAPSE = 0.45


async def claim(q: alkstore.Queue, worker: str = "w") -> JobHandle:
    handle = await q.claim_one(worker)
    assert handle is not None
    return handle


async def test_ack_deletes_the_row(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"")
    handle = await claim(q)
    assert await handle.ack() is True
    assert handle.consumed
    assert await q.get_job(job_id) is None
    assert await q.claim_one("w") is None


@pytest.mark.parametrize("op", ["ack", "retry", "retry_delay", "fail", "heartbeat"])
async def test_every_handle_op_is_refused_after_lapse(
    store: alkstore.Store, clock: Clock, qname: str, op: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT, max_attempts=3))
    job_id = await q.enqueue(b"")
    handle = await claim(q)
    clock.advance(LAPSE)
    before = await q.get_job(job_id)
    call = {
        "ack": lambda: handle.ack(),
        "retry": lambda: handle.retry("e"),
        "retry_delay": lambda: handle.retry("e", delay_s=0),
        "fail": lambda: handle.fail("e"),
        "heartbeat": lambda: handle.heartbeat(30),
    }[op]
    assert await call() is False
    assert await q.get_job(job_id) == before  # nothing changed
    assert before is not None and before.state == "processing"


async def test_retry_and_fail_at_budget_are_refused_after_lapse(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT, max_attempts=1))
    ids = [await q.enqueue(b""), await q.enqueue(b"")]
    handles = await q.claim_batch("w", 2)
    clock.advance(LAPSE)
    assert await handles[0].retry() is False  # would dead-letter; refused
    assert await handles[1].fail() is False
    for job_id in ids:
        job = await q.get_job(job_id)
        assert job is not None and job.state == "processing"


async def test_a_stale_handle_cannot_touch_a_reclaimed_job(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT, max_attempts=5))
    job_id = await q.enqueue(b"")
    stale = await claim(q, "old")
    clock.advance(LAPSE)
    fresh = await claim(q, "new")
    assert fresh.job.attempts == 2
    snapshot = await q.get_job(job_id)
    # the old claim is over; its handle must not touch the new one
    assert await stale.heartbeat(60) is False
    assert await stale.heartbeat() is False
    assert await q.get_job(job_id) == snapshot
    # one-shot ops, each on a fresh stale handle object for the same old claim
    for op in ("ack", "retry", "fail"):
        old = JobHandle(q, stale.job)
        result = await (old.ack() if op == "ack" else old.retry() if op == "retry" else old.fail())
        assert result is False, op
        assert await q.get_job(job_id) == snapshot
    assert await fresh.ack() is True


async def test_the_fence_holds_even_when_the_old_claim_has_not_lapsed_yet(
    store: alkstore.Store, qname: str
) -> None:
    # retry(delay 0) then reclaim: the first handle's attempt no longer matches
    q = store.queue(qname, QueueOpts(visibility_timeout_s=60))
    job_id = await q.enqueue(b"")
    first = await claim(q)
    copy = JobHandle(q, first.job)
    assert await first.retry(delay_s=0) is True
    second = await claim(q)
    assert second.job.attempts == 2
    assert await copy.heartbeat() is False
    assert await copy.ack() is False
    assert (await q.get_job(job_id)).attempts == 2  # type: ignore[union-attr]
    assert await second.ack() is True


async def test_heartbeat_is_an_absolute_reset(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=20))
    job_id = await q.enqueue(b"")
    handle = await claim(q)
    t = datetime.now(UTC)
    assert await handle.heartbeat(100) is True
    job = await q.get_job(job_id)
    assert job is not None and job.claim_expires_at is not None
    assert abs((job.claim_expires_at - t).total_seconds() - 100) < 2
    t = datetime.now(UTC)
    assert await handle.heartbeat(5) is True  # shorter: it replaces, it does not add
    job = await q.get_job(job_id)
    assert job is not None and job.claim_expires_at is not None
    assert abs((job.claim_expires_at - t).total_seconds() - 5) < 2
    t = datetime.now(UTC)
    assert await handle.heartbeat() is True  # default: the row's visibility timeout
    job = await q.get_job(job_id)
    assert job is not None and job.claim_expires_at is not None
    assert abs((job.claim_expires_at - t).total_seconds() - 20) < 2
    assert (job.state, job.attempts) == ("processing", 1)


async def test_heartbeat_keeps_a_claim_alive_and_is_repeatable(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT))
    await q.enqueue(b"")
    handle = await claim(q)
    for _ in range(4):
        clock.advance(SHORT / 2)
        assert await handle.heartbeat() is True
    assert await q.claim_one("thief") is None  # still held, well past the first deadline
    assert await handle.heartbeat(30) is True
    clock.advance(LAPSE)
    assert await q.claim_one("thief") is None
    assert await handle.ack() is True


async def test_late_heartbeat_is_refused(store: alkstore.Store, clock: Clock, qname: str) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT))
    job_id = await q.enqueue(b"")
    handle = await claim(q)
    clock.advance(LAPSE)
    before = await q.get_job(job_id)
    assert await handle.heartbeat(60) is False
    assert await q.get_job(job_id) == before
    assert await q.claim_one("other") is not None  # the lapse stood


@pytest.mark.parametrize("extend", [0, -1, math.nan, math.inf, "5"])
async def test_bad_heartbeat_extension_is_rejected(
    store: alkstore.Store, qname: str, extend: object
) -> None:
    q = store.queue(qname)
    await q.enqueue(b"")
    handle = await claim(q)
    with pytest.raises(InvalidArgumentError):
        await handle.heartbeat(extend)  # type: ignore[arg-type]


async def test_retry_with_delay_goes_back_to_pending(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=3))
    job_id = await q.enqueue(b"")
    handle = await claim(q)
    t = datetime.now(UTC)
    assert await handle.retry("boom", delay_s=60) is True
    job = await q.get_job(job_id)
    assert job is not None
    assert (job.state, job.attempts, job.last_error) == ("pending", 1, "boom")
    assert job.worker_id is None and job.claim_expires_at is None
    assert abs((job.run_at - t).total_seconds() - 60) < 2
    assert await q.claim_one("w") is None


async def test_retry_with_zero_delay_is_claimable_at_once(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=3))
    job_id = await q.enqueue(b"")
    assert await (await claim(q)).retry(delay_s=0) is True
    again = await claim(q)
    assert (again.job.id, again.job.attempts, again.job.last_error) == (job_id, 2, None)


async def test_retry_without_error_clears_last_error(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=5))
    job_id = await q.enqueue(b"")
    assert await (await claim(q)).retry("first", delay_s=0)
    assert await (await claim(q)).retry(delay_s=0)
    job = await q.get_job(job_id)
    assert job is not None and job.last_error is None and job.attempts == 2


@pytest.mark.parametrize("attempt, base", [(1, 10), (2, 10), (3, 7), (1, 1), (1, 2.5)])
async def test_retry_without_delay_follows_the_backoff_curve(
    store: alkstore.Store, qname: str, attempt: int, base: float
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=attempt + 1, retry_base_s=base))
    e = min(base * 2 ** (attempt - 1), 3600)
    low, high = math.ceil(e / 2), math.ceil(e)
    delays = []
    for _ in range(6):
        job_id = await q.enqueue(b"")
        for _ in range(attempt - 1):  # spend earlier attempts without a backoff
            assert await (await claim(q)).retry(delay_s=0)
        handle = await claim(q)
        assert handle.job.attempts == attempt
        before = datetime.now(UTC)
        assert await handle.retry("again") is True
        after = datetime.now(UTC)
        job = await q.get_job(job_id)
        assert job is not None and job.state == "pending" and job.last_error == "again"
        assert before + timedelta(seconds=low - 1) <= job.run_at
        assert job.run_at <= after + timedelta(seconds=high + 1)
        delays.append((job.run_at - before).total_seconds())
        assert await q.cancel(job_id)
    assert all(low - 1 <= d <= high + 1 for d in delays)


async def test_backoff_is_capped_at_an_hour_end_to_end(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=3, retry_base_s=10_000))
    job_id = await q.enqueue(b"")
    handle = await claim(q)
    before = datetime.now(UTC)
    assert await handle.retry() is True
    job = await q.get_job(job_id)
    assert job is not None
    delay = (job.run_at - before).total_seconds()
    assert 1800 - 1 <= delay <= 3600 + 1


async def test_retry_at_budget_dead_letters_with_the_default_string(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=2, visibility_timeout_s=13, retry_base_s=3))
    job_id = await q.enqueue(b"payload")
    assert await (await claim(q)).retry(delay_s=0)
    last = await claim(q, "w-last")
    assert await last.retry() is True
    job = await q.get_job(job_id)
    assert job is not None
    assert (job.state, job.last_error, job.attempts, job.max_attempts) == (
        "dead",
        "max attempts exceeded",
        2,
        2,
    )
    assert job.id == job_id and job.payload == b"payload"
    assert (job.visibility_timeout_s, job.retry_base_s) == (13.0, 3.0)
    assert job.died_at is not None and job.died_at.tzinfo is UTC
    assert abs((datetime.now(UTC) - job.died_at).total_seconds()) < 5
    assert job.created_at == last.job.created_at
    assert await q.claim_one("w") is None


async def test_retry_at_budget_keeps_the_callers_error_verbatim(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    job_id = await q.enqueue(b"")
    assert await (await claim(q)).retry("Timeout: 'x' ✗\nline 2", delay_s=5) is True
    job = await q.get_job(job_id)
    assert job is not None and (job.state, job.last_error) == ("dead", "Timeout: 'x' ✗\nline 2")


async def test_fail_dead_letters_with_failed_or_the_callers_string(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=5))
    default_id = await q.enqueue(b"a")
    given_id = await q.enqueue(b"b")
    empty_id = await q.enqueue(b"c")
    assert await (await claim(q)).fail() is True
    assert await (await claim(q)).fail("  bad input: 42  ") is True
    assert await (await claim(q)).fail("") is True
    results = [await q.get_job(i) for i in (default_id, given_id, empty_id)]
    assert [(j and j.state, j and j.last_error) for j in results] == [
        ("dead", "failed"),
        ("dead", "  bad input: 42  "),
        ("dead", ""),
    ]
    dead = results[0]
    assert dead is not None and dead.attempts == 1 and dead.payload == b"a"
    assert dead.died_at is not None


async def test_dead_rows_are_visible_only_to_their_queue(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"")
    assert await (await claim(q)).fail()
    assert await store.queue(qname + "x").get_job(job_id) is None
    assert (await q.get_job(job_id)).state == "dead"  # type: ignore[union-attr]


async def test_dead_rows_are_not_claimable_nor_ackable(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"")
    assert await (await claim(q)).fail()
    assert await q.claim_one("w") is None
    assert await q.ack_batch([job_id]) == 0
    assert await q.cancel(job_id) is False
    assert (await q.get_job(job_id)).state == "dead"  # type: ignore[union-attr]


@pytest.mark.parametrize("first", ["ack", "retry", "fail"])
@pytest.mark.parametrize("second", ["ack", "retry", "fail"])
async def test_a_consumed_handle_raises_on_a_second_one_shot_op(
    store: alkstore.Store, qname: str, first: str, second: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=3))
    job_id = await q.enqueue(b"")
    handle = await claim(q)
    ops = {
        "ack": lambda: handle.ack(),
        "retry": lambda: handle.retry(delay_s=30),
        "fail": lambda: handle.fail(),
    }
    assert await ops[first]() is True
    snapshot = await q.get_job(job_id)
    with pytest.raises(HandleConsumedError):
        await ops[second]()
    assert await q.get_job(job_id) == snapshot


async def test_a_refused_op_still_consumes_the_handle(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT))
    await q.enqueue(b"")
    handle = await claim(q)
    clock.advance(LAPSE)
    assert await handle.ack() is False
    assert handle.consumed
    with pytest.raises(HandleConsumedError):
        await handle.fail()


async def test_heartbeat_after_ack_is_refused(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.enqueue(b"")
    handle = await claim(q)
    assert await handle.ack()
    assert await handle.heartbeat() is False


@pytest.mark.parametrize("error", [1, b"bytes", ["x"], "\ud800", "nul\x00"])
async def test_bad_error_strings_are_rejected_and_do_not_consume(
    store: alkstore.Store, qname: str, error: object
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=2))
    job_id = await q.enqueue(b"")
    handle = await claim(q)
    with pytest.raises(InvalidArgumentError):
        await handle.retry(error)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        await handle.fail(error)  # type: ignore[arg-type]
    assert not handle.consumed
    assert (await q.get_job(job_id)).state == "processing"  # type: ignore[union-attr]
    assert await handle.ack() is True


@pytest.mark.parametrize("delay", [-1, math.nan, math.inf, "1"])
async def test_bad_retry_delays_are_rejected(
    store: alkstore.Store, qname: str, delay: object
) -> None:
    q = store.queue(qname)
    await q.enqueue(b"")
    handle = await claim(q)
    with pytest.raises(InvalidArgumentError):
        await handle.retry(delay_s=delay)  # type: ignore[arg-type]
    assert not handle.consumed


async def test_concurrent_acks_share_a_commit_but_each_stays_fenced(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    # Acks issued at the same moment are group-committed; each must still get
    # its own answer: stale handles (same ids, older attempt) refused, fresh ones
    # and another queue's accepted.
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT))
    other = store.queue(qname + "-other")
    await q.enqueue_many([{"n": i} for i in range(10)])
    await other.enqueue(b"o")
    stale = await q.claim_batch("old", 10)
    clock.advance(LAPSE)
    fresh = await q.claim_batch("new", 10)
    assert sorted(h.job.id for h in fresh) == sorted(h.job.id for h in stale)
    foreign = await claim(other)
    # Count the engine's ack calls (the database underneath stays real).
    engine = store._engine
    calls: list[int] = []
    ack_many = engine.ack_many

    async def counting(items):  # type: ignore[no-untyped-def]
        calls.append(len(items))
        return await ack_many(items)

    engine.ack_many = counting  # type: ignore[method-assign]
    try:
        results = await asyncio.gather(*(h.ack() for h in [*stale, foreign, *fresh]))
    finally:
        del engine.ack_many  # back to the class's method
    assert results == [False] * 10 + [True] + [True] * 10
    assert calls == [21]  # one engine call, one transaction, for all 21 acks
    assert await q.claim_one("w") is None
    for h in fresh:
        assert await q.get_job(h.job.id) is None


async def test_release_gives_the_claim_back_without_counting_the_attempt(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    job_id = await q.enqueue(b"x")
    before = await q.get_job(job_id)
    handle = await claim(q)
    assert handle.job.attempts == 1
    assert await handle.release() is True
    assert handle.consumed
    after = await q.get_job(job_id)
    assert after is not None and before is not None
    assert (after.state, after.attempts, after.worker_id) == ("pending", 0, None)
    assert after.run_at == before.run_at  # keeps its place in line
    again = await claim(q, "w2")  # at max_attempts=1 it still runs once
    assert again.job.attempts == 1
    assert await again.ack() is True


async def test_release_of_a_stale_claim_is_refused(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT, max_attempts=3))
    job_id = await q.enqueue(b"")
    stale = await claim(q, "old")
    clock.advance(LAPSE)
    fresh = await claim(q, "new")  # the same job, reclaimed: attempt 2
    assert fresh.job.id == job_id and fresh.job.attempts == 2
    assert await stale.release() is False
    row = await q.get_job(job_id)
    assert row is not None and (row.state, row.attempts, row.worker_id) == ("processing", 2, "new")
    assert await fresh.release() is True


async def test_store_ack_many_is_fenced_per_job(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    # One fenced transaction for many handles: a stale claim of the same job
    # is refused (never deletes the later claim), fresh ones of two queues are acked.
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT))
    other = store.queue(qname + "-other")
    await q.enqueue_many([{"n": i} for i in range(3)])
    await other.enqueue(b"o")
    stale = await q.claim_batch("old", 3)
    clock.advance(LAPSE)
    fresh = await q.claim_batch("new", 2)  # two of the three, reclaimed: attempt 2
    foreign = await claim(other)
    answers = await store.ack_many([*stale, *fresh, foreign])
    reclaimed = {h.job.id for h in fresh}
    assert answers == [False] * 3 + [True, True, True]
    assert all(h.consumed for h in [*stale, *fresh, foreign])
    for h in stale:
        row = await q.get_job(h.job.id)
        if h.job.id in reclaimed:
            assert row is None  # acked by its fresh handle, not by the stale one
        else:  # lapsed, never reclaimed: the stale ack did not delete it
            assert row is not None and row.attempts == 1
    assert await store.ack_many([]) == []


async def test_store_ack_many_refuses_consumed_duplicate_or_foreign_handles(
    store: alkstore.Store, open_store: Any, qname: str
) -> None:
    q = store.queue(qname)
    await q.enqueue_many([b"a", b"b"])
    first, second = await q.claim_batch("w", 2)
    assert await first.ack() is True
    with pytest.raises(HandleConsumedError):
        await store.ack_many([first])
    with pytest.raises(InvalidArgumentError, match="twice"):
        await store.ack_many([second, second])
    sibling = await open_store()
    with pytest.raises(InvalidArgumentError, match="not a handle of this store"):
        await sibling.ack_many([second])
    assert not second.consumed
    assert await store.ack_many([second]) == [True]


@pytest.mark.parametrize("first", ["ack", "retry", "fail"])
@pytest.mark.parametrize("second", ["ack", "retry", "fail"])
async def test_concurrent_one_shot_ops_on_one_handle_consume_it_once(
    store: alkstore.Store, qname: str, first: str, second: str
) -> None:
    # two calls started together: the first wins, the second raises before any I/O
    q = store.queue(qname, QueueOpts(max_attempts=3))
    await q.enqueue(b"")
    handle = await claim(q)
    ops = {
        "ack": lambda: handle.ack(),
        "retry": lambda: handle.retry(delay_s=30),
        "fail": lambda: handle.fail(),
    }
    results = await asyncio.gather(ops[first](), ops[second](), return_exceptions=True)
    assert results[0] is True
    assert isinstance(results[1], HandleConsumedError)
