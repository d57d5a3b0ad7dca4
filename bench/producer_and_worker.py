"""A producer and a worker in one process: does enqueuing flat out starve the worker?

    .venv/bin/python bench/producer_and_worker.py --pg URL [--concurrency 32] [--runs 3]

The shape of a small app (and of every adapter of the pgjqb harness): one
event loop runs a producer (``defer_many`` of up to 128 jobs every 10 ms,
offering ``--rate`` jobs/s; ``--rate 0``: back to back, as fast as the store
takes them) and ``app.worker(concurrency=C)`` on a 1 ms job. Two rows per
run, interleaved, each on a fresh store:

* **no producer**: the backlog is enqueued first (sized to outlast the
  window: the script says so if it ran dry), then the worker alone;
* **producer flat out**: an empty queue, then producer and worker together.

Completions/s are counted over ``--seconds`` after ``--warmup``; the ratio
row is producer ÷ no-producer (the pgjqb issue asks for ≥ 0.8 at C = 32).
Loop lag p99 is how late a 10 ms timer fires: the event loop's own health.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import percentile

import alkstore

QUEUE = "pw_bench"
BATCH = 128
TICK_S = 0.010


class _Discard(io.TextIOBase):
    def write(self, s: str) -> int:
        return len(s)


class Run:
    """One row's measurements."""

    def __init__(self) -> None:
        self.done = 0
        self.completions_s = 0.0
        self.enqueued_s = 0.0
        self.lag_p99_ms = 0.0
        self.end_backlog = 0
        self.ran_dry = False


def _app(url: str, schema: str, run: Run, work_ms: float) -> tuple[alkstore.App, alkstore.Task]:
    app = alkstore.App(url, schema=schema)

    @app.task(queue=QUEUE, name="job")
    async def job(seq: int, pad: str = "") -> None:
        if work_ms:
            await asyncio.sleep(work_ms / 1000.0)
        run.done += 1

    return app, job


async def _lag_probe(samples: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(TICK_S)
        samples.append((time.perf_counter() - t0 - TICK_S) * 1000.0)


async def _produce(job: alkstore.Task, rate: float, stop: asyncio.Event, out: list[int]) -> None:
    loop = asyncio.get_running_loop()
    seq, credit, last = 0, 0.0, loop.time()
    pad = "x" * 176  # a 256-byte payload, as in the harness
    while not stop.is_set():
        if rate > 0:
            await asyncio.sleep(max(0.0, TICK_S - (loop.time() - last)))
            now = loop.time()
            credit, last = credit + rate * (now - last), now
            n = min(BATCH, int(credit))
            if n < 1:
                continue
            credit -= n
        else:
            n = BATCH
        await job.defer_many([{"seq": seq + i, "pad": pad} for i in range(n)])
        seq += n
        out[0] = seq
        if rate <= 0:
            await asyncio.sleep(0)


async def one_row(
    url: str,
    concurrency: int,
    producer: bool,
    rate: float,
    warmup: float,
    seconds: float,
    work_ms: float,
) -> Run:
    schema = f"pw_{uuid.uuid4().hex[:8]}"
    run = Run()
    app, job = _app(url, schema, run, work_ms)
    async with app:
        store = app.store
        backlog = 0
        if not producer:
            # enough for the window at 1.5× the best rate a worker of this size reached here
            backlog = int(max(20_000, 12_000 * (warmup + seconds) * 1.5))
            pad = "x" * 176
            for start in range(0, backlog, 1000):
                await job.defer_many(
                    [{"seq": i, "pad": pad} for i in range(start, min(start + 1000, backlog))]
                )
        stop = asyncio.Event()
        lags: list[float] = []
        produced = [0]
        worker = app.worker([QUEUE], concurrency=concurrency, handle_signals=False)
        tasks = [asyncio.create_task(worker.run()), asyncio.create_task(_lag_probe(lags, stop))]
        if producer:
            tasks.append(asyncio.create_task(_produce(job, rate, stop, produced)))
        await asyncio.sleep(warmup)
        d0, p0, t0 = run.done, produced[0], time.perf_counter()
        lags.clear()
        await asyncio.sleep(seconds)
        d1, p1, dt = run.done, produced[0], time.perf_counter() - t0
        stop.set()
        worker.stop(force=True)
        await asyncio.gather(*tasks, return_exceptions=True)
        run.completions_s = (d1 - d0) / dt
        run.enqueued_s = (p1 - p0) / dt
        run.lag_p99_ms = percentile(lags, 99)
        stats = {s.queue: s for s in await store.admin().stats()}
        s = stats.get(QUEUE)
        run.end_backlog = 0 if s is None else s.pending + s.delayed
        run.ran_dry = not producer and run.end_backlog == 0
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return run


def _med(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg", default="postgresql://root@127.0.0.1:5432/test")
    parser.add_argument("--concurrency", default="32")
    parser.add_argument("--rate", type=float, default=8000.0, help="offered jobs/s; 0: unpaced")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--work-ms", type=float, default=1.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=_Discard(), force=True)
    offered = "back to back" if args.rate <= 0 else f"{args.rate:,.0f}/s offered"
    print(
        f"producer + worker in one process, PostgreSQL, {args.work_ms:g} ms job, producer "
        f"{offered}, window {args.seconds:g} s after {args.warmup:g} s, median of {args.runs}"
    )
    for c in [int(x) for x in args.concurrency.split(",")]:
        alone: list[Run] = []
        busy: list[Run] = []
        for _ in range(args.runs):  # interleaved
            for producer, out in ((False, alone), (True, busy)):
                out.append(
                    asyncio.run(
                        one_row(
                            args.pg,
                            c,
                            producer,
                            args.rate,
                            args.warmup,
                            args.seconds,
                            args.work_ms,
                        )
                    )
                )
        for label, runs in (("no producer", alone), ("producer flat out", busy)):
            rates = [r.completions_s for r in runs]
            dry = " (BACKLOG RAN DRY: raise it)" if any(r.ran_dry for r in runs) else ""
            enq = _med([r.enqueued_s for r in runs])
            print(
                f"c={c:<4} {label:<18} completions {_med(rates):>8,.0f}/s "
                f"[{min(rates):,.0f}–{max(rates):,.0f}]  enqueued {enq:>8,.0f}/s"
                f"  end backlog {_med([float(r.end_backlog) for r in runs]):>9,.0f}"
                f"  loop lag p99 {_med([r.lag_p99_ms for r in runs]):6.1f} ms{dry}",
                flush=True,
            )
        ratio = _med([r.completions_s for r in busy]) / _med([r.completions_s for r in alone])
        print(f"c={c:<4} ratio producer / no producer: {ratio:.2f}", flush=True)


if __name__ == "__main__":
    main()
