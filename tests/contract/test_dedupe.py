"""Deduplication keys: one live job per (queue, key), or one per window; the database judges."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

import alkstore
from alkstore import Enqueued, EnqueueOpts

from .rawsql import count_rows, end_dedupe_windows

PROCS = Path(__file__).with_name("procs.py")
RACERS = 8
WAIT = 120.0


def key(k: str, window_s: float | None = None) -> EnqueueOpts:
    return EnqueueOpts(dedupe_key=k, dedupe_window_s=window_s)


async def test_a_live_duplicate_writes_nothing_and_answers_the_existing_id(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    first = await q.enqueue_unique("a", key("order-42"))
    again = await q.enqueue_unique("b", key("order-42"))
    assert first == Enqueued(first.id, False)
    assert again == Enqueued(first.id, True)
    assert await q.enqueue("c", key("order-42")) == first.id  # enqueue() -> int still
    assert await count_rows(store, target) == (1, 0)
    job = await q.get_job(first.id)
    assert job is not None and job.payload == b"a" and job.dedupe_key == "order-42"


async def test_keys_are_per_queue_and_unkeyed_jobs_never_clash(
    store: alkstore.Store, qname: str
) -> None:
    a, b = store.queue(qname), store.queue(qname + "b")
    x = await a.enqueue_unique("x", key("k"))
    y = await b.enqueue_unique("y", key("k"))
    assert not x.duplicate and not y.duplicate and x.id != y.id
    plain = [await a.enqueue("p"), await a.enqueue("p")]
    assert len(set(plain)) == 2


async def test_a_processing_job_holds_its_key_and_an_acked_or_dead_one_frees_it(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    first = await q.enqueue_unique("a", key("k"))
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.dedupe_key == "k"
    assert (await q.enqueue_unique("b", key("k"))) == Enqueued(first.id, True)
    assert await handle.ack()
    second = await q.enqueue_unique("c", key("k"))
    assert not second.duplicate and second.id != first.id
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("boom")
    dead = await q.get_job(second.id)
    assert dead is not None and dead.state == "dead" and dead.dedupe_key == "k"
    third = await q.enqueue_unique("d", key("k"))
    assert not third.duplicate


async def test_a_window_holds_the_key_after_the_job_is_gone_until_it_ends(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    first = await q.enqueue_unique("a", key("tick-1", 3600))
    handle = await q.claim_one("w")
    assert handle is not None and await handle.ack()
    again = await q.enqueue_unique("b", key("tick-1", 3600))
    assert again == Enqueued(first.id, True)  # the job is acked; the window still holds
    assert await count_rows(store, target) == (0, 0)
    await end_dedupe_windows(store, target)
    later = await q.enqueue_unique("c", key("tick-1", 3600))
    assert not later.duplicate and later.id != first.id


async def test_a_window_key_is_still_refused_while_its_job_is_live_after_the_window(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    first = await q.enqueue_unique("a", key("k", 60))
    await end_dedupe_windows(store, target)
    again = await q.enqueue_unique("b", key("k", 60))
    assert again == Enqueued(first.id, True)  # the live job holds it
    assert await count_rows(store, target) == (1, 0)


async def test_sweep_purges_ended_windows(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    await q.enqueue_many_unique(["a", "b"], dedupe_keys=None, opts=key("w", 60))
    assert (await q.sweep_expired()).keys_purged == 0
    await end_dedupe_windows(store, target)
    assert (await q.sweep_expired()).keys_purged == 1


async def test_enqueue_many_dedupes_each_item(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    held = await q.enqueue_unique("held", key("b"))
    got = await q.enqueue_many_unique(
        ["a1", "b1", None, "a2", "c1"], dedupe_keys=["a", "b", None, "a", "c"]
    )
    assert [g.duplicate for g in got] == [False, True, False, True, False]
    assert got[1].id == held.id and got[3].id == got[0].id
    assert len({got[0].id, got[2].id, got[4].id, held.id}) == 4
    assert await count_rows(store, target) == (4, 0)
    assert (await q.get_job(got[0].id)).payload == b"a1"  # type: ignore[union-attr]
    ids = await q.enqueue_many(["x", "y"], dedupe_keys=["c", "d"])
    assert ids[0] == got[4].id and ids[1] not in {g.id for g in got}


async def test_dedupe_inside_a_transaction_commits_or_rolls_back_with_it(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            inside = await tx.queue(qname).enqueue_unique("a", key("k"))
            again = await tx.queue(qname).enqueue_unique("b", key("k"))
            assert again == Enqueued(inside.id, True)
            raise RuntimeError("roll back")
    assert await count_rows(store, target) == (0, 0)
    async with store.transaction() as tx:
        kept = await tx.queue(qname).enqueue_unique("a", key("k", 60))
    assert (await store.queue(qname).enqueue_unique("b", key("k", 60))) == Enqueued(kept.id, True)


async def test_requeue_keeps_a_dead_jobs_key_unless_a_live_job_took_it(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    admin = store.admin()
    first = await q.enqueue_unique("a", key("k"))
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail()
    assert await admin.requeue(first.id)
    assert (await q.get_job(first.id)).dedupe_key == "k"  # type: ignore[union-attr]
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail()
    other = await q.enqueue_unique("b", key("k"))
    assert not other.duplicate
    assert await admin.requeue(first.id)  # the key is taken: requeued without it
    assert (await q.get_job(first.id)).dedupe_key is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "bad",
    [
        {"dedupe_key": ""},
        {"dedupe_key": 42},
        {"dedupe_key": "a\x00b"},
        {"dedupe_key": "x" * 513},
        {"dedupe_window_s": 10},
        {"dedupe_key": "k", "dedupe_window_s": 0},
        {"dedupe_key": "k", "dedupe_window_s": float("nan")},
    ],
)
def test_bad_dedupe_options_raise_a_typed_error(bad: dict[str, object]) -> None:
    with pytest.raises(alkstore.InvalidArgumentError):
        EnqueueOpts(**bad)  # type: ignore[arg-type]


async def test_bad_dedupe_keys_write_nothing(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname)
    for call in (
        q.enqueue_many(["a", "b"], dedupe_keys=["a"]),
        q.enqueue_many(["a"], dedupe_keys=[""]),
        q.enqueue_many(["a"], dedupe_keys="a"),  # type: ignore[arg-type]
        q.enqueue_many(["a"], key("k"), dedupe_keys=["j"]),
    ):
        with pytest.raises(alkstore.InvalidArgumentError, match="dedupe"):
            await call
    assert await count_rows(store, target) == (0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("window", ["-", "60"])
async def test_processes_racing_one_key_leave_exactly_one_row(
    store: alkstore.Store,
    target,  # type: ignore[no-untyped-def]
    qname: str,
    window: str,
) -> None:
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(PROCS),
            "dedupe",
            target.url,
            target.schema,
            qname,
            "the-key",
            window,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(RACERS)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert (await asyncio.wait_for(p.stdout.readline(), WAIT)).strip() == b"ready"
        for p in procs:  # all go at the same moment
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            await p.stdin.drain()
        outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), WAIT)
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    answers = [json.loads(out) for out, _ in outputs]
    assert all(p.returncode == 0 for p in procs)
    assert len({job_id for job_id, _ in answers}) == 1  # every racer got the one job's id
    assert sorted(dup for _, dup in answers) == [False] + [True] * (RACERS - 1)
    assert await count_rows(store, target) == (1, 0)
