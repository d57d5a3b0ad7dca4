"""Priority aging with real worker processes on every engine: a constant stream of
priority-9 jobs keeps every worker busy, one priority-0 job is enqueued, and it
starts within the bound docs/flow-control.md states from the settings, measured
on the database's clock (its due time against its claim time)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import EnqueueOpts
from alkstore.tasks import encode_call

FAIRPROCS = Path(__file__).with_name("fairprocs.py")
WORKERS, CONCURRENCY = 3, 2  # fairprocs.py aging runs 2 slots per worker
AGING_S = 0.5
SWEEP_S = 0.5  # = AGING_S: a sweep promotes one level at most, so the job lands on 9
HANDLER_S = 0.05
TOP, LOW = 9, 0
# docs/flow-control.md: waited (top - p + 1) * aging_s, promoted by the next sweep,
# taken by the next claim (with every slot busy: when a handler ends)
BOUND_S = (TOP - LOW + 1) * AGING_S + SWEEP_S + HANDLER_S
WAIT = 300.0


async def _until(check: Any, what: str) -> None:
    async def poll() -> None:
        while not await check():
            await asyncio.sleep(0.02)  # polling a condition (the children run on real time)

    try:
        await asyncio.wait_for(poll(), WAIT)
    except TimeoutError:
        raise AssertionError(f"not within {WAIT}s: {what}") from None


async def _stream(q: alkstore.Queue, stop: asyncio.Event) -> None:
    """Priority-9 jobs at ~400/s, over the workers' ~120/s: the backlog only grows."""
    hi = encode_call("hi", {})
    while not stop.is_set():
        await q.enqueue_many([hi] * 20, EnqueueOpts(priority=TOP))
        await asyncio.sleep(0.05)  # pacing the stream, not waiting for anything


@pytest.mark.slow
async def test_a_low_priority_job_starts_within_the_bound_under_a_saturating_stream(
    store: alkstore.Store, target: Any, qname: str, tmp_path: Path
) -> None:
    q = store.queue(qname)
    await q.set_aging(AGING_S)
    log = tmp_path / "lo.log"
    # more priority-9 jobs older than the low one than the workers run within the
    # bound: level with the stream at priority 9 it would still wait behind them
    await q.enqueue_many([encode_call("hi", {})] * 2000, EnqueueOpts(priority=TOP))
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(FAIRPROCS),
            "aging",
            target.url,
            target.schema,
            qname,
            f"aging-{n}",
            str(SWEEP_S),
            str(HANDLER_S),
            str(log),
        )
        for n in range(WORKERS)
    ]
    stop = asyncio.Event()
    stream = asyncio.create_task(_stream(q, stop))
    try:

        async def saturated() -> bool:
            info = await q.info()
            return info.processing == WORKERS * CONCURRENCY and info.pending > 0

        await _until(saturated, "every worker slot busy")
        await q.enqueue(encode_call("lo", {}), EnqueueOpts(priority=LOW))

        async def started() -> bool:
            return log.exists() and log.read_text().endswith("\n")

        await _until(started, "the priority-0 job ran")
        assert not stream.done()
        run_at, claimed_at, priority = json.loads(log.read_text())
        waited = claimed_at - run_at
        assert waited <= BOUND_S, (waited, BOUND_S)
        assert priority > LOW  # aging moved it up, the backlog did not drain to it
        assert waited > (TOP - LOW) * AGING_S  # one level per interval, no faster
        assert (await q.info()).pending > 0  # the stream still outran the workers
    finally:
        stop.set()
        await stream
        for p in procs:
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                await asyncio.wait_for(p.wait(), 60)
            except TimeoutError:
                p.kill()
                await p.wait()
