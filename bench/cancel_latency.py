"""Cancel → stop: how long a running handler keeps going after ``queue.cancel(id)``.

    .venv/bin/python bench/cancel_latency.py [--probes 30] [--pg URL]

One in-process Worker runs a task that sleeps for an hour; another store of
the same database cancels the job (as an operator in another process would),
and the clock runs from calling ``cancel()`` (its delete, then its
announcement) to the handler's ``except CancelledError``. Prints p50 / p99 per engine.
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

import alkstore


async def probe(url: str, schema: str, probes: int) -> list[float]:
    app = alkstore.App(url, schema=schema)
    started: asyncio.Queue[int] = asyncio.Queue()
    stopped: asyncio.Queue[float] = asyncio.Queue()

    @app.task(queue="bench_cancel", name="sleeper")
    async def sleeper() -> None:
        job = alkstore.current_job()
        assert job is not None
        await started.put(job.id)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await stopped.put(time.perf_counter())
            raise

    delays = []
    async with app:
        worker = app.worker(concurrency=1, handle_signals=False, poll_interval_s=5)
        running = asyncio.create_task(worker.run())
        async with await alkstore.connect(url, schema=schema) as operator:
            queue = operator.queue("bench_cancel")
            for _ in range(probes):
                await sleeper.defer()
                job_id = await started.get()
                t0 = time.perf_counter()
                await queue.cancel(job_id)
                delays.append((await stopped.get()) - t0)
        worker.stop()
        await running
    return delays


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--probes", type=int, default=30)
    parser.add_argument("--pg", default=None, help="PostgreSQL URL (a scratch schema is used)")
    args = parser.parse_args()
    targets = ["sqlite"] + (["postgres"] if args.pg else [])
    for engine in targets:
        folder = tempfile.mkdtemp()
        if engine == "sqlite":
            url, schema = f"sqlite:///{os.path.join(folder, 'c.db')}", "alkstore"
        else:
            url, schema = args.pg, f"bench_{uuid.uuid4().hex[:8]}"
        try:
            delays = sorted(asyncio.run(probe(url, schema, args.probes)))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            if engine == "postgres":
                import psycopg

                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))]
        print(
            f"{engine:<10} cancel → handler stopped: p50 {statistics.median(delays) * 1000:.2f} ms"
            f" · p99 {p99 * 1000:.2f} ms ({len(delays)} probes)",
            flush=True,
        )


if __name__ == "__main__":
    main()
