"""The blocking facade, ``alkstore.sync``: the same operations, the same semantics."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from alkstore import (
    EnqueueOpts,
    HandleConsumedError,
    InvalidArgumentError,
    InvalidNameError,
    Notification,
    QueueOpts,
    StoreClosedError,
    sync,
)

from .conftest import Clock

WAIT = 20.0


@pytest.fixture
def sstore(target) -> Iterator[sync.Store]:  # type: ignore[no-untyped-def]
    store = sync.connect(target.url, **target.connect_kwargs())
    yield store
    store.close()


@pytest.fixture
def sibling(target) -> Iterator[sync.Store]:  # type: ignore[no-untyped-def]
    store = sync.connect(target.url, **target.connect_kwargs())
    yield store
    store.close()


def test_enqueue_claim_ack(sstore: sync.Store, qname: str) -> None:
    q = sstore.queue(qname, QueueOpts(max_attempts=2))
    job_id = q.enqueue({"n": 1}, EnqueueOpts(priority=2))
    job = q.get_job(job_id)
    assert job is not None and job.json() == {"n": 1} and job.priority == 2
    handle = q.claim_one("w")
    assert handle is not None and handle.job.id == job_id and handle.job.attempts == 1
    assert handle.heartbeat(30) is True
    assert handle.ack() is True
    assert handle.consumed
    with pytest.raises(HandleConsumedError):
        handle.ack()
    assert q.get_job(job_id) is None
    assert q.claim_one("w") is None


def test_retry_fail_and_dead_letters(sstore: sync.Store, qname: str) -> None:
    q = sstore.queue(qname, QueueOpts(max_attempts=2))
    job_id = q.enqueue(b"r")
    first = q.claim_one("w")
    assert first is not None and first.retry("again", delay_s=0) is True
    second = q.claim_one("w")
    assert second is not None and second.job.attempts == 2
    assert second.retry() is True  # at budget: dead
    job = q.get_job(job_id)
    assert job is not None and (job.state, job.last_error) == ("dead", "max attempts exceeded")
    other = q.enqueue(b"f")
    handle = q.claim_one("w")
    assert handle is not None and handle.fail() is True
    assert q.get_job(other).last_error == "failed"  # type: ignore[union-attr]


def test_batch_ops_cancel_and_sweep(sstore: sync.Store, qname: str) -> None:
    clock = Clock()
    clock.install(sstore._async)
    q = sstore.queue(qname, QueueOpts(dead_letter_retention_s=0))
    ids = q.enqueue_many([b"1", b"2", b"3"])
    handles = q.claim_batch("w", 2)
    assert [h.job.id for h in handles] == ids[:2]
    assert q.claim_batch("w", 0) == []
    assert q.ack_batch([ids[0], ids[2]]) == 1
    assert q.cancel(ids[2]) is True and q.cancel(ids[2]) is False
    expiring = q.enqueue(b"e", EnqueueOpts(expires_in_s=0.1))
    clock.advance(0.2)
    assert q.sweep_expired() == (1, 0, 0, 0)
    clock.advance(0.05)
    assert q.sweep_expired() == (0, 1, 0, 0)
    assert q.get_job(expiring) is None


def test_transaction_commits_and_rolls_back(
    sstore: sync.Store, sibling: sync.Store, qname: str
) -> None:
    with sstore.transaction() as tx:
        kept = tx.queue(qname).enqueue(b"kept")
        tx.queue(qname).enqueue_many([b"m"])
        assert sibling.queue(qname).get_job(kept) is None
        assert [tuple(r) for r in tx.execute("SELECT 1")] == [(1,)]
    assert sibling.queue(qname).get_job(kept) is not None
    with pytest.raises(ZeroDivisionError), sstore.transaction() as tx:
        lost = tx.queue(qname).enqueue(b"lost")
        _ = 1 / 0
    assert sibling.queue(qname).get_job(lost) is None


def test_notify_and_listen_across_stores(sstore: sync.Store, sibling: sync.Store) -> None:
    with sibling.listen("chan") as sub:
        sstore.notify("chan", "hi")
        with sstore.transaction() as tx:
            tx.notify("chan", "from tx")
        assert sub.get(WAIT) == Notification("chan", "hi")
        assert sub.get(WAIT) == Notification("chan", "from tx")
        assert sub.get(0.3) is None
    with sibling.listen("chan") as sub:
        sstore.notify("chan", "iter")
        assert next(iter(sub)) == Notification("chan", "iter")


def test_jobs_loop_wakes_across_stores(sstore: sync.Store, sibling: sync.Store, qname: str) -> None:
    got: list[int] = []
    ready = threading.Event()

    def consume() -> None:
        q = sibling.queue(qname)
        for handle in q.jobs("sync-consumer", poll_interval_s=600):
            got.append(handle.job.id)
            handle.ack()
            if len(got) == 1:
                ready.set()
            if len(got) == 3:
                return

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    first = sstore.queue(qname).enqueue(b"1")
    assert ready.wait(WAIT)
    deadline = time.monotonic() + WAIT
    while not any(loop.idle.is_set() for loop in list(sibling._async._loops)):  # waiting now
        assert time.monotonic() < deadline
        time.sleep(0.001)  # polling the loop's readiness signal
    rest = [sstore.queue(qname).enqueue(b"2"), sstore.queue(qname).enqueue(b"3")]
    thread.join(WAIT)
    assert not thread.is_alive()
    assert got == [first, *rest]


def test_validation_is_the_same(sstore: sync.Store, qname: str) -> None:
    with pytest.raises(InvalidNameError):
        sstore.queue("_reserved")
    with pytest.raises(InvalidArgumentError):
        sstore.queue(qname).claim_one("")
    with pytest.raises(InvalidArgumentError):
        sstore.queue(qname).cancel("1")  # type: ignore[arg-type]


def test_a_closed_sync_store_fails_every_op(target, qname: str) -> None:  # type: ignore[no-untyped-def]
    store = sync.connect(target.url, **target.connect_kwargs())
    q = store.queue(qname)
    q.enqueue_many([b"1", b"2"])
    handles = q.claim_batch("w", 2)
    store.close()
    store.close()  # idempotent
    assert store.closed
    for call in (
        lambda: store.queue(qname),
        lambda: store.transaction(),
        lambda: store.notify("ch"),
        lambda: store.listen("ch"),
        lambda: q.enqueue(b""),
        lambda: q.enqueue_many([b""]),
        lambda: q.claim_one("w"),
        lambda: q.claim_batch("w", 1),
        lambda: q.ack_batch([1]),
        lambda: q.cancel(1),
        lambda: q.get_job(1),
        lambda: q.sweep_expired(),
        lambda: next(iter(q.jobs("w"))),
        lambda: handles[0].ack(),
        lambda: handles[0].retry(),
        lambda: handles[0].fail(),
        lambda: handles[1].heartbeat(),
    ):
        with pytest.raises(StoreClosedError):
            call()


def test_sync_with_closes_the_store(target, qname: str) -> None:  # type: ignore[no-untyped-def]
    with sync.connect(target.url, **target.connect_kwargs()) as store:
        store.queue(qname).enqueue(b"")
    assert store.closed


def test_the_sync_admin_lists_counts_and_requeues(sstore: sync.Store, qname: str) -> None:
    q = sstore.queue(qname)
    job_id = q.enqueue(b"x")
    handle = q.claim_one("w")
    assert handle is not None and handle.fail("boom")
    admin = sstore.admin()
    assert [j.id for j in admin.list_jobs(qname, "dead")] == [job_id]
    found = admin.find_job(job_id)
    assert found is not None and found.state == "dead"
    stats = {s.queue: s for s in admin.stats()}
    assert stats[qname].dead == 1 and stats[qname].pending == 0
    assert [i.queue for i in admin.queues_page(limit=1)] == [qname]
    assert admin.queues_page(after=qname) == [] and admin.workers_page(limit=1) == []
    assert admin.requeue(job_id) is True
    assert admin.requeue(job_id) is False
    again = q.claim_one("w")
    assert again is not None and again.job.id == job_id and again.ack()


def test_a_sync_subscription_reports_closed(sstore: sync.Store) -> None:
    sub = sstore.listen("c")
    with sub:
        assert not sub.closed
        sstore.notify("c", "hi")
        assert sub.wait(WAIT) is True
    assert sub.closed


def test_dedupe_and_results_have_blocking_twins(
    sstore: sync.Store, sibling: sync.Store, qname: str
) -> None:
    q = sstore.queue(qname)
    first = q.enqueue_unique("a", EnqueueOpts(dedupe_key="k"))
    assert q.enqueue_unique("b", EnqueueOpts(dedupe_key="k")) == (first.id, True)
    assert q.enqueue_many(["c", "d"], dedupe_keys=["k", None])[0] == first.id
    assert [e.duplicate for e in q.enqueue_many_unique(["e"], dedupe_keys=["j"])] == [False]
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(sibling.queue(qname).result(first.id, 20)))
    waiter.start()
    handle = q.claim_one("w")
    assert handle is not None and handle.job.id == first.id
    assert handle.ack_result({"ok": True}, keep_s=60)
    waiter.join(WAIT)
    assert got == [{"ok": True}]
    outcome = q.wait_outcome(first.id, 1)
    assert outcome.outcome == "success" and q.outcome(first.id) == outcome
