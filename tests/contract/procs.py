"""Worker processes for the multi-process contract tests (run as a script, never imported).

    procs.py drain   URL SCHEMA QUEUE WORKER   claim+ack until empty; print [[id, attempts], ...]
    procs.py lossy   URL SCHEMA QUEUE WORKER   the same, but abandons some first claims (a
                                               worker that "dies"); prints [[id, attempts, acked]]
    procs.py produce URL SCHEMA QUEUE PAYLOAD  enqueue one job; print its id
    procs.py crash   URL SCHEMA QUEUE PAYLOAD  enqueue, claim+fail another, then os._exit at once
    procs.py consume URL SCHEMA QUEUE N POLL   queue.jobs(...) until N jobs; print each payload,
                                               then (but after the Nth) ``waiting`` once its
                                               claim loop waits with nothing to claim
    procs.py migrate URL SCHEMA -              connect with the test-only migrations added
                                               (after a go line); print ok
    procs.py dedupe  URL SCHEMA QUEUE KEY WINDOW  (after ready/go) enqueue_unique with the key
                                               (WINDOW "-" for none); print [id, duplicate]

``drain`` and ``migrate`` print ``ready`` once connected and waits for a line on stdin before it
starts, so every worker begins at the same moment.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys

import alkstore


async def drain(url: str, schema: str, queue: str, worker: str) -> None:
    claimed: list[list[int]] = []
    async with await alkstore.connect(url, schema=schema) as store:
        q = store.queue(queue)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        rng = random.Random(worker)
        empty = 0
        while empty < 3:  # "empty" three times in a row: the backlog is drained
            n = rng.choice([1, 1, 2, 5])
            handles = await q.claim_batch(worker, n)
            if not handles:
                empty += 1
                await asyncio.sleep(0.01)  # real time: a child's pace between empty claims
                continue
            empty = 0
            for h in handles:
                claimed.append([h.job.id, h.job.attempts])
                if not await h.ack():
                    raise SystemExit(f"ack refused for job {h.job.id}")
    print(json.dumps(claimed), flush=True)


async def lossy(url: str, schema: str, queue: str, worker: str, quiet_s: float) -> None:
    claimed: list[list[int]] = []
    async with await alkstore.connect(url, schema=schema) as store:
        q = store.queue(queue)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        rng = random.Random(worker)
        loop = asyncio.get_running_loop()
        idle_since = None
        while idle_since is None or loop.time() - idle_since < quiet_s:
            handles = await q.claim_batch(worker, rng.choice([1, 2, 4]))
            if not handles:
                idle_since = idle_since or loop.time()
                await asyncio.sleep(0.02)  # real time: a child's pace; quiet_s is wall time
                continue
            idle_since = None
            for h in handles:
                if h.job.attempts == 1 and rng.random() < 0.05:
                    claimed.append([h.job.id, h.job.attempts, 0])  # abandoned
                    continue
                claimed.append([h.job.id, h.job.attempts, int(await h.ack())])
    print(json.dumps(claimed), flush=True)


async def produce(url: str, schema: str, queue: str, payload: str) -> None:
    async with await alkstore.connect(url, schema=schema) as store:
        print(await store.queue(queue).enqueue(payload), flush=True)


async def crash(url: str, schema: str, queue: str, payload: str) -> None:
    store = await alkstore.connect(url, schema=schema)
    q = store.queue(queue)
    kept = await q.enqueue(payload)
    dead = await q.enqueue(payload + " (dead)")
    handle = await q.claim_one("crasher")
    assert handle is not None and handle.job.id == kept
    await q.cancel(dead)  # rows: kept processing, dead gone
    print(kept, dead, flush=True)
    os._exit(0)  # no close, no flush, no cleanup: a crash right after the commits


async def consume(url: str, schema: str, queue: str, n: int, poll: float) -> None:
    async with await alkstore.connect(url, schema=schema) as store:
        q = store.queue(queue)
        got = 0
        announcers: list[asyncio.Task[None]] = []  # held: asyncio keeps tasks only weakly
        async for handle in q.jobs("consumer", poll_interval_s=poll):
            await handle.ack()
            print(handle.job.payload.decode(), flush=True)
            got += 1
            if got >= n:
                break
            announcers.append(asyncio.create_task(_announce_idle(store)))


async def _announce_idle(store: alkstore.Store) -> None:
    """Print ``waiting`` once the claim loop waits: the parent's readiness signal (``idle``
    is clear while the loop body runs, so what this sees is the loop's next wait)."""
    (loop,) = store._loops
    await loop.idle.wait()
    print("waiting", flush=True)


async def migrate(url: str, schema: str) -> None:
    import catalog  # beside this script

    from alkstore.engines.postgres import migrator as pg_migrate
    from alkstore.engines.sqlite import migrator as sqlite_migrate

    engine = "sqlite" if url.startswith("sqlite") else "postgres"
    module = sqlite_migrate if engine == "sqlite" else pg_migrate
    module.MIGRATIONS = catalog.with_fixtures(engine)  # type: ignore[misc]
    print("ready", flush=True)
    sys.stdin.readline()
    store = await alkstore.connect(url, schema=schema)
    await store.close()
    print("ok", flush=True)


async def dedupe(url: str, schema: str, queue: str, key: str, window: str) -> None:
    async with await alkstore.connect(url, schema=schema) as store:
        q = store.queue(queue)
        opts = alkstore.EnqueueOpts(
            dedupe_key=key, dedupe_window_s=None if window == "-" else float(window)
        )
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        got = await q.enqueue_unique(f"from {os.getpid()}", opts)
    print(json.dumps([got.id, got.duplicate]), flush=True)


def main(argv: list[str]) -> None:
    command, url, schema, queue, *rest = argv
    if command == "drain":
        asyncio.run(drain(url, schema, queue, rest[0]))
    elif command == "lossy":
        asyncio.run(lossy(url, schema, queue, rest[0], float(rest[1])))
    elif command == "produce":
        asyncio.run(produce(url, schema, queue, rest[0]))
    elif command == "crash":
        asyncio.run(crash(url, schema, queue, rest[0]))
    elif command == "consume":
        asyncio.run(consume(url, schema, queue, int(rest[0]), float(rest[1])))
    elif command == "migrate":
        asyncio.run(migrate(url, schema))
    elif command == "dedupe":
        asyncio.run(dedupe(url, schema, queue, rest[0], rest[1]))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
