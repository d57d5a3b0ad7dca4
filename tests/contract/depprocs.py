"""Processes for the dependency contract tests (run as a script, never imported).

depprocs.py fanin URL SCHEMA PARENTQ CHILDQ WORKER
    (after ready/go) claim parents in batches and ack them, by turns through
    handle.ack(), queue.ack_batch() and store.ack_many(); after each ack try to
    claim the child queue. Prints {"acks": [[id, t_start, t_end]],
    "children": [[id, t_claim_start, t_claim_end, db_claim_time]]}.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time

import alkstore


async def fanin(url: str, schema: str, parentq: str, childq: str, worker: str) -> None:
    acks: list[list[float]] = []
    children: list[list[float]] = []
    async with await alkstore.connect(url, schema=schema) as store:
        parents, child = store.queue(parentq), store.queue(childq)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        rng = random.Random(worker)
        empty = 0

        async def try_child() -> None:
            start = time.time()
            got = await child.claim_one(worker)
            if got is not None:
                job = got.job
                assert job.claim_expires_at is not None
                db_time = job.claim_expires_at.timestamp() - job.visibility_timeout_s
                children.append([job.id, start, time.time(), db_time])
                await got.ack()

        while empty < 3:
            handles = await parents.claim_batch(worker, rng.choice([1, 3, 8, 20]))
            if not handles:
                empty += 1
                await try_child()
                await asyncio.sleep(0.02)  # real time: a child's pace between empty claims
                continue
            empty = 0
            how = rng.choice(["ack", "ack_batch", "ack_many"])
            start = time.time()
            if how == "ack":
                for h in handles:
                    assert await h.ack()
            elif how == "ack_batch":
                assert await parents.ack_batch([h.job.id for h in handles]) == len(handles)
            else:
                assert all(await store.ack_many(handles))
            end = time.time()
            acks.extend([h.job.id, start, end] for h in handles)
            await try_child()
        for _ in range(3):
            await try_child()
    print(json.dumps({"acks": acks, "children": children}), flush=True)


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "fanin":
        asyncio.run(fanin(*args))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
