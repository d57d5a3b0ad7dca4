"""Worker processes for the PostgreSQL-only tests (run as a script, never imported).

    pg_workers.py drain   URL SCHEMA QUEUE NAME   2 concurrent claimers until empty;
                                                  print [[id, attempts, claimer], ...]
    pg_workers.py connect URL SCHEMA              connect (migrating); print "ok"

Both print ``ready`` once started and wait for a line on stdin, so every process
begins at the same moment.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys

import alkstore


def _gate() -> None:
    print("ready", flush=True)
    sys.stdin.readline()


async def drain(url: str, schema: str, queue: str, name: str) -> None:
    claims: list[list[object]] = []
    async with await alkstore.connect(url, schema=schema, pool_max=3) as store:
        q = store.queue(queue)
        await asyncio.get_running_loop().run_in_executor(None, _gate)

        async def claimer(worker: str) -> None:
            rng = random.Random(worker)
            empty = 0
            while empty < 3:  # empty three times in a row: the backlog is drained
                n = rng.choice([1, 1, 7, 50, 200])
                handles = await q.claim_batch(worker, n)
                if len(handles) > n:
                    raise SystemExit(f"claim of {n} returned {len(handles)} rows")
                if not handles:
                    empty += 1
                    await asyncio.sleep(0.01)
                    continue
                empty = 0
                claims.extend([h.job.id, h.job.attempts, worker] for h in handles)
                if n == 1:
                    if not await handles[0].ack():
                        raise SystemExit(f"ack refused for job {handles[0].job.id}")
                elif await q.ack_batch([h.job.id for h in handles]) != len(handles):
                    raise SystemExit("ack_batch refused some jobs")

        await asyncio.gather(claimer(f"{name}-a"), claimer(f"{name}-b"))
    print(json.dumps(claims), flush=True)


async def connect(url: str, schema: str) -> None:
    # Gate first: all processes race on the very first connect to a new schema.
    await asyncio.get_running_loop().run_in_executor(None, _gate)
    async with await alkstore.connect(url, schema=schema, pool_min=1, pool_max=1):
        pass
    print("ok", flush=True)


def main(argv: list[str]) -> None:
    command, url, schema, *rest = argv
    if command == "drain":
        asyncio.run(drain(url, schema, rest[0], rest[1]))
    elif command == "connect":
        asyncio.run(connect(url, schema))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
