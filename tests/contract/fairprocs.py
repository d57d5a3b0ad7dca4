"""Worker processes for the fair-queue and debounce contract tests (a script, never imported).

    fairprocs.py fairlog  URL SCHEMA QUEUE WORKER QUOTA LOG
        claim+ack QUOTA jobs (or until empty); each job's payload is appended to
        LOG (one O_APPEND write per line) as its handler starts: the shared log
        is the order the workers ran jobs in
    fairprocs.py debounce URL SCHEMA QUEUE KEY COUNT DEBOUNCE
        enqueue COUNT times with debounce_key=KEY (DEBOUNCE "-": replace only);
        print [[id, replaced, payload], ...]
    fairprocs.py drain    URL SCHEMA QUEUE
        claim and run jobs until a second stdin line, then until empty; before
        each ack re-read the job: print [[id, claimed payload, payload then], ...]
    fairprocs.py aging    URL SCHEMA QUEUE WORKER SWEEP_S HANDLER_S LOG
        a real alkstore worker (concurrency 2, no prefetch, sweeping every
        SWEEP_S) running task ``hi`` (sleeps HANDLER_S) and ``lo`` (appends its
        job's run_at, claim time and priority, on the database's clock, to LOG)
        until SIGTERM

Each but ``aging`` prints ``ready`` once connected and waits for a line on stdin
before it starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import threading

import alkstore


async def _go() -> None:
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def fairlog(url: str, schema: str, queue: str, worker: str, quota: int, log: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    async with await alkstore.connect(url, schema=schema) as store:
        q = store.queue(queue)
        await _go()
        rng = random.Random(worker)
        done = empty = 0
        while done < quota and empty < 3:
            handles = await q.claim_batch(worker, min(rng.choice([1, 2, 4]), quota - done))
            if not handles:
                empty += 1
                await asyncio.sleep(0.01)  # real time: a child's pace between empty claims
                continue
            empty = 0
            for h in handles:
                os.write(fd, h.job.payload + b"\n")  # the handler starts
                done += 1
                if not await h.ack():
                    raise SystemExit(f"ack refused for job {h.job.id}")
    os.close(fd)


async def debounce(url: str, schema: str, queue: str, key: str, count: int, delay: str) -> None:
    opts = alkstore.EnqueueOpts(debounce_key=key, debounce_s=None if delay == "-" else float(delay))
    out = []
    async with await alkstore.connect(url, schema=schema) as store:
        q = store.queue(queue)
        await _go()
        for i in range(count):
            payload = f"{os.getpid()}:{i}"
            got = await q.enqueue_unique(payload, opts)
            out.append([got.id, got.duplicate, payload])
    print(json.dumps(out), flush=True)


async def drain(url: str, schema: str, queue: str) -> None:
    stop = threading.Event()
    ran = []
    async with await alkstore.connect(url, schema=schema) as store:
        q = store.queue(queue)
        await _go()
        threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
        while True:
            finishing = stop.is_set()
            handles = await q.claim_batch("drainer", 4)
            if not handles:
                if finishing:
                    break
                await asyncio.sleep(0.001)  # real time: a child's pace until its stop line
                continue
            for h in handles:
                await asyncio.sleep(0)  # let an enqueue race the running job
                now = await q.get_job(h.job.id)
                assert now is not None
                ran.append([h.job.id, h.job.payload.decode(), now.payload.decode()])
                await h.ack()
    print(json.dumps(ran), flush=True)


def aging(
    url: str, schema: str, queue: str, worker: str, sweep_s: float, handler_s: float, log: str
) -> None:
    app = alkstore.App(url, schema=schema)

    @app.task(queue=queue, name="hi")
    async def hi() -> None:
        await asyncio.sleep(handler_s)  # real time: the handler's run is part of the bound

    @app.task(queue=queue, name="lo")
    async def lo() -> None:
        job = alkstore.current_job()
        assert job is not None and job.claim_expires_at is not None
        claimed_at = job.claim_expires_at.timestamp() - job.visibility_timeout_s
        line = json.dumps([job.run_at.timestamp(), claimed_at, job.priority]) + "\n"
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, line.encode())
        os.close(fd)

    run = app.worker(
        [queue],
        concurrency=2,
        prefetch=0,
        worker_id=worker,
        sweep_interval_s=sweep_s,
        poll_interval_s=0.2,
        grace_s=2,
        schedule=False,
    )
    asyncio.run(run.run())


def main(argv: list[str]) -> None:
    command, url, schema, queue, *rest = argv
    if command == "fairlog":
        asyncio.run(fairlog(url, schema, queue, rest[0], int(rest[1]), rest[2]))
    elif command == "debounce":
        asyncio.run(debounce(url, schema, queue, rest[0], int(rest[1]), rest[2]))
    elif command == "drain":
        asyncio.run(drain(url, schema, queue))
    elif command == "aging":
        aging(url, schema, queue, rest[0], float(rest[1]), float(rest[2]), rest[3])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
