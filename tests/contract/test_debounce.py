"""Debounce and replace on every engine: one pending job per debounce key, the latest
payload wins, a running job is never changed (the next enqueue makes the next job)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import EnqueueOpts

from .conftest import Clock
from .together import start_together

FAIRPROCS = Path(__file__).with_name("fairprocs.py")
WAIT = 300.0


def _opts(key: str = "k", debounce_s: float | None = None) -> EnqueueOpts:
    return EnqueueOpts(debounce_key=key, debounce_s=debounce_s)


async def test_a_second_enqueue_replaces_the_pending_payload(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    first = await q.enqueue_unique({"v": 1}, _opts())
    second = await q.enqueue_unique({"v": 2}, _opts())
    assert not first.duplicate and second == alkstore.Enqueued(first.id, True)
    assert await q.enqueue({"v": 3}, _opts()) == first.id
    other = await q.enqueue({"v": 9}, _opts("other"))  # another key: another job
    batch = await q.claim_batch("w", 10)
    assert sorted((h.job.id, h.job.payload) for h in batch) == [
        (first.id, b'{"v":3}'),
        (other, b'{"v":9}'),
    ]


async def test_debounce_pushes_the_start_out_with_each_enqueue(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    q = store.queue(qname)
    job = await q.enqueue("a", _opts(debounce_s=10))
    clock.advance(6)
    assert await q.claim_one("w") is None
    assert await q.enqueue("b", _opts(debounce_s=10)) == job  # due 10 s from now again
    clock.advance(6)
    assert await q.claim_one("w") is None  # 12 s after the first: held back by the second
    clock.advance(5)
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.id == job and handle.job.payload == b"b"


async def test_replace_without_debounce_keeps_the_start(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    q = store.queue(qname)
    at = datetime.fromtimestamp(clock.now + 30, UTC)
    job = await q.enqueue("a", EnqueueOpts(debounce_key="k", run_at=at))
    clock.advance(20)
    assert await q.enqueue("b", _opts()) == job
    clock.advance(11)
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.payload == b"b"


async def test_a_claimed_job_is_never_changed_and_the_next_enqueue_makes_one_more(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, alkstore.QueueOpts(max_attempts=3))
    first = await q.enqueue("one", _opts())
    running = await q.claim_one("w")
    assert running is not None and running.job.id == first
    second = await q.enqueue_unique("two", _opts())
    third = await q.enqueue_unique("three", _opts())
    assert not second.duplicate and second.id != first
    assert third == alkstore.Enqueued(second.id, True)
    still = await q.get_job(first)
    assert still is not None and still.payload == b"one"
    assert await running.retry("again", delay_s=0)  # back to pending beside the new one
    assert await q.enqueue("four", _opts()) == second.id  # the key is the new job's
    batch = await q.claim_batch("w", 10)
    assert sorted((h.job.id, h.job.payload) for h in batch) == [
        (first, b"one"),
        (second.id, b"four"),
    ]


async def test_a_fair_queue_debounces_per_key_too(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.set_fair()
    a = await q.enqueue("a1", EnqueueOpts(debounce_key="d", partition_key="t1"))
    assert await q.enqueue("a2", EnqueueOpts(debounce_key="d", partition_key="t1")) == a
    handle = await q.claim_one("w")
    assert handle is not None and handle.job.payload == b"a2"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"debounce_s": 5}, "needs a debounce_key"),
        ({"debounce_key": "k", "dedupe_key": "k"}, "dedupe_key or debounce_key"),
        ({"debounce_key": "k", "debounce_s": 5, "delay_s": 1}, "without delay_s"),
        ({"debounce_key": "k", "debounce_s": -1}, "debounce_s"),
        ({"debounce_key": ""}, "debounce_key"),
    ],
)
def test_bad_debounce_options_are_refused_naming_the_value(
    kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(alkstore.InvalidArgumentError, match=match):
        EnqueueOpts(**kwargs)


async def test_debounce_is_refused_where_it_cannot_hold(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    with pytest.raises(alkstore.InvalidArgumentError, match="not in a batch"):
        await q.enqueue_many(["a", "b"], _opts())
    with pytest.raises(alkstore.InvalidArgumentError, match=r"inside store\.transaction"):
        async with store.transaction() as tx:
            await tx.queue(qname).enqueue("a", _opts())
    assert await q.claim_one("w") is None


async def _run(target: Any, *args: list[str]) -> list[Any]:
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(FAIRPROCS),
            *a,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for a in args
    ]
    try:
        await start_together(procs, WAIT)
        return procs
    except BaseException:
        for p in procs:
            p.kill()
            await p.wait()
        raise


async def _outputs(procs: list[Any]) -> list[Any]:
    try:
        outs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), WAIT)
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    assert [p.returncode for p in procs] == [0] * len(procs)
    return [json.loads(out) for out, _ in outs]


@pytest.mark.slow
async def test_eight_processes_enqueueing_one_key_make_exactly_one_job_with_a_last_payload(
    store: alkstore.Store, target: Any, qname: str, clock: Clock
) -> None:
    args = [["debounce", target.url, target.schema, qname, "key", "125", "3600"]] * 8
    outputs = await _outputs(await _run(target, *args))
    ids = {item[0] for out in outputs for item in out}
    assert len(ids) == 1 and sum(len(out) for out in outputs) == 1000
    assert sum(1 for out in outputs for item in out if not item[1]) == 1  # one insert
    job = await store.queue(qname).get_job(ids.pop())
    assert job is not None
    lasts = {out[-1][2] for out in outputs}  # each process's own last enqueue
    assert job.payload.decode() in lasts  # so the last commit's
    info = await store.queue(qname).info()
    assert info.pending + info.delayed == 1
    clock.now = time.time() + 3601  # past the last enqueue's debounce delay: it runs once
    ran = await store.queue(qname).claim_batch("w", 10)
    assert [(h.job.id, h.job.payload) for h in ran] == [(job.id, job.payload)]
    await ran[0].ack()
    assert await store.queue(qname).claim_batch("w", 10) == []


@pytest.mark.slow
async def test_enqueues_racing_a_worker_never_change_a_running_job_or_lose_one(
    store: alkstore.Store, target: Any, qname: str
) -> None:
    producers = [["debounce", target.url, target.schema, qname, "key", "150", "-"]] * 4
    procs = await _run(target, ["drain", target.url, target.schema, qname], *producers)
    drainer, rest = procs[0], procs[1:]
    enqueued = await _outputs(rest)
    assert drainer.stdin is not None
    drainer.stdin.write(b"stop\n")
    await drainer.stdin.drain()
    [ran] = await _outputs([drainer])
    per_id = Counter(job_id for job_id, _, _ in ran)
    assert all(n == 1 for n in per_id.values())  # each job ran once
    assert set(per_id) == {item[0] for out in enqueued for item in out}  # and none was lost
    assert all(claimed == then for _, claimed, then in ran)  # never changed while running
    given = {}
    for out in enqueued:
        for job_id, _, payload in out:
            given.setdefault(job_id, set()).add(payload)
    assert all(claimed in given[job_id] for job_id, claimed, _ in ran)
