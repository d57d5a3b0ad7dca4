"""Live workers and outcome history (migration 0003), and admin cancel/requeue by id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import alkstore
from alkstore import InvalidArgumentError, InvalidNameError
from alkstore.bookkeeping import Bookkeeping

from .conftest import Clock


async def test_a_worker_registers_refreshes_and_is_removed(
    store: alkstore.Store, clock: Clock
) -> None:
    admin = store.admin()
    books = Bookkeeping(store)
    assert await admin.workers() == []
    await books.report_worker("w-1", "host-a", 4242, ["emails", "reports"], 8, 0)
    [first] = await admin.workers()
    assert (first.id, first.host, first.pid) == ("w-1", "host-a", 4242)
    assert first.queues == ("emails", "reports") and first.concurrency == 8
    assert first.running == 0 and first.alive
    assert abs(first.started_at - datetime.now(UTC)) < timedelta(minutes=1)
    clock.advance(0.02)
    await books.report_worker("w-1", "host-a", 4242, ["emails", "reports"], 8, 5)
    [again] = await admin.workers()
    assert again.running == 5
    assert again.started_at == first.started_at  # kept on refresh
    assert again.last_seen > first.last_seen
    assert await books.remove_worker("w-1") is True
    assert await books.remove_worker("w-1") is False
    assert await admin.workers() == []


async def test_a_worker_unseen_for_a_while_is_gone_then_purged(
    store: alkstore.Store, clock: Clock
) -> None:
    admin = store.admin()
    books = Bookkeeping(store)
    await books.report_worker("old", "h", 1, ["q"], 1, 0)
    clock.advance(0.3)
    await books.report_worker("fresh", "h", 2, ["q"], 1, 0)
    by_id = {w.id: w for w in await admin.workers(gone_after_s=0.2)}
    assert not by_id["old"].alive and by_id["fresh"].alive
    assert by_id["old"].seen_ago_s >= 0.2
    assert await books.purge_workers(0.2) == 1
    assert [w.id for w in await admin.workers()] == ["fresh"]


async def test_outcome_counts_add_up_per_queue_minute_and_outcome(store: alkstore.Store) -> None:
    admin = store.admin()
    books = Bookkeeping(store)
    assert await admin.outcome_history() == []
    await books.record_outcomes([("a", "success", 3), ("a", "retry", 1), ("b", "dead", 0)])
    await books.record_outcomes([("a", "success", 2), ("b", "dead", 4)])
    history = await admin.outcome_history(60)
    totals = {(h.queue, h.outcome): h.jobs for h in history}
    assert totals == {("a", "success"): 5, ("a", "retry"): 1, ("b", "dead"): 4}
    now = datetime.now(UTC)
    for h in history:
        assert h.minute.second == 0 and now - h.minute < timedelta(minutes=2)


@pytest.mark.parametrize(
    ("counts", "error"),
    [
        ([("a", "exploded", 1)], InvalidArgumentError),
        ([("a", "success", -1)], InvalidArgumentError),
        ([("a", "success", 1.5)], InvalidArgumentError),
        ([("bad name!", "success", 1)], InvalidNameError),
    ],
)
async def test_bad_outcome_counts_are_refused_and_nothing_is_written(
    store: alkstore.Store, counts: list[tuple[str, str, int]], error: type[Exception]
) -> None:
    admin = store.admin()
    books = Bookkeeping(store)
    with pytest.raises(error):
        await books.record_outcomes([("ok", "success", 1), *counts])
    assert await admin.outcome_history() == []


async def test_bad_worker_reports_are_refused(store: alkstore.Store) -> None:
    admin = store.admin()
    books = Bookkeeping(store)
    with pytest.raises(InvalidArgumentError, match="pid"):
        await books.report_worker("w", "h", -1, ["q"], 1, 0)
    with pytest.raises(InvalidNameError):
        await books.report_worker("w", "h", 1, ["no spaces allowed"], 1, 0)
    with pytest.raises(InvalidArgumentError, match="host"):
        await books.report_worker("w", "", 1, ["q"], 1, 0)
    with pytest.raises(InvalidArgumentError, match="minutes"):
        await admin.outcome_history(0)
    assert await admin.workers() == []


async def test_admin_cancel_and_requeue_many_by_id(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    live, dead_a, dead_b = await q.enqueue_many([b"live", b"a", b"b"])
    for _ in range(2):
        handle = await q.claim_one("w")
        assert handle is not None
        if handle.job.id != live:
            await handle.fail("x")
    # live was claimed first (id order) and is processing: cancel deletes it
    admin = store.admin()
    assert await admin.cancel(live) is True
    assert await admin.cancel(live) is False
    assert await admin.cancel(dead_a) is False  # dead: nothing live to cancel
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("y")
    assert await admin.requeue_many([dead_a, dead_b, dead_b, 10**9]) == 2
    states = [(await admin.find_job(i)).state for i in (dead_a, dead_b)]  # type: ignore[union-attr]
    assert states == ["pending", "pending"]
    with pytest.raises(InvalidArgumentError):
        await admin.requeue_many([0])
