"""Priority aging on every engine: a low-priority job under a constant stream of
higher-priority work starts within the bound of docs/flow-control.md, counted on
the test clock (no wall-clock bound): (top - p + 1) * aging_s + sweep interval."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import EnqueueOpts

from .conftest import Clock

AGING_S = 2.0
SWEEP_EVERY_S = 2  # the workers' sweep interval, in ticks of one second (one level a sweep)
TOP, LOW = 9, 0
BOUND_S = (TOP - LOW + 1) * AGING_S + SWEEP_EVERY_S


async def _saturate(q: alkstore.Queue, clock: Clock, low: int, ticks: int) -> int | None:
    """Each second: two priority-9 jobs arrive, one is claimed (the workers are
    saturated: the backlog only grows), the sweep runs every SWEEP_EVERY_S. The
    second at which ``low`` was claimed, or None."""
    for tick in range(1, ticks + 1):
        await q.enqueue_many([b"hi", b"hi"], EnqueueOpts(priority=TOP))
        handle = await q.claim_one("w")
        assert handle is not None
        assert await handle.ack()
        if handle.job.id == low:
            return tick
        clock.advance(1.0)
        if tick % SWEEP_EVERY_S == 0:
            await q.sweep_expired()
    return None


async def test_an_aged_low_priority_job_starts_within_the_bound(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    q = store.queue(qname)
    await q.set_aging(AGING_S)
    assert (await q.settings()).aging_s == AGING_S
    # older priority-9 jobs than it, more than the bound's ticks drain: level with
    # the stream at priority 9 it would still wait behind them
    await q.enqueue_many([b"hi"] * 40, EnqueueOpts(priority=TOP))
    low = await q.enqueue(b"lo", EnqueueOpts(priority=LOW))
    started = await _saturate(q, clock, low, ticks=int(BOUND_S) * 3)
    assert started is not None and started <= BOUND_S + 1
    assert started > (TOP - LOW) * AGING_S  # it climbed one level per interval, no faster


async def test_without_aging_the_low_priority_job_waits_behind_the_stream(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    q = store.queue(qname)
    await q.enqueue_many([b"hi"] * 3, EnqueueOpts(priority=TOP))
    low = await q.enqueue(b"lo", EnqueueOpts(priority=LOW))
    assert await _saturate(q, clock, low, ticks=int(BOUND_S) * 3) is None
    await q.set_aging(AGING_S)
    await q.set_aging(None)  # off again
    assert (await q.settings()).aging_s is None
    assert await _saturate(q, clock, low, ticks=int(BOUND_S) * 2) is None


async def test_jobs_at_the_top_are_not_rewritten(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    q = store.queue(qname)
    await q.set_aging(1.0)
    ids = await q.enqueue_many([b"a", b"b", b"c"], EnqueueOpts(priority=3))
    clock.advance(100)
    await q.sweep_expired()
    jobs = [await q.get_job(i) for i in ids]
    assert [j.priority for j in jobs if j is not None] == [3, 3, 3]


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "10", True])
async def test_a_bad_aging_interval_is_refused(
    store: alkstore.Store, qname: str, bad: object
) -> None:
    with pytest.raises(alkstore.InvalidArgumentError, match="aging_s"):
        await store.queue(qname).set_aging(bad)  # type: ignore[arg-type]
