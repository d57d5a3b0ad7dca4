"""Workflows: what dependencies cost, and that the plain path pays nothing for them.

    .venv/bin/python bench/workflows.py [--pg URL] [--runs 5] [--part plain|chain|fanin|all]
    .venv/bin/python bench/old_code.py /work/main bench/workflows.py --part plain   # "before"

- plain: the no-dependency path, claim_batch(50) + store.ack_many, and claim_one +
  handle.ack, per job (the part that must not get slower; it uses only the API
  that existed before, so it runs against the old code too).
- chain: a 3-step chain (each step after the previous) vs 3 independent jobs, enqueue +
  drain by one puller, per flow.
- fanin: 10,000 parents → 1 child: enqueue of the child, and from the start of the last
  parent's ack to the child claimed.
Medians of ``--runs`` runs, per engine (PostgreSQL in a scratch schema, dropped after).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable

import alkstore
from alkstore import EnqueueOpts, QueueOpts

Bench = Callable[[alkstore.Store], Awaitable[dict[str, float]]]


async def plain(store: alkstore.Store) -> dict[str, float]:
    q = store.queue(f"plain{uuid.uuid4().hex[:6]}", QueueOpts(visibility_timeout_s=600))
    n = 3000
    await q.enqueue_many([b"x"] * n)
    t0 = time.perf_counter()
    while handles := await q.claim_batch("w", 50):
        await store.ack_many(handles)
    batched = (time.perf_counter() - t0) / n
    m = 500
    await q.enqueue_many([b"x"] * m)
    t0 = time.perf_counter()
    while (h := await q.claim_one("w")) is not None:
        await h.ack()
    single = (time.perf_counter() - t0) / m
    return {"claim_batch+ack_many µs/job": batched * 1e6, "claim_one+ack µs/job": single * 1e6}


async def _drain(q: alkstore.Queue) -> int:
    done = 0
    while (h := await q.claim_one("w")) is not None:
        await h.ack()
        done += 1
    return done


async def chain(store: alkstore.Store) -> dict[str, float]:
    q = store.queue(f"chain{uuid.uuid4().hex[:6]}")
    flows = 100
    t0 = time.perf_counter()
    for _ in range(flows):
        await q.enqueue(b"1")
        await q.enqueue(b"2")
        await q.enqueue(b"3")
        assert await _drain(q) == 3
    independent = (time.perf_counter() - t0) / flows
    t0 = time.perf_counter()
    for _ in range(flows):
        a = await q.enqueue(b"1")
        b = await q.enqueue(b"2", EnqueueOpts(after=(a,)))
        await q.enqueue(b"3", EnqueueOpts(after=(b,)))
        assert await _drain(q) == 3
    chained = (time.perf_counter() - t0) / flows
    from alkstore.workflows import Graph  # the new API: only here

    t0 = time.perf_counter()
    for _ in range(flows):
        g = Graph()
        g.add(q.name, b"3", after=[g.add(q.name, b"2", after=[g.add(q.name, b"1")])])
        await g.enqueue(store)
        assert await _drain(q) == 3
    graph = (time.perf_counter() - t0) / flows
    return {
        "3 independent jobs ms/flow": independent * 1e3,
        "3-step chain (enqueue after=) ms/flow": chained * 1e3,
        "3-step chain (one Graph) ms/flow": graph * 1e3,
    }


async def fanin(store: alkstore.Store) -> dict[str, float]:
    parents_q = store.queue(f"fan{uuid.uuid4().hex[:6]}", QueueOpts(visibility_timeout_s=600))
    child_q = store.queue(parents_q.name + "c")
    n = 10_000
    ids = await parents_q.enqueue_many([b"p"] * n)
    t0 = time.perf_counter()
    child = await child_q.enqueue(b"c", EnqueueOpts(after=tuple(ids)))
    enqueue_child = time.perf_counter() - t0
    left = n
    last_ack = 0.0
    while left:
        handles = await parents_q.claim_batch("w", min(500, left))
        if len(handles) == left:  # this batch holds the last parents
            last_ack = time.perf_counter()
        await store.ack_many(handles)
        left -= len(handles)
    got = await child_q.claim_one("w")
    claimed = time.perf_counter()
    assert got is not None and got.job.id == child
    await got.ack()
    return {
        "enqueue child of 10,000 ms": enqueue_child * 1e3,
        "last ack (500 parents) → child claimed ms": (claimed - last_ack) * 1e3,
    }


PARTS: dict[str, Bench] = {"plain": plain, "chain": chain, "fanin": fanin}


async def run(url: str, schema: str, part: Bench, runs: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {}
    async with await alkstore.connect(url, schema=schema) as store:
        await part(store)  # warm-up
        for _ in range(runs):
            for key, value in (await part(store)).items():
                samples.setdefault(key, []).append(value)
    return {key: statistics.median(values) for key, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--part", default="all", choices=["all", *PARTS])
    parser.add_argument("--pg", default=None, help="PostgreSQL URL (a scratch schema is used)")
    args = parser.parse_args()
    parts = list(PARTS) if args.part == "all" else [args.part]
    for engine in ["sqlite"] + (["postgres"] if args.pg else []):
        for name in parts:
            folder = tempfile.mkdtemp()
            if engine == "sqlite":
                url, schema = f"sqlite:///{os.path.join(folder, 'w.db')}", "alkstore"
            else:
                url, schema = args.pg, f"bench_{uuid.uuid4().hex[:8]}"
            try:
                result = asyncio.run(run(url, schema, PARTS[name], args.runs))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
                if engine == "postgres":
                    import psycopg

                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            for key, value in result.items():
                print(f"{engine:<9} {name:<6} {key:<44} {value:10.2f}", flush=True)


if __name__ == "__main__":
    main()
