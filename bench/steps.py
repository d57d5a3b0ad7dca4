"""A job's life (#24): the cost of a durable step and of progress reports.

    .venv/bin/python bench/steps.py [--steps 300] [--runs 5]
                                    [--engines sqlite,sqlite-normal,postgres]
                                    [--dbos /path/to/venv/bin/python]

1. Step round trip: a claimed job's ``JobLife`` runs ``--steps`` new steps in a
   row (each returns a small dict: JSON encoding, the fenced insert, commit);
   wall time and this process's CPU time per step, median of ``--runs`` runs.
2. Signal to resume: a job parked in ``wait_for``, the time from ``store.signal``
   to the handler running again (the wake; the worker's re-poll is 30 s).
3. Progress at ~1,000 calls/s from one handler for 3 s: how many calls were
   made, how many writes reached the database (coalesced to one per 0.25 s),
   and the cost of one ``progress()`` call.
4. With ``--dbos PYTHON`` (an interpreter with ``dbos`` installed, kept out of
   the project's dependencies), DBOS Transact's step checkpoint in the same
   run: a workflow of ``--steps`` steps, wall and CPU time per step, on SQLite
   and PostgreSQL (``bench/dbos_steps.py`` runs in that interpreter).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    PG_ADMIN_URL,
    engine_home,
    fresh_target,
    median,
    percentile,
    postgres_available,
    render_table,
)

import alkstore
from alkstore.worker import current_job
from alkstore.worker.job_life import JobLife


async def step_run(url: str, kwargs: dict[str, Any], steps: int) -> tuple[float, float]:
    """Seconds of wall and CPU time per step, for ``steps`` steps of one job."""
    async with await alkstore.connect(url, **kwargs) as store:
        queue = store.queue("bench_steps", alkstore.QueueOpts(visibility_timeout_s=600))
        await queue.enqueue("x")
        handle = await queue.claim_one("bench")
        assert handle is not None
        life = JobLife(handle, asyncio.get_running_loop())
        await life.step("warm", lambda: 0)  # the steps' first read, and a warm connection
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(steps):
            await life.step(f"s{i}", lambda i=i: {"i": i, "ok": True})
        return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


async def progress_run(url: str, kwargs: dict[str, Any], seconds: float) -> dict[str, float]:
    """A handler calling progress() about every millisecond for ``seconds``."""
    app = alkstore.App(url, **kwargs)
    out: dict[str, float] = {}

    @app.task(queue="bench_progress", name="reporter")
    async def reporter() -> None:
        job = current_job()
        assert job is not None
        calls, spent = 0, 0.0
        start = time.perf_counter()
        while (now := time.perf_counter()) - start < seconds:
            t0 = time.perf_counter()
            job.progress(min((now - start) / seconds, 1.0), "working")
            spent += time.perf_counter() - t0
            calls += 1
            await asyncio.sleep(max(start + calls / 1000 - time.perf_counter(), 0))  # 1,000/s
        out["calls"], out["elapsed"], out["call_s"] = calls, time.perf_counter() - start, spent
        worker.stop()

    writes = 0
    async with app:
        engine = app.store._engine
        original = engine.put_progress

        async def counted(*args: Any) -> bool:
            nonlocal writes
            writes += 1
            return await original(*args)

        engine.put_progress = counted  # type: ignore[method-assign]  # counts real writes
        await reporter.defer()
        worker = app.worker(concurrency=1, handle_signals=False, poll_interval_s=0.5)
        await worker.run()
    out["writes"] = writes
    return out


async def signal_run(url: str, kwargs: dict[str, Any], probes: int) -> list[float]:
    """Seconds from ``store.signal`` to the parked handler's ``wait_for`` returning."""
    app = alkstore.App(url, **kwargs)
    resumed: asyncio.Queue[float] = asyncio.Queue()

    @app.task(queue="bench_signal", name="waiter")
    async def waiter() -> None:
        job = current_job()
        assert job is not None
        await job.wait_for("go")
        await resumed.put(time.perf_counter())

    delays = []
    async with app:
        # a re-poll far slower than the wake: only the wake brings the job back soon
        worker = app.worker(concurrency=1, handle_signals=False, poll_interval_s=30)
        running = asyncio.create_task(worker.run())
        queue = app.store.queue("bench_signal")
        for _ in range(probes):
            job_id = await waiter.defer()
            while (
                not (job := await queue.get_job(job_id))
                or job.state != "pending"
                or not (await queue.attempts(job_id))
            ):
                await asyncio.sleep(0.01)  # parked: given back and recorded
            t0 = time.perf_counter()
            await app.store.signal(job_id, "go")
            delays.append(await asyncio.wait_for(resumed.get(), 60) - t0)
        worker.stop()
        await running
    return delays


def run_dbos(python: str, engine: str, pg_url: str, steps: int, runs: int) -> dict[str, Any]:
    script = Path(__file__).with_name("dbos_steps.py")
    done = subprocess.run(
        [python, str(script), engine, pg_url, str(steps), str(runs)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--engines", default="sqlite,sqlite-normal,postgres")
    parser.add_argument("--progress-s", type=float, default=3.0)
    parser.add_argument("--signals", type=int, default=20, help="signal → resume probes")
    parser.add_argument("--dbos", default=None, help="a Python with dbos installed")
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if "postgres" in engines and not postgres_available():
        print(f"PostgreSQL unreachable at {PG_ADMIN_URL}: skipped")
        engines.remove("postgres")
    rows, prows, srows = [], [], []
    for engine in engines:
        # "sqlite-normal": SQLite with ?synchronous=normal (no fsync per commit, WAL)
        base, query = (
            ("sqlite", "?synchronous=normal") if engine == "sqlite-normal" else (engine, "")
        )
        with engine_home(base) as home:
            walls, cpus = [], []
            for _ in range(args.runs):
                target = fresh_target(base, home, query)
                wall, cpu = await step_run(target.url, target.kwargs(), args.steps)
                walls.append(wall)
                cpus.append(cpu)
            ours = median(walls) * 1e3
            rows.append([engine, "alkstore", f"{ours:.3f}", f"{median(cpus) * 1e3:.3f}", ""])
            if args.dbos and not query:
                found = run_dbos(args.dbos, engine, home, args.steps, args.runs)
                if "error" in found:
                    print(f"DBOS on {engine} failed: {found['error']}")
                else:
                    rows[-1][4] = f"{ours / found['wall_ms']:.2f}"
                    dbos = f"DBOS {found['version']}"
                    cells = [f"{found['wall_ms']:.3f}", f"{found['cpu_ms']:.3f}"]
                    rows.append([engine, dbos, *cells, ""])
            target = fresh_target(base, home, query)
            delays = await signal_run(target.url, target.kwargs(), args.signals)
            srows.append(
                [engine, f"{median(delays) * 1e3:.2f}", f"{percentile(delays, 99) * 1e3:.2f}"]
            )
            target = fresh_target(base, home, query)
            p = await progress_run(target.url, target.kwargs(), args.progress_s)
            prows.append(
                [
                    engine,
                    f"{p['calls'] / p['elapsed']:.0f}",
                    f"{int(p['calls'])}",
                    f"{int(p['writes'])}",
                    f"{p['writes'] / p['elapsed']:.1f}",
                    f"{p['call_s'] / p['calls'] * 1e6:.2f}",
                ]
            )
    columns = ["engine", "who", "ms per step (wall)", "ms per step (client CPU)", "ours/DBOS"]
    title = f"Durable step round trip ({args.steps} steps, median of {args.runs})"
    print(render_table(title, columns, rows))
    print(
        render_table(
            f"Progress from one handler for {args.progress_s:g}s",
            ["engine", "calls/s", "calls", "writes", "writes/s", "µs per call"],
            prows,
        )
    )
    print(
        render_table(
            f"Signal → parked handler resumed ({args.signals} probes; worker re-poll 30 s)",
            ["engine", "p50 ms", "p99 ms"],
            srows,
        )
    )
    print(f"(python {sys.version.split()[0]}, {os.cpu_count()} cores)")


if __name__ == "__main__":
    asyncio.run(main())
