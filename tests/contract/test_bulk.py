"""Bulk actions by filter (alkstore/bulk.py): dry run, batches, audit, resume; both engines."""

from __future__ import annotations

import asyncio

import pytest

import alkstore
from alkstore import EnqueueOpts, InvalidArgumentError, QueueOpts


async def _dead(store: alkstore.Store, queue: str, n: int, error: str = "boom") -> list[int]:
    q = store.queue(queue, QueueOpts(max_attempts=1))
    ids = await q.enqueue_many([f"job {i}".encode() for i in range(n)])
    for h in await q.claim_batch("w", n):
        assert await h.fail(error)
    return ids


async def _states(store: alkstore.Store, where: str) -> dict[int, str]:
    page = await store.admin().find(where, limit=1000)
    return {j.id: j.state for j in page.jobs}


async def test_a_dry_run_counts_and_samples_without_changing_anything(
    store: alkstore.Store, qname: str
) -> None:
    dead = await _dead(store, qname, 30)
    live = await store.queue(qname).enqueue(b"live")
    ops = store.admin().bulk()
    preview = await ops.preview("retry", f"queue:{qname}", sample=5)
    assert preview.count == 30  # the live due job is not a retry's
    assert [j.id for j in preview.sample] == dead[:5]
    assert (await ops.preview("cancel", f"queue:{qname}")).count == 1
    assert (await ops.preview("cancel", f"queue:{qname} state:dead")).count == 0
    states = await _states(store, f"queue:{qname}")
    assert list(states.values()).count("dead") == 30 and states[live] == "pending"
    assert await ops.history() == []


async def test_a_bulk_retry_requeues_every_match_in_batches_and_writes_its_audit_row(
    store: alkstore.Store, qname: str
) -> None:
    dead = await _dead(store, qname, 23, "SMTP timeout")
    other = await _dead(store, qname + "-x", 3)
    ops = store.admin().bulk()
    action = await ops.start("retry", f"queue:{qname} error:timeout", actor="alice")
    assert (action.matched, action.done, action.phase) == (23, 0, "live")
    assert not action.finished and action.finished_at is None
    seen = []
    done = await ops.run(action.id, batch=5, on_batch=seen.append)
    assert done.finished and done.done == 23 and done.finished_at is not None
    assert [a.done for a in seen] == [0, 5, 10, 15, 20, 23]  # the live phase, then 5 batches
    states = await _states(store, f"queue:{qname},{qname}-x")
    assert {states[i] for i in dead} == {"pending"}
    assert {states[i] for i in other} == {"dead"}
    q = store.queue(qname)
    job = await q.get_job(dead[0])
    assert job is not None and job.attempts == 0 and job.last_error == "SMTP timeout"
    handles = await q.claim_batch("w2", 100)  # claimable now
    assert sorted(h.job.id for h in handles) == dead
    [audit] = await ops.history()
    assert (audit.id, audit.actor, audit.action, audit.done) == (action.id, "alice", "retry", 23)
    assert audit.filter == f"queue:{qname} error:timeout"
    assert await ops.run(action.id) == audit  # a finished action runs no more


async def test_retry_makes_a_delayed_job_due_and_leaves_running_ones_alone(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    delayed = await q.enqueue(b"d", EnqueueOpts(delay_s=3600))
    running = await q.enqueue(b"r")
    h = await q.claim_one("w")
    assert h is not None and h.job.id == running
    done = await store.admin().bulk().apply("retry", f"queue:{qname}", actor="t")
    assert done.done == 1
    got = await q.claim_one("w")
    assert got is not None and got.job.id == delayed
    assert await h.ack()  # the running job's claim was untouched


async def test_cancel_deletes_live_jobs_and_tells_a_running_ones_worker(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    dead = await _dead(store, qname, 1)
    waiting = await q.enqueue_many([b"a", b"b"])
    running = await q.enqueue(b"r", EnqueueOpts(priority=9))
    h = await q.claim_one("w")
    assert h is not None and h.job.id == running
    async with store.listen(qname) as sub:
        done = await store.admin().bulk().apply("cancel", f"queue:{qname}", actor="t")
        async for note in sub:
            if note.payload:
                assert note.payload == f"cancel:{running}"
                break
    assert done.done == 3
    assert await _states(store, f"queue:{qname}") == {dead[0]: "dead"}
    assert not await h.ack()
    assert waiting


async def test_delete_removes_dead_jobs_only(store: alkstore.Store, qname: str) -> None:
    dead = await _dead(store, qname, 4)
    live = await store.queue(qname).enqueue(b"x")
    done = await store.admin().bulk().apply("delete", f"queue:{qname}", actor="t", batch=3)
    assert done.done == 4
    assert await _states(store, f"queue:{qname}") == {live: "pending"}
    assert dead


async def test_priority_changes_waiting_and_dead_jobs(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    [dead] = await _dead(store, qname, 1)
    low = await q.enqueue_many([b"1", b"2"])
    high = await q.enqueue(b"h", EnqueueOpts(priority=5))
    ops = store.admin().bulk()
    done = await ops.apply("priority", f"queue:{qname}", actor="t", priority=10)
    assert done.done == 4 and done.priority == 10
    got = await q.get_job(dead)
    assert got is not None and got.priority == 10
    first = await q.claim_one("w")  # all at 10 now: claim order falls back to run_at, id
    assert first is not None and first.job.id in low and first.job.priority == 10
    assert high


async def test_move_puts_waiting_and_dead_jobs_in_another_queue_claimable_there(
    store: alkstore.Store, qname: str
) -> None:
    src = store.queue(qname)
    [dead] = await _dead(store, qname, 1)
    keyed = await src.enqueue_unique(b"k", EnqueueOpts(dedupe_key="k1"))
    plain = await src.enqueue(b"p", EnqueueOpts(delay_s=3600))
    running = await src.enqueue(b"r", EnqueueOpts(priority=5))
    h = await src.claim_one("w")
    assert h is not None and h.job.id == running
    dst = qname + "-to"
    ops = store.admin().bulk()
    with pytest.raises(InvalidArgumentError, match="target queue"):
        await ops.start("move", f"queue:{qname}", actor="t", to_queue="bad name")
    moved = await ops.apply("move", f"queue:{qname}", actor="t", to_queue=dst)
    assert moved.done == 3 and moved.to_queue == dst
    assert await _states(store, f"queue:{qname}") == {running: "processing"}
    assert await _states(store, f"queue:{dst}") == {
        dead: "dead",
        keyed.id: "pending",
        plain: "pending",
    }
    got = await store.queue(dst).claim_batch("w", 10)
    assert [g.job.id for g in got] == [keyed.id]  # the delayed one stays delayed
    again = await store.queue(dst).enqueue_unique(b"k2", EnqueueOpts(dedupe_key="k1"))
    assert not again.duplicate  # the moved job left its dedupe key behind
    assert await h.ack()


async def test_an_action_run_in_steps_or_by_two_runners_at_once_changes_each_job_once(
    store: alkstore.Store,
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    dead = await _dead(store, qname, 40)
    ops = store.admin().bulk()
    action = await ops.start("retry", f"queue:{qname} state:dead", actor="t")
    part = await ops.run(action.id, batch=7, max_batches=2)
    assert (part.done, part.phase, part.after_id) == (14, "dead", dead[13])
    other = await open_store()
    a, b = await asyncio.gather(
        ops.run(action.id, batch=3), other.admin().bulk().run(action.id, batch=4)
    )
    assert a.finished and b.finished
    final = await ops.get(action.id)
    assert final is not None and final.done == 40
    assert a == b == final  # the later runner found it finished and left it as it was
    assert set((await _states(store, f"queue:{qname}")).values()) == {"pending"}


async def test_bad_bulk_requests_are_refused_naming_the_bad_value(store: alkstore.Store) -> None:
    ops = store.admin().bulk()
    with pytest.raises(InvalidArgumentError, match="'explode'"):
        await ops.preview("explode", "state:dead")
    with pytest.raises(InvalidArgumentError, match="'finished'"):
        await ops.start("retry", "state:finished", actor="t")
    with pytest.raises(InvalidArgumentError, match="actor"):
        await ops.start("retry", "state:dead", actor="")
    with pytest.raises(InvalidArgumentError, match="batch"):
        await ops.run(1, batch=0)
    with pytest.raises(InvalidArgumentError, match="99"):
        await ops.run(99)
    with pytest.raises(InvalidArgumentError, match="priority"):
        await ops.start("priority", "state:dead", actor="t")
    assert await ops.get(12345) is None


async def test_a_bulk_retry_of_dead_jobs_sharing_a_dedupe_key_keeps_one_key_holder(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1))
    dead = []
    for _ in range(2):  # the key is free again once its job died: a second job takes it
        got = await q.enqueue_unique(b"k", EnqueueOpts(dedupe_key="same"))
        h = await q.claim_one("w")
        assert h is not None and h.job.id == got.id and await h.fail("x")
        dead.append(got.id)
    done = await store.admin().bulk().apply("retry", f"queue:{qname}", actor="t")
    assert done.done == 2
    keys = [(await q.get_job(i)).dedupe_key for i in dead]  # type: ignore[union-attr]
    assert keys.count("same") == 1
    again = await q.enqueue_unique(b"k", EnqueueOpts(dedupe_key="same"))
    assert again.duplicate  # one live job holds the key again


async def test_two_runners_of_a_priority_change_count_each_job_once(
    store: alkstore.Store,
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    await q.enqueue_many([b"x"] * 300)
    ops = store.admin().bulk()
    action = await ops.start("priority", f"queue:{qname}", actor="t", priority=3)
    others = [(await open_store()).admin().bulk() for _ in range(3)]
    runs = await asyncio.gather(
        ops.run(action.id, batch=7), *(o.run(action.id, batch=5) for o in others)
    )
    assert all(r.finished for r in runs)
    final = await ops.get(action.id)
    assert final is not None and final.done == 300  # a batch is never applied twice
    assert {j.priority for j in (await store.admin().find(f"queue:{qname}", limit=1000)).jobs} == {
        3
    }


async def test_a_bulk_cancel_of_a_running_parent_takes_its_dependents_down(
    store: alkstore.Store, qname: str
) -> None:
    """A cancel is not an ack: the dependents of a cancelled running parent are
    dead-lettered, never released (the dependencies trigger reads the delete as a
    cancel); a blocked job cancelled in bulk takes its own dependents down too."""
    q, other = store.queue(qname), store.queue(qname + "-children")
    parent = await q.enqueue(b"p")
    child = await other.enqueue(b"c", EnqueueOpts(after=(parent,)))
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.id == parent
    blocked_parent = await q.enqueue(b"bp", EnqueueOpts(after=(await q.enqueue(b"root"),)))
    grandchild = await other.enqueue(b"g", EnqueueOpts(after=(blocked_parent,)))
    page = await store.admin().find(f"queue:{qname} state:blocked")
    assert [j.id for j in page.jobs] == [blocked_parent]
    done = (
        await store.admin()
        .bulk()
        .apply("cancel", f"queue:{qname} state:processing,blocked", actor="t")
    )
    assert done.done == 2
    for job_id, parent_id in ((child, parent), (grandchild, blocked_parent)):
        job = await other.get_job(job_id)
        assert job is not None and job.state == "dead", job_id
        assert job.last_error == f"dependency {parent_id} was cancelled"
    assert await other.claim_one("w") is None
