"""Exactly once under concurrency: many processes draining one queue, many claimers per row."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

import alkstore
from alkstore import QueueOpts

from .together import start_together

PROCS = Path(__file__).with_name("procs.py")
WORKERS = 8
JOBS_PER_WORKER = 250
WAIT = 300.0  # generous: the whole drain, on a slow 2-core machine


@pytest.mark.slow
async def test_concurrent_drain_by_many_processes_claims_each_job_exactly_once(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=600))
    total = WORKERS * JOBS_PER_WORKER
    ids = await q.enqueue_many([f"job {i}" for i in range(total)])
    assert len(set(ids)) == total

    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(PROCS),
            "drain",
            target.url,
            target.schema,
            qname,
            f"worker-{n}",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for n in range(WORKERS)
    ]
    try:
        for p in procs:  # every worker connected ...
            assert p.stdout is not None
            assert (await asyncio.wait_for(p.stdout.readline(), WAIT)).strip() == b"ready"
        for p in procs:  # ... then all start at once
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            await p.stdin.drain()
        outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), WAIT)
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    assert [p.returncode for p in procs] == [0] * WORKERS

    claims = [tuple(c) for out, _ in outputs for c in json.loads(out)]
    per_job = Counter(job_id for job_id, _ in claims)
    doubles = {job_id: n for job_id, n in per_job.items() if n > 1}
    assert doubles == {}, f"{len(doubles)} jobs claimed more than once"
    assert set(per_job) == set(ids), f"{len(set(ids) - set(per_job))} jobs never claimed"
    assert all(attempts == 1 for _, attempts in claims)
    assert sum(1 for out, _ in outputs if json.loads(out)) >= 2  # more than one process worked
    assert await q.claim_one("check") is None
    assert [await q.get_job(i) for i in ids[:: total // 20]] == [None] * 20


async def test_many_claimers_on_many_stores_never_share_a_row(
    open_store,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    stores = [await open_store() for _ in range(4)]
    q0 = stores[0].queue(qname)
    ids = await q0.enqueue_many([str(i) for i in range(200)])

    async def drain(store: alkstore.Store, worker: str) -> list[int]:
        q = store.queue(qname)
        got: list[int] = []
        while handles := await q.claim_batch(worker, 3):
            got += [h.job.id for h in handles]
            assert await q.ack_batch(h.job.id for h in handles) == len(handles)
        return got

    results = await asyncio.gather(
        *(drain(s, f"w{i}-{j}") for i, s in enumerate(stores) for j in range(2))
    )
    claimed = [job_id for r in results for job_id in r]
    assert sorted(claimed) == ids


@pytest.mark.slow
async def test_concurrent_drain_with_abandoned_claims_hands_each_attempt_out_once(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    """Workers "die" holding some claims; the reclaims race, yet each (job, attempt) has one
    claimant and every job is acked exactly once."""
    visibility = 1.0
    q = store.queue(qname, QueueOpts(visibility_timeout_s=visibility, max_attempts=50))
    ids = await q.enqueue_many([str(i) for i in range(600)])
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(PROCS),
            "lossy",
            target.url,
            target.schema,
            qname,
            f"lossy-{n}",
            str(visibility * 2.5),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for n in range(4)
    ]
    try:
        await start_together(procs, WAIT)
        outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), WAIT)
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    assert [p.returncode for p in procs] == [0] * 4
    claims = [tuple(c) for out, _ in outputs for c in json.loads(out)]
    per_attempt = Counter((job_id, attempts) for job_id, attempts, _ in claims)
    assert [k for k, n in per_attempt.items() if n > 1] == []
    acked = Counter(job_id for job_id, _, ok in claims if ok)
    assert set(acked) == set(ids) and set(acked.values()) == {1}
    assert any(attempts > 1 for _, attempts, _ in claims)  # some reclaims happened
    assert await q.claim_one("check") is None


@pytest.mark.slow
async def test_committed_operations_survive_a_process_crash(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(PROCS),
        "crash",
        target.url,
        target.schema,
        qname,
        "survivor",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode == 0
    kept, cancelled = (int(x) for x in out.split())
    q = store.queue(qname)
    job = await q.get_job(kept)
    assert job is not None
    assert (job.payload, job.state, job.worker_id) == (b"survivor", "processing", "crasher")
    assert await q.get_job(cancelled) is None


async def test_a_claim_never_returns_more_than_n_under_concurrency(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=600))
    for _ in range(3):
        await q.enqueue_many([b"x"] * 1000)
    seen: list[int] = []

    async def claimer(n: int) -> None:
        while True:
            handles = await q.claim_batch(f"w{n}", n)
            assert len(handles) <= n
            if not handles:
                return
            seen.extend(h.job.id for h in handles)

    await asyncio.gather(*(claimer(n) for n in (1, 3, 10, 64, 250, 999, 1000, 5)))
    assert len(seen) == len(set(seen)) == 3000
