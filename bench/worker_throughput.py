"""Worker throughput: no-op async tasks drained by the worker runtime.

    .venv/bin/python bench/worker_throughput.py [--jobs 20000] [--runs 3] [--pg URL]

Rows (each the median of ``--runs`` runs with [min–max], on a fresh store):
``app.worker(concurrency=C).run()`` in this process for each ``--concurrency``,
and ``--procs`` worker processes at the largest C. The backlog is enqueued
first (``defer_many`` ×1000); the clock runs from worker start until every
handler ran and every outcome is written (``run()`` returned). Logging is at
INFO, the CLI's default, into a discarded stream (``--log warning`` to compare),
so the per-job outcome line is formatted and written as in production. Client
CPU is the worker process's CPU time divided by the jobs (less sensitive to
the load of a shared machine than jobs/s). Each in-process row has a twin
"+ limit": the same drain on a queue with a global concurrency limit equal to
C (never binding), so the difference is the cost of a limited claim (settings
row locked, running jobs counted) and of the wakes of freed slots.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import multiprocessing as mp
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import alkstore
from alkstore.worker import Worker


class _Discard(io.TextIOBase):
    def write(self, s: str) -> int:
        return len(s)


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        stream=_Discard(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )


def _app(url: str, schema: str, on_job: Any) -> tuple[alkstore.App, Any]:
    app = alkstore.App(url, schema=schema)

    @app.task(queue="bench", name="noop")
    async def noop(i: int) -> None:
        on_job()

    return app, noop


async def _fill(url: str, schema: str, jobs: int, limit: int | None = None) -> None:
    app, noop = _app(url, schema, lambda: None)
    async with app:
        if limit is not None:
            await app.store.queue("bench").set_limits(concurrency=limit)
        for start in range(0, jobs, 1000):
            await noop.defer_many([{"i": i} for i in range(start, min(start + 1000, jobs))])


async def drain_here(
    url: str, schema: str, jobs: int, concurrency: int, limit: int | None = None
) -> tuple[float, float]:
    """(jobs/s, client CPU µs/job) of one in-process worker (on a queue limited to
    ``limit`` running jobs, if given)."""
    done = 0
    worker: Worker | None = None

    def on_job() -> None:
        nonlocal done
        done += 1
        if done == jobs and worker is not None:
            worker.stop()

    await _fill(url, schema, jobs, limit)
    app, _ = _app(url, schema, on_job)
    worker = app.worker(concurrency=concurrency, handle_signals=False)
    cpu0, t0 = time.process_time(), time.perf_counter()
    async with app:
        await worker.run()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert worker.counts["success"] == jobs, worker.counts
    return jobs / elapsed, cpu / jobs * 1e6


def _worker_process(
    url: str,
    schema: str,
    concurrency: int,
    log: str,
    go: Any,
    out: Any,
    counts: Any = None,
    idx: int = 0,
) -> None:
    """One worker process: waits for ``go``, drains until SIGTERM, puts (successes,
    CPU s, end time) on ``out``; with ``counts`` (a shared array) each handler adds
    one to ``counts[idx]``, so the parent sees the end without asking the database."""
    _configure_logging(log)

    def on_job() -> None:
        if counts is not None:
            counts[idx] += 1

    app, _ = _app(url, schema, on_job)
    worker = app.worker(concurrency=concurrency)  # SIGTERM stops it gracefully

    async def main() -> None:
        await app.connect()
        go.wait()
        cpu0 = time.process_time()
        async with app:
            await worker.run()
        out.put((worker.counts["success"], time.process_time() - cpu0, time.time()))

    asyncio.run(main())


def drain_procs(
    url: str, schema: str, jobs: int, concurrency: int, procs: int, log: str
) -> tuple[float, float]:
    """(jobs/s, client CPU µs/job) of ``procs`` worker processes sharing the backlog."""
    asyncio.run(_fill(url, schema, jobs))
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    workers = [
        ctx.Process(target=_worker_process, args=(url, schema, concurrency, log, go, out))
        for _ in range(procs)
    ]
    for w in workers:
        w.start()
    time.sleep(2.0)  # imports and connections before the clock starts
    t0 = time.time()
    go.set()

    async def wait_empty() -> None:
        async with await alkstore.connect(url, schema=schema) as store:
            admin = store.admin()
            while True:
                stats = {s.queue: s for s in await admin.stats()}
                s = stats.get("bench")
                if s is None or s.pending + s.processing == 0:
                    return
                await asyncio.sleep(0.005)

    asyncio.run(wait_empty())
    for w in workers:
        assert w.pid is not None
        os.kill(w.pid, signal.SIGTERM)
    results = [out.get(timeout=120) for _ in workers]
    for w in workers:
        w.join()
    done = sum(r[0] for r in results)
    assert done == jobs, (done, jobs)
    elapsed = max(r[2] for r in results) - t0
    return jobs / elapsed, sum(r[1] for r in results) / jobs * 1e6


def _cell(samples: list[tuple[float, float]]) -> str:
    rates = [s[0] for s in samples]
    cpus = [s[1] for s in samples]
    return (
        f"{statistics.median(rates):,.0f}/s [{min(rates):,.0f}–{max(rates):,.0f}]"
        f" · {statistics.median(cpus):.1f} µs CPU/job"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg", default=None, help="PostgreSQL URL (a scratch schema is used)")
    parser.add_argument("--concurrency", default="8,32")
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--log", default="info", help="log level (the CLI's default: info)")
    parser.add_argument("--no-limit", action="store_true", help="skip the '+ limit' rows")
    args = parser.parse_args()
    _configure_logging(args.log)
    levels = [int(c) for c in args.concurrency.split(",")]
    engines = [e for e in args.engines.split(",") if e and (e != "postgres" or args.pg)]
    print(f"worker drain, no-op tasks, {args.jobs} jobs, log {args.log}, median of {args.runs}")
    rows: list[tuple[str, Any]] = []
    for c in levels:
        rows.append(
            (f"1 process, c={c}", lambda u, s, c=c: asyncio.run(drain_here(u, s, args.jobs, c)))
        )
        if args.no_limit:
            continue
        rows.append(
            (
                f"1 process, c={c} + limit",
                lambda u, s, c=c: asyncio.run(drain_here(u, s, args.jobs, c, c)),
            )
        )
    if args.procs > 1:
        c = max(levels)
        rows.append(
            (
                f"{args.procs} processes × c={c}",
                lambda u, s: drain_procs(u, s, args.jobs, c, args.procs, args.log),
            )
        )
    for engine in engines:
        for label, fn in rows:
            samples = []
            for _ in range(args.runs):
                if engine == "postgres":
                    url, schema, folder = args.pg, f"bench_{uuid.uuid4().hex[:8]}", None
                else:
                    folder = tempfile.mkdtemp()
                    url, schema = f"sqlite:///{os.path.join(folder, 'b.db')}", "alkstore"
                try:
                    samples.append(fn(url, schema))
                finally:
                    if folder is not None:
                        shutil.rmtree(folder, ignore_errors=True)
                    else:
                        import psycopg

                        with psycopg.connect(url, autocommit=True) as conn:
                            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            print(f"{engine:<9} {label:<24} {_cell(samples)}", flush=True)


if __name__ == "__main__":
    main()
