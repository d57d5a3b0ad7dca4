"""A bulk action killed halfway (SIGKILL, real processes) resumes to exactly N, none twice."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

import alkstore
from alkstore import QueueOpts

RUNNER = Path(__file__).with_name("bulkprocs.py")
JOBS = 5000
BATCH = 50
WAIT = 300.0  # generous: a slow, shared 2-core machine


async def _runner(target, action_id: int, half: int) -> asyncio.subprocess.Process:  # type: ignore[no-untyped-def]
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(RUNNER),
        target.url,
        target.schema,
        str(action_id),
        str(BATCH),
        str(half),
        stdout=asyncio.subprocess.PIPE,
    )


async def _counts(store: alkstore.Store, queue: str) -> tuple[int, int]:
    stats = {s.queue: s for s in await store.admin().stats()}
    s = stats.get(queue)
    return (0, 0) if s is None else (s.pending, s.dead)


@pytest.mark.slow
async def test_a_bulk_retry_killed_halfway_resumes_to_exactly_n_none_twice(
    store: alkstore.Store,
    target,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname, QueueOpts(max_attempts=1, visibility_timeout_s=3600))
    ids = await q.enqueue_many([f"job {i}".encode() for i in range(JOBS)])
    while handles := await q.claim_batch("w", 500):
        await asyncio.gather(*(h.fail("boom") for h in handles))
    assert await _counts(store, qname) == (0, JOBS)
    ops = store.admin().bulk()
    action = await ops.start("retry", f"queue:{qname} state:dead", actor="test")

    first = await _runner(target, action.id, JOBS // 2)
    assert first.stdout is not None
    line = await asyncio.wait_for(first.stdout.readline(), WAIT)
    assert line.startswith(b"half"), line
    first.send_signal(signal.SIGKILL)  # mid-run: it is already in its next batch
    await asyncio.wait_for(first.wait(), WAIT)
    assert first.returncode == -signal.SIGKILL

    cut = await ops.get(action.id)
    assert cut is not None and not cut.finished and JOBS // 2 <= cut.done < JOBS
    # the count and the jobs moved together: nothing half-applied survived the kill
    assert await _counts(store, qname) == (cut.done, JOBS - cut.done)

    second = await _runner(target, action.id, JOBS + 1)
    out, _ = await asyncio.wait_for(second.communicate(), WAIT)
    assert second.returncode == 0 and out.split()[-2:] == [b"finished", str(JOBS).encode()]
    final = await ops.get(action.id)
    assert final is not None and final.finished and final.done == JOBS
    assert await _counts(store, qname) == (JOBS, 0)
    handles = await q.claim_batch("w2", JOBS + 10)  # each job once, each with a fresh budget
    assert sorted(h.job.id for h in handles) == ids
    assert {h.job.attempts for h in handles} == {1}
