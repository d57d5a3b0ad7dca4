"""Batch handlers vs per-job handlers: no-op calls drained by one in-process worker.

    .venv/bin/python bench/batch_handlers.py [--jobs 20000] [--runs 3] [--batch 1000]

Rows, per engine (each the median of ``--runs`` runs with [min–max], interleaved,
on a fresh store): ``per-job c=32`` (an async no-op task, ``concurrency=32``) and
``batch N`` (the same calls to a task with ``batch_size=N``: one handler call per
batch, each item still acked with its own fenced ack in the worker's ack batch).
The backlog is enqueued first (``defer_many`` ×1000); the clock runs from worker
start until ``run()`` returned (every outcome written). Logging at INFO into a
discarded stream, as in worker_throughput.py. Client CPU is this process's CPU
time per job.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import engine_home, fresh_target, median, postgres_available, render_table
from worker_throughput import _configure_logging

import alkstore
from alkstore.worker import BatchItem


def _app(url: str, schema: str, batch: int | None, on_jobs: Any) -> tuple[alkstore.App, Any]:
    app = alkstore.App(url, schema=schema)
    if batch is None:

        @app.task(queue="bench", name="noop")
        async def noop(i: int) -> None:
            on_jobs(1)

        return app, noop

    @app.task(queue="bench", name="noop", batch_size=batch, batch_wait_s=0.05)
    async def noop_batch(items: list[BatchItem]) -> None:
        on_jobs(len(items))

    return app, noop_batch


async def drain(url: str, schema: str, jobs: int, batch: int | None) -> tuple[float, float]:
    """(jobs/s, client CPU µs/job) of one in-process worker."""
    app, task = _app(url, schema, batch, lambda n: None)
    async with app:
        for start in range(0, jobs, 1000):
            await task.defer_many([{"i": i} for i in range(start, min(start + 1000, jobs))])
    done = 0
    worker: alkstore.worker.Worker | None = None

    def on_jobs(n: int) -> None:
        nonlocal done
        done += n
        if done >= jobs and worker is not None:
            worker.stop()

    app, _ = _app(url, schema, batch, on_jobs)
    worker = app.worker(concurrency=32, handle_signals=False)
    cpu0, t0 = time.process_time(), time.perf_counter()
    async with app:
        await worker.run()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert worker.counts["success"] == jobs, worker.counts
    return jobs / elapsed, cpu / jobs * 1e6


def _cell(values: list[float], fmt: str) -> str:
    return f"{median(values):{fmt}} [{min(values):{fmt}}–{max(values):{fmt}}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--engines", default="sqlite,postgres")
    args = parser.parse_args()
    _configure_logging("info")
    rows: list[list[str]] = []
    for engine in args.engines.split(","):
        if engine == "postgres" and not postgres_available():
            print("postgres: not available, skipped")
            continue
        kinds: list[tuple[str, int | None]] = [
            ("per-job c=32", None),
            (f"batch {args.batch}", args.batch),
        ]
        rates: dict[str, list[float]] = {k: [] for k, _ in kinds}
        cpus: dict[str, list[float]] = {k: [] for k, _ in kinds}
        with engine_home(engine) as home:
            for _ in range(args.runs):
                for label, batch in kinds:  # interleaved
                    target = fresh_target(engine, home)
                    rate, cpu = asyncio.run(drain(target.url, target.schema, args.jobs, batch))
                    rates[label].append(rate)
                    cpus[label].append(cpu)
        base = median(rates[kinds[0][0]])
        for label, _ in kinds:
            rows.append(
                [
                    engine,
                    label,
                    _cell(rates[label], ",.0f"),
                    _cell(cpus[label], ".1f"),
                    f"{median(rates[label]) / base:.2f}×",
                ]
            )
    print(
        render_table(
            f"Batch handlers: {args.jobs:,} no-op calls, median of {args.runs}",
            ["engine", "handler", "jobs/s", "client µs/job", "vs per-job"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
