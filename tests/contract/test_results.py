"""Kept results: written by the fenced ack, awaited over the store's wake channel."""

from __future__ import annotations

import asyncio

import pytest

import alkstore
from alkstore import JobDeadError, ResultTimeoutError, ResultUnavailableError
from alkstore.core.results import RESULTS_CHANNEL

from .rawsql import count_rows, expire_results


async def _until_listening(store: alkstore.Store) -> None:
    """Yield until the store's result waiters have their LISTEN (a condition, not a
    duration: a fixed sleep lost this race on a loaded machine)."""
    while not store._results.listening:  # bounded by the pytest timeout
        await asyncio.sleep(0)  # a yield to the loop, not a duration


async def test_ack_result_keeps_value_outcome_attempts_and_finish_time(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue("x")
    handle = await q.claim_one("w")
    assert handle is not None
    assert await handle.ack_result({"total": 42, "items": [1, "two"]}, keep_s=3600)
    assert await count_rows(store, target) == (0, 0)  # the job row is gone
    outcome = await q.outcome(job_id)
    assert outcome is not None and outcome.outcome == "success"
    assert outcome.value == {"total": 42, "items": [1, "two"]}
    assert outcome.attempts == 1 and outcome.finished_at is not None
    assert await q.result(job_id, timeout_s=1) == {"total": 42, "items": [1, "two"]}


async def test_a_waiter_gets_the_result_committed_later_by_another_connection(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    waiter_store, worker_store = await open_store(), await open_store()
    job_id = await waiter_store.queue(qname).enqueue("x")
    waiting = asyncio.ensure_future(waiter_store.queue(qname).result(job_id, timeout_s=30))
    await _until_listening(waiter_store)
    assert not waiting.done()
    handle = await worker_store.queue(qname).claim_one("w")
    assert handle is not None and await handle.ack_result([1, 2, 3], keep_s=60)
    assert await waiting == [1, 2, 3]


async def test_a_dead_job_raises_a_typed_error_carrying_its_last_error(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue("x")
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("ValueError: bad order")
    with pytest.raises(JobDeadError) as caught:
        await q.result(job_id, timeout_s=5)
    assert caught.value.job_id == job_id and caught.value.attempts == 1
    assert caught.value.last_error == "ValueError: bad order"
    assert "bad order" in str(caught.value)


async def test_waiting_times_out_cleanly_and_leaves_no_waiter(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue("x")
    with pytest.raises(ResultTimeoutError, match=f"job {job_id}"):
        await q.result(job_id, timeout_s=0.05)
    assert store._results._waiting == {}
    with pytest.raises(alkstore.InvalidArgumentError):
        await q.result(job_id, timeout_s=0)


async def test_a_job_gone_without_a_result_is_reported_not_waited_for(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    with pytest.raises(ResultUnavailableError):
        await q.result(999_999, timeout_s=5)  # no such job
    plain = await q.enqueue("x")
    handle = await q.claim_one("w")
    assert handle is not None and await handle.ack()  # acked without a result
    with pytest.raises(ResultUnavailableError):
        await q.result(plain, timeout_s=5)


async def test_a_value_that_is_not_json_is_refused_and_writes_nothing(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    await q.enqueue("x")
    handle = await q.claim_one("w")
    assert handle is not None
    with pytest.raises(alkstore.PayloadError, match="not JSON-serialisable"):
        await handle.ack_result({1, 2}, keep_s=60)
    assert not handle.consumed
    assert await count_rows(store, target) == (1, 0)
    assert await handle.retry("the result was not JSON")


async def test_sweep_purges_expired_results(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue("x")
    handle = await q.claim_one("w")
    assert handle is not None and await handle.ack_result("done", keep_s=3600)
    assert (await q.sweep_expired()).results_purged == 0
    await expire_results(store, target)
    assert (await q.sweep_expired()).results_purged == 1
    assert await q.outcome(job_id) is None


async def test_many_waiters_share_one_listener(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    ids = await q.enqueue_many([f"job {i}" for i in range(1000)])
    waiting = [asyncio.ensure_future(q.result(i, timeout_s=60)) for i in ids]
    await _until_listening(store)
    assert len(store._hub._subs[RESULTS_CHANNEL]) == 1  # one subscription, one LISTEN
    assert store._results.listening
    handles = await q.claim_batch("w", 1000)
    assert await asyncio.gather(*(h.ack_result(h.job.id, keep_s=60) for h in handles))
    assert await asyncio.gather(*waiting) == ids


async def test_admin_lists_recent_outcomes_newest_first(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    ok, bad = await q.enqueue_many(["ok", "bad"])
    first = await q.claim_one("w")
    assert first is not None and await first.ack_result("fine", keep_s=60)
    second = await q.claim_one("w")
    assert second is not None and await second.fail("broken")
    outcomes = await store.admin().outcomes(qname)
    assert [(o.id, o.outcome) for o in outcomes] == [(bad, "dead"), (ok, "success")]
    assert outcomes[0].error == "broken" and outcomes[1].value == "fine"
    assert await store.admin().outcomes(qname, limit=1) == outcomes[:1]
