"""Fair queues with real worker processes on every engine: the handlers' shared log
(one line per job, appended as it starts) shows the order jobs ran in."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import EnqueueOpts, QueueOpts

from .together import start_together

FAIRPROCS = Path(__file__).with_name("fairprocs.py")
WORKERS = 4
WAIT = 600.0


async def _enqueue(q: alkstore.Queue, key: str, count: int) -> None:
    for start in range(0, count, 10_000):
        size = min(10_000, count - start)
        await q.enqueue_many(
            [f"{key}:{start + i}" for i in range(size)], EnqueueOpts(partition_key=key)
        )


async def _run_workers(target: Any, qname: str, quota: int, log: Path) -> list[str]:
    """WORKERS processes each run ``quota`` jobs; the keys of the log, in order."""
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(FAIRPROCS),
            "fairlog",
            target.url,
            target.schema,
            qname,
            f"worker-{n}",
            str(quota),
            str(log),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for n in range(WORKERS)
    ]
    try:
        await start_together(procs, WAIT)
        await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), WAIT)
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    assert [p.returncode for p in procs] == [0] * WORKERS
    return [line.split(":")[0] for line in log.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("fair", [True, False], ids=["fair", "plain"])
async def test_small_tenants_run_early_beside_a_big_backlog_only_when_fair(
    store: alkstore.Store, target: Any, qname: str, tmp_path: Path, fair: bool
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=600))
    if fair:
        await q.set_fair()
    await _enqueue(q, "A", 50_000)
    await _enqueue(q, "B", 20)
    await _enqueue(q, "C", 20)
    ran = await _run_workers(target, qname, 150, tmp_path / "log")
    assert len(ran) == WORKERS * 150
    small = [i for i, key in enumerate(ran) if key in ("B", "C")]
    if fair:  # all of B's and C's 40 jobs within the first few hundred claims
        assert len(small) == 40 and max(small) < 300, small
    else:  # behind A's backlog: none of them in the first 600
        assert small == []


@pytest.mark.slow
async def test_a_thousand_keys_advance_together_within_one_round(
    store: alkstore.Store, target: Any, qname: str, tmp_path: Path
) -> None:
    keys, per_key, rounds = 1000, 50, 4
    q = store.queue(qname, QueueOpts(visibility_timeout_s=600))
    await q.set_fair()
    for k in range(keys):
        await q.enqueue_many(
            [f"k{k:04}:{i}" for i in range(per_key)], EnqueueOpts(partition_key=f"k{k:04}")
        )
    ran = await _run_workers(target, qname, keys * rounds // WORKERS, tmp_path / "log")
    assert len(ran) == keys * rounds
    seen: dict[str, int] = {}
    late = []
    for position, key in enumerate(ran):
        turn = seen.get(key, 0)  # this is the key's turn-th job
        seen[key] = turn + 1
        if abs(position // keys - turn) > 1:
            late.append((key, turn, position))
    assert late == []  # every key's n-th job ran in round n, give or take one
    assert len(seen) == keys and min(seen.values()) >= rounds - 1
