"""A bulk retry of 100,000 dead jobs while 4 worker processes drain another queue.

    .venv/bin/python bench/bulk.py [--dead 100000] [--workers 4] [--batch 500]
                                   [--quiet-s 10] [--runs 1] [--engine postgres|sqlite]

Each run, on a fresh store: ``--dead`` jobs made dead (enqueued with a short
expiry, then swept), a backlog in ``work``, and ``--workers`` worker processes
that claim one job and ack it in a loop, timing each claim. The run has three
windows: quiet (``--quiet-s``), the bulk action, quiet again. The action is
``retry`` on ``queue:dead state:dead`` in batches of ``--batch``, run in its own
process; that process is killed (SIGKILL) once half the jobs are done and a
second process resumes the action to its end. The script then checks that
exactly ``--dead`` jobs were requeued, none twice (the action's count, the
queue's counts, and every id once), and prints the workers' claim p50/p99 in
the quiet windows beside the same during the action, plus the action's rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import engine_home, fresh_target, median, percentile, render_table

import alkstore
from alkstore import EnqueueOpts, QueueOpts

HERE = Path(__file__).resolve()


# -- child processes ---------------------------------------------------------------
async def worker(url: str, schema: str, out: str) -> None:
    """Claim one job and ack it until told to stop (a line on stdin); write each
    claim's (start time, seconds) to ``out``."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    samples: list[tuple[float, float]] = []
    async with await alkstore.connect(url, schema=schema) as store:
        q = store.queue("work")
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)  # go

        def wait_for_stop() -> None:
            sys.stdin.readline()
            loop.call_soon_threadsafe(stop.set)

        stopping = loop.run_in_executor(None, wait_for_stop)
        name = f"w{os.getpid()}"
        while not stop.is_set():
            t0 = time.time()
            p0 = time.perf_counter()
            h = await q.claim_one(name)
            samples.append((t0, time.perf_counter() - p0))
            if h is None:
                await asyncio.sleep(0.01)
                continue
            await h.ack()
        await stopping
    Path(out).write_text(json.dumps(samples))


async def runner(url: str, schema: str, action_id: int, batch: int, half: int) -> None:
    """Run the action; print "half" once ``half`` jobs are done, then go on."""
    told = False

    def progress(a: alkstore.bulk.BulkAction) -> None:
        nonlocal told
        if not told and a.done >= half:
            told = True
            print("half", a.done, flush=True)

    async with await alkstore.connect(url, schema=schema) as store:
        done = await store.admin().bulk().run(action_id, batch=batch, on_batch=progress)
    print("finished", done.done, flush=True)


# -- one run -------------------------------------------------------------------------
async def _spawn(*args: str, stdin: bool = False) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE),
        *args,
        stdin=asyncio.subprocess.PIPE if stdin else None,
        stdout=asyncio.subprocess.PIPE,
    )


async def one_run(target: object, args: argparse.Namespace, tmp: str) -> dict[str, float]:
    url, schema = target.url, target.schema  # type: ignore[attr-defined]
    kw = target.kwargs()  # type: ignore[attr-defined]
    n = args.dead
    async with await alkstore.connect(url, **kw) as store:
        dead_q = store.queue("dead", QueueOpts(max_attempts=1))
        for start in range(0, n, 10_000):
            chunk = [f"d{i}".encode() for i in range(start, min(n, start + 10_000))]
            await dead_q.enqueue_many(chunk, EnqueueOpts(expires_in_s=0.2))
        await asyncio.sleep(0.3)  # past the expiry, then one sweep makes them dead
        swept = await dead_q.sweep_expired()
        assert swept.expired == n, swept
        work = store.queue("work")
        for _ in range(args.work // 10_000):
            await work.enqueue_many([b"w"] * 10_000)
        dead_ids = sorted(j.id for j in await _all(store, "queue:dead"))
        assert len(dead_ids) == n

        outs = [f"{tmp}/w{i}.json" for i in range(args.workers)]
        workers = [await _spawn("--worker", url, schema, out, stdin=True) for out in outs]
        for p in workers:
            assert p.stdout is not None
            assert (await p.stdout.readline()).strip() == b"ready"
        for p in workers:
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            await p.stdin.drain()
        await asyncio.sleep(args.quiet_s)  # the quiet window before

        ops = store.admin().bulk()
        a_start = time.time()
        action = await ops.start("retry", "queue:dead state:dead", actor="bench")
        first = await _spawn("--runner", url, schema, str(action.id), str(args.batch), str(n // 2))
        assert first.stdout is not None
        line = await first.stdout.readline()
        assert line.startswith(b"half"), line
        first.send_signal(signal.SIGKILL)
        await first.wait()
        cut = await ops.get(action.id)
        assert cut is not None and not cut.finished
        second = await _spawn("--runner", url, schema, str(action.id), str(args.batch), str(n + 1))
        said, _ = await second.communicate()
        a_end = time.time()
        assert said.split()[-2:] == [b"finished", str(n).encode()], said
        final = await ops.get(action.id)
        assert final is not None and final.finished

        await asyncio.sleep(args.quiet_s)  # the quiet window after
        for p in workers:
            assert p.stdin is not None
            p.stdin.write(b"stop\n")
            await p.stdin.drain()
        for p in workers:
            await p.wait()

        # exactly n requeued, none twice
        stats = {s.queue: s for s in await store.admin().stats()}
        requeued = sorted(j.id for j in await _all(store, "queue:dead"))
        exact = (
            final.done == n
            and stats["dead"].dead == 0
            and stats["dead"].pending == n
            and requeued == dead_ids
        )
        if not exact:
            raise SystemExit(f"NOT EXACT: done={final.done} stats={stats['dead']}")

    samples = [s for out in outs for s in json.loads(Path(out).read_text())]
    during = [d for t, d in samples if a_start <= t <= a_end]
    quiet = [d for t, d in samples if t < a_start or t > a_end]
    return {
        "killed_at": float(cut.done),
        "action_s": a_end - a_start,
        "rate": n / (a_end - a_start),
        "quiet_p50": percentile(quiet, 50) * 1000,
        "quiet_p99": percentile(quiet, 99) * 1000,
        "during_p50": percentile(during, 50) * 1000,
        "during_p99": percentile(during, 99) * 1000,
        "quiet_n": float(len(quiet)),
        "during_n": float(len(during)),
    }


async def _all(store: alkstore.Store, where: str) -> list[alkstore.Job]:
    found: list[alkstore.Job] = []
    after = None
    while True:
        page = await store.admin().find(where, after=after, limit=1000)
        found += page.jobs
        if page.after is None:
            return found
        after = page.after


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(worker(*sys.argv[2:5]))
        return
    if sys.argv[1:2] == ["--runner"]:
        url, schema, action_id, batch, half = sys.argv[2:7]
        asyncio.run(runner(url, schema, int(action_id), int(batch), int(half)))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--dead", type=int, default=100_000)
    parser.add_argument("--work", type=int, default=300_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--quiet-s", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--engine", choices=("postgres", "sqlite"), default="postgres")
    args = parser.parse_args()
    results = []
    with engine_home(args.engine) as home, tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            r = asyncio.run(one_run(fresh_target(args.engine, home), args, tmp))
            results.append(r)
            print(f"run {i + 1}: " + ", ".join(f"{k}={v:.2f}" for k, v in r.items()), flush=True)
    keys = ["quiet_p50", "quiet_p99", "during_p50", "during_p99", "action_s", "rate"]
    rows = [[f"{median([r[k] for r in results]):.2f}" for k in keys]]
    title = (
        f"bulk retry of {args.dead:,} dead jobs ({args.engine}, batch {args.batch}, killed at "
        f"half and resumed; {args.workers} workers claim+ack; median of {args.runs})"
    )
    cols = [
        "claim p50 quiet ms",
        "claim p99 quiet ms",
        "claim p50 during ms",
        "claim p99 during ms",
        "action s",
        "jobs/s",
    ]
    print(render_table(title, cols, rows))
    print(f"exactly {args.dead:,} requeued, none twice: yes (checked every run)")


if __name__ == "__main__":
    main()
