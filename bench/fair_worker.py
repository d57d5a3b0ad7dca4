"""A worker draining a fair queue against the same worker on a plain one (issue #25).

    .venv/bin/python bench/fair_worker.py [--jobs 50000] [--keys 1000] [--runs 3]
                                          [--concurrency 32] [--engines sqlite,postgres]

``bench/fairness.py`` times claims of 10 at the queue API; a worker claims what
its slots and claim-ahead buffer want (hundreds of jobs per claim for short
handlers), so this times what a user of a fair queue sees: ``--jobs`` no-op
tasks over ``--keys`` tenants (deferred key by key with
``configure(partition_key=...)``), drained by one in-process worker at
``--concurrency``, on a fresh store per run, plain and fair alternated run by
run. PostgreSQL tables are analyzed after the fill (what autovacuum does within
a minute). Prints jobs/s and client CPU µs/job per run, then the medians and the
fair/plain ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Target, engine_home, fresh_target, postgres_available

import alkstore

FILL_CHUNK = 1000


async def _drain(
    target: Target, jobs: int, keys: int, concurrency: int, fair: bool
) -> tuple[float, float]:
    done = 0
    worker: alkstore.worker.Worker | None = None

    def on_job() -> None:
        nonlocal done
        done += 1
        if done == jobs and worker is not None:
            worker.stop()

    app = alkstore.App(target.url, **target.kwargs())

    @app.task(queue="tenants", name="noop")
    async def noop(i: int) -> None:
        on_job()

    async with app:
        store = await app.connect()
        if fair:
            await store.queue("tenants").set_fair()
        per_key = [jobs // keys + (1 if k < jobs % keys else 0) for k in range(keys)]
        n = 0
        for k, count in enumerate(per_key):
            call = noop.configure(partition_key=f"tenant-{k:05}")
            for start in range(0, count, FILL_CHUNK):
                size = min(FILL_CHUNK, count - start)
                await call.defer_many([{"i": n + i} for i in range(size)])
                n += size
        if target.engine == "postgres":
            import psycopg

            with psycopg.connect(target.url, autocommit=True) as conn:
                for table in ("alk_jobs", "alk_fair", "alk_fair_weights"):
                    conn.execute(f'ANALYZE "{target.schema}".{table}')
        worker = app.worker(concurrency=concurrency, handle_signals=False)
        cpu0, t0 = time.process_time(), time.perf_counter()
        await worker.run()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert worker.counts["success"] == jobs, worker.counts
    return jobs / elapsed, cpu / jobs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--engines", default="sqlite,postgres")
    args = parser.parse_args()
    for engine in args.engines.split(","):
        if engine == "postgres" and not postgres_available():
            print("postgres: not reachable, skipped")
            continue
        rates: dict[bool, list[float]] = {False: [], True: []}
        with engine_home(engine) as home:
            print(
                f"{engine}: {args.jobs:,} no-op jobs over {args.keys:,} keys, c={args.concurrency}"
            )
            for run in range(args.runs):
                for fair in (False, True) if run % 2 == 0 else (True, False):
                    target = fresh_target(engine, home)
                    rate, cpu = asyncio.run(
                        _drain(target, args.jobs, args.keys, args.concurrency, fair)
                    )
                    rates[fair].append(rate)
                    mode = "fair " if fair else "plain"
                    print(
                        f"  run {run + 1} {mode}: {rate:,.0f} jobs/s, {cpu:.1f} µs CPU/job",
                        flush=True,
                    )
        plain, fair_ = statistics.median(rates[False]), statistics.median(rates[True])
        ratios = [f / p for f, p in zip(rates[True], rates[False], strict=True)]
        print(
            f"  median plain {plain:,.0f}/s, fair {fair_:,.0f}/s: fair/plain {fair_ / plain:.2f}"
            f" (runs {', '.join(f'{r:.2f}' for r in ratios)})"
        )


if __name__ == "__main__":
    main()
