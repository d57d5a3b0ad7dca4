"""A graceful stop with a full claim-ahead buffer: how long giving it back takes.

    .venv/bin/python bench/stop_release.py [--engine postgres] [--runs 7] [--buffered 1024]
    .venv/bin/python bench/old_code.py /work/main bench/stop_release.py ...   # the "before"

One in-process Worker (concurrency 32, prefetch cap ``--buffered``, 1024 by
default) runs handlers that wait on a gate: 32 running, the whole cap claimed
ahead (its handlers' average run time is set to 1 us before it starts, as after
a run of short jobs, so the cap alone bounds the buffer). The clock runs from
``worker.stop()`` (the gate opened at once) to ``worker.run()`` returning;
``release`` is the part spent in ``Producer.release_buffered`` (the give-back
of the buffer). Each run checks that every buffered job is pending again with
its attempt uncounted. Prints each run and the medians (ms).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import engine_home, fresh_target

import alkstore

CONCURRENCY = 32


async def one_run(url: str, schema: str, buffered: int) -> tuple[float, float]:
    app = alkstore.App(url, schema=schema)
    gate = asyncio.Event()

    @app.task(queue="bench_stop", name="hold", max_attempts=1)
    async def hold() -> None:
        await gate.wait()

    async with app:
        store = await app.connect()
        queue = store.queue("bench_stop")
        total = CONCURRENCY + buffered + 64  # more than it may hold: a full buffer
        await hold.defer_many([{} for _ in range(total)])
        worker = app.worker(
            concurrency=CONCURRENCY, prefetch=buffered, handle_signals=False, poll_interval_s=5
        )
        producer: Any = worker._producer
        producer.duration_s = 1e-6  # short jobs: claim_ahead() is the cap
        released_in: list[float] = []
        original = producer.release_buffered

        async def timed_release() -> None:
            t = time.perf_counter()
            await original()
            released_in.append(time.perf_counter() - t)

        producer.release_buffered = timed_release
        run = asyncio.create_task(worker.run())
        deadline = time.monotonic() + 60
        while producer.held_counts()[:2] != (CONCURRENCY, buffered):
            if time.monotonic() > deadline:
                raise SystemExit(f"buffer never filled: {producer.held_counts()}")
            await asyncio.sleep(0.01)
        ahead = [run.handle.job.id for run in producer.ready]
        t0 = time.perf_counter()
        worker.stop()
        gate.set()
        assert await run == 0
        took = time.perf_counter() - t0
        for job_id in ahead:
            job = await queue.get_job(job_id)
            assert job is not None and (job.state, job.attempts) == ("pending", 0), job
    return took, released_in[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="postgres", choices=["postgres", "sqlite"])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--buffered", type=int, default=1024)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    stops, releases = [], []
    with engine_home(args.engine) as home:
        for i in range(args.runs):
            target = fresh_target(args.engine, home)
            took, released = asyncio.run(one_run(target.url, target.schema, args.buffered))
            stops.append(took * 1000)
            releases.append(released * 1000)
            print(f"run {i}: stop {took * 1000:8.1f} ms   release {released * 1000:8.1f} ms")
    print(
        f"{args.engine} buffered={args.buffered} runs={args.runs}: median stop "
        f"{statistics.median(stops):.1f} ms, median release {statistics.median(releases):.1f} ms"
    )


if __name__ == "__main__":
    main()
