"""Worker throughput: no-op tasks drained by one in-process Worker, at several concurrencies.

    .venv/bin/python bench/worker_throughput.py [--jobs 20000] [--runs 3] [--pg URL]

Prints jobs/s (median of the runs) for SQLite (synchronous=FULL, the durable
default, and NORMAL) and, with --pg, PostgreSQL. The backlog is enqueued first
(enqueue_many), then the clock runs from worker start to the last job acked.
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


async def drain(url: str, schema: str, jobs: int, concurrency: int) -> float:
    app = alkstore.App(url, schema=schema)
    done = 0
    worker: alkstore.worker.Worker | None = None

    @app.task(queue="bench", name="noop")
    async def noop(i: int) -> None:
        nonlocal done
        done += 1
        if done == jobs and worker is not None:
            worker.stop()

    async with app:
        for start in range(0, jobs, 1000):
            await noop.defer_many([{"i": i} for i in range(start, min(start + 1000, jobs))])
        worker = app.worker(concurrency=concurrency, handle_signals=False)
        t0 = time.perf_counter()
        await worker.run()
        elapsed = time.perf_counter() - t0
        assert worker.counts["success"] == jobs, worker.counts
    return jobs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg", default=None, help="PostgreSQL URL (a scratch schema is used)")
    parser.add_argument("--concurrency", default="1,8,32")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    targets = [("sqlite FULL", ""), ("sqlite NORMAL", "?synchronous=normal")]
    if args.pg:
        targets.append(("postgres", "pg"))
    print(f"{'engine':<16}" + "".join(f"{'c=' + str(c):>12}" for c in levels))
    for label, suffix in targets:
        cells = []
        for c in levels:
            rates = []
            for _ in range(args.runs):
                if suffix == "pg":
                    url, schema = args.pg, f"bench_{uuid.uuid4().hex[:8]}"
                else:
                    folder = tempfile.mkdtemp()
                    url, schema = f"sqlite:///{os.path.join(folder, 'b.db')}{suffix}", "alkstore"
                try:
                    rates.append(asyncio.run(drain(url, schema, args.jobs, c)))
                finally:
                    if suffix != "pg":
                        shutil.rmtree(folder, ignore_errors=True)
                    else:
                        import psycopg

                        with psycopg.connect(url, autocommit=True) as conn:
                            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            cells.append(f"{statistics.median(rates):>12,.0f}")
        print(f"{label:<16}" + "".join(cells), flush=True)


if __name__ == "__main__":
    main()
