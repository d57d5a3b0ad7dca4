"""Several producer processes enqueueing one job at a time: rate and wakes (PostgreSQL).

    .venv/bin/python bench/wake_producers.py [--procs 4] [--jobs 400] [--runs 3]
    .venv/bin/python bench/old_code.py /old/checkout bench/wake_producers.py   # before

Each process enqueues ``--jobs`` jobs one after the other (``wake=coalesce``) once all
are ready; prints the median rate over ``--runs`` and, per process, the waker's
statements sent and the wakes that rode on an enqueue's insert (``led``): a
stream of enqueues should coalesce its wakes, not NOTIFY at commit (the
database-wide notify lock). A scratch schema each run, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time
import uuid
from typing import Any

import psycopg

FORK = multiprocessing.get_context("fork")


def producer(url: str, schema: str, jobs: int, barrier: Any, out: Any) -> None:
    import alkstore

    async def main() -> None:
        store = await alkstore.connect(url, schema=schema)
        q = store.queue("q")
        await q.enqueue(b"warm")
        barrier.wait()
        t = time.perf_counter()
        for _ in range(jobs):
            await q.enqueue(b"x")
        took = time.perf_counter() - t
        waker = store._engine._waker  # type: ignore[attr-defined]
        out.put((took, waker.sent, getattr(waker, "led", 0)))
        await store.close()

    asyncio.run(main())


def one_run(url: str, procs: int, jobs: int) -> tuple[float, list[tuple[int, int]]]:
    import alkstore

    schema = "wake_producers_" + uuid.uuid4().hex[:8]

    async def migrate() -> None:
        store = await alkstore.connect(url, schema=schema)
        await store.close()

    asyncio.run(migrate())
    try:
        barrier, out = FORK.Barrier(procs + 1), FORK.Queue()
        ps = [
            FORK.Process(target=producer, args=(url, schema, jobs, barrier, out))
            for _ in range(procs)
        ]
        for p in ps:
            p.start()
        barrier.wait()
        t = time.perf_counter()
        results = [out.get(timeout=300) for _ in ps]
        wall = time.perf_counter() - t
        for p in ps:
            p.join()
        return procs * jobs / wall, [(sent, led) for _, sent, led in results]
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="postgresql://root@127.0.0.1:5432/test")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rates = []
    for _ in range(args.runs):
        rate, wakes = one_run(args.url, args.procs, args.jobs)
        rates.append(rate)
        print(f"run: {rate:,.0f} enqueues/s; per process (sent, led): {wakes}", flush=True)
    print(f"median: {statistics.median(rates):,.0f} enqueues/s over {args.procs} processes")


if __name__ == "__main__":
    main()
