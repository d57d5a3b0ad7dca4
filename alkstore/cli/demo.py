"""``alkstore demo``: a producer and a few workers, each its own process, on one SQLite file.

The orchestrator (this process) resets ``alkstore-demo.db`` in a fresh temporary
folder, starts the workers (``alkstore worker alkstore.cli.demo_tasks:app``) and
the producer (``python -m alkstore.cli.demo produce …``), shows progress from
``store.admin().stats()``, and ends with a summary. Workers report retries and
probe latencies on the ``demo.events`` channel; the producer reports how many
jobs it has enqueued there too.

Throughput is measured over the bulk phase (first enqueue until no due job is
left); wake latency on probes the producer sends one at a time once the workers
are idle, from the producer's ``time.time()`` before ``defer`` to the handler's
start, across processes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import alkstore
from alkstore.cli.demo_tasks import EVENTS, QUEUE

__all__ = ["run_demo"]

FLAKY = 5  # jobs that fail once, then succeed
DOOMED = 1  # a job that fails every attempt (retried once, then dead)
POISON = 1  # a job that raises Fail (dead at once)
PROBES = 30
BATCH = 250
DEADLINE_S = 50.0


@dataclass
class Tally:
    enqueued: int = 0
    producer_done: bool = False
    retried: int = 0
    latencies: list[float] = field(default_factory=list)
    first_enqueue: float | None = None
    bulk_done: float | None = None
    bulk_processed: int = 0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def _listen(store: alkstore.Store, tally: Tally, ready: asyncio.Event) -> None:
    async with store.listen(EVENTS) as sub:
        ready.set()
        async for note in sub:
            kind, _, value = note.payload.partition(" ")
            if kind == "retry":
                tally.retried += 1
            elif kind == "probe":
                tally.latencies.append(float(value))
            elif kind == "enqueued":
                tally.enqueued += int(value)
                if tally.first_enqueue is None:
                    tally.first_enqueue = time.perf_counter()
            elif kind == "produced":
                tally.producer_done = True


def _spawn(args: list[str], log: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT, cwd=os.getcwd()
        )


async def _orchestrate(
    url: str, folder: str, count: int, workers: int, concurrency: int, console: Console
) -> int:
    total = count + FLAKY + DOOMED + POISON + PROBES
    tally = Tally()
    log = os.path.join(folder, "workers.log")
    async with await alkstore.connect(url) as store:  # creates the tables once
        ready = asyncio.Event()
        listener = asyncio.create_task(_listen(store, tally, ready))
        await ready.wait()
        procs = [
            _spawn(
                [
                    "alkstore",
                    "worker",
                    "alkstore.cli.demo_tasks:app",
                    "--url",
                    url,
                    "--concurrency",
                    str(concurrency),
                    "--log-level",
                    "warning",
                    "--grace",
                    "5",
                    "--worker-id",
                    f"demo-worker-{i + 1}",
                ],
                log,
            )
            for i in range(workers)
        ]
        producer = _spawn(["alkstore.cli.demo", "produce", url, str(count)], log)
        admin = store.admin()
        started = time.perf_counter()
        dead = live = 0
        ok = False
        try:
            with Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(
                    "{task.fields[rate]:>7} jobs/s  retried {task.fields[retried]}  "
                    "dead {task.fields[dead]}"
                ),
                TimeElapsedColumn(),
                console=console,
            ) as progress:
                bar = progress.add_task(
                    f"{workers} workers x {concurrency}", total=total, rate="-", retried=0, dead=0
                )
                while time.perf_counter() - started < DEADLINE_S:
                    stats = {s.queue: s for s in await admin.stats()}
                    s = stats.get(QUEUE)
                    live = (s.pending + s.delayed + s.processing) if s else 0
                    dead = s.dead if s else 0
                    done = max(tally.enqueued - live, 0)
                    now = time.perf_counter()
                    if (
                        tally.bulk_done is None
                        and tally.enqueued >= count
                        and s is not None
                        and s.pending + s.processing == 0
                    ):
                        tally.bulk_done, tally.bulk_processed = now, done
                    t0 = tally.first_enqueue
                    rate = f"{(done - dead) / (now - t0):,.0f}" if t0 and now > t0 else "-"
                    progress.update(
                        bar, completed=done, rate=rate, retried=tally.retried, dead=dead
                    )
                    if (
                        tally.producer_done
                        and tally.enqueued == total
                        and live == 0
                        and (len(tally.latencies) >= PROBES)
                    ):
                        ok = True
                        break
                    if producer.poll() not in (None, 0):
                        break
                    await asyncio.sleep(0.1)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in [*procs, producer]:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        dead_jobs = await admin.list_jobs(QUEUE, "dead")

    elapsed = time.perf_counter() - started
    if not ok:
        console.print(
            f"[red]demo did not finish in {DEADLINE_S:.0f}s[/] (enqueued {tally.enqueued}/"
            f"{total}, live {live}, probes {len(tally.latencies)}); worker log: {log}"
        )
        with open(log, errors="replace") as f:
            console.print(f.read()[-2000:], markup=False)
        return 1
    processed = total - dead
    bulk_s = (tally.bulk_done or time.perf_counter()) - (tally.first_enqueue or started)
    table = Table(title="alkstore demo", title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("store", url)
    table.add_row("workers", f"{workers} processes x concurrency {concurrency}")
    table.add_row(
        "jobs",
        f"{total} ({count} no-op, {FLAKY} flaky, {DOOMED} doomed, "
        f"{POISON} poison, {PROBES} probes)",
    )
    table.add_row("processed", str(processed))
    table.add_row("retried", str(tally.retried))
    table.add_row("dead-lettered", f"[red]{dead}[/]")
    table.add_row(
        "throughput",
        f"{tally.bulk_processed / bulk_s:,.0f} jobs/s "
        f"({tally.bulk_processed} jobs in {bulk_s:.2f}s, durable commits)",
    )
    lat = [v * 1000 for v in tally.latencies]
    table.add_row(
        "wake latency",
        f"p50 {statistics.median(lat):.1f} ms, p99 {_percentile(lat, 0.99):.1f} ms, "
        f"max {max(lat):.1f} ms (enqueue → start, across processes, {len(lat)} probes)",
    )
    table.add_row("total time", f"{elapsed:.1f}s")
    console.print(table)
    for job in dead_jobs:
        first = (job.last_error or "").splitlines()[0]
        console.print(f"  dead job {job.id}: attempts {job.attempts}/{job.max_attempts}: {first}")
    return 0


def run_demo(
    *, count: int = 3000, workers: int = 3, concurrency: int = 16, keep: bool = False
) -> int:
    """Run the demo; 0 when every job was accounted for."""
    console = Console(highlight=False)
    folder = tempfile.mkdtemp(prefix="alkstore-demo-")
    path = os.path.join(folder, "alkstore-demo.db")
    url = f"sqlite:///{path}"
    console.print(f"[bold]alkstore demo[/]: a fresh store at {path}")
    try:
        return asyncio.run(_orchestrate(url, folder, count, workers, concurrency, console))
    except KeyboardInterrupt:
        return 130
    finally:
        if keep:
            console.print(f"kept {path}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


# -- the producer process -------------------------------------------------------------
async def produce(url: str, count: int) -> None:
    """Enqueue the demo's jobs in batches, then probes one at a time once workers idle."""
    from alkstore.cli.demo_tasks import app, doomed, flaky, poison, probe, work

    app.url = url
    async with app:
        store = app.store
        await flaky.defer_many([{"n": i} for i in range(FLAKY)])
        await doomed.defer(n=0)
        await poison.defer(n=0)
        await store.notify(EVENTS, f"enqueued {FLAKY + DOOMED + POISON}")
        for start in range(0, count, BATCH):
            size = min(BATCH, count - start)
            await work.defer_many([{"n": start + i} for i in range(size)])
            await store.notify(EVENTS, f"enqueued {size}")
        admin = store.admin()
        while True:  # wait for idle workers: wake latency, not queueing delay
            s = {q.queue: q for q in await admin.stats()}.get(QUEUE)
            if s is None or s.pending + s.processing == 0:
                break
            await asyncio.sleep(0.02)
        for _ in range(PROBES):
            await probe.defer(sent=time.time())
            await asyncio.sleep(0.03)
        await store.notify(EVENTS, f"enqueued {PROBES}")
        await store.notify(EVENTS, "produced")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "produce":
        asyncio.run(produce(sys.argv[2], int(sys.argv[3])))
    else:
        sys.exit("usage: python -m alkstore.cli.demo produce URL COUNT")
