"""Child processes for the SQLite engine tests (run as a script, never imported).

sqlite_procs.py crash PATH MOVE AT  set a job up for MOVE, print its id, then die
                                    (os._exit) the moment a statement starting with AT
                                    starts (the move's DELETE, or its COMMIT)
sqlite_procs.py hammer PATH N      N rounds of enqueue / claim / ack / retry / transaction
sqlite_procs.py hold PATH SECONDS  hold the write lock (BEGIN IMMEDIATE) for SECONDS
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import time

import alkstore
from alkstore import EnqueueOpts, QueueOpts

SHORT = 0.2


def _die_on(conn: sqlite3.Connection, prefix: str) -> None:
    def trace(statement: str) -> None:
        if statement.lstrip().startswith(prefix):
            os._exit(1)  # the process dies between the move's statements

    conn.set_trace_callback(trace)


async def crash(path: str, move: str, at: str) -> None:
    store = await alkstore.connect(f"sqlite:///{path}")
    engine = store._engine
    q = store.queue("crash", QueueOpts(visibility_timeout_s=SHORT if move == "sweep" else 60))
    if move == "expire":
        job_id = await q.enqueue(b"x", EnqueueOpts(expires_in_s=SHORT))
        await asyncio.sleep(SHORT * 1.5)
    elif move == "sweep":
        job_id = await q.enqueue(b"x", EnqueueOpts(max_attempts=1))
        assert await q.claim_one("w") is not None
        await asyncio.sleep(SHORT * 1.5)
    else:
        max_attempts = 1 if move == "retry" else 3
        job_id = await q.enqueue(b"x", EnqueueOpts(max_attempts=max_attempts))
        handle = await q.claim_one("w")
        assert handle is not None
    print(job_id, flush=True)
    await engine._call(lambda: _die_on(engine._conn, at))  # type: ignore[attr-defined]
    if move == "fail":
        await handle.fail("boom")
    elif move == "retry":
        await handle.retry("boom")  # at budget: a dead-letter move
    elif move == "sweep":
        await q.claim_one("w")  # the pre-claim sweep
    elif move == "expire":
        await q.sweep_expired()
    print("survived", flush=True)  # the trace never fired: the test must fail
    await store.close()


async def hammer(path: str, rounds: int) -> None:
    async with await alkstore.connect(f"sqlite:///{path}") as store:
        q = store.queue("hammer", QueueOpts(max_attempts=1000))
        for i in range(rounds):
            await q.enqueue(f"{os.getpid()}-{i}")
            handle = await q.claim_one(f"w{os.getpid()}")
            if handle is not None:
                await (handle.ack() if i % 3 else handle.retry(delay_s=0))
            if i % 10 == 0:
                async with store.transaction() as tx:
                    await tx.queue("hammer").enqueue_many([b"a", b"b"])
                await q.ack_batch([h.job.id for h in await q.claim_batch("w", 2)])
                await store.notify("hammer-chan", str(i))
    print("ok", flush=True)


def hold(path: str, seconds: float) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("holding", flush=True)
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


def main(argv: list[str]) -> None:
    command, path, *rest = argv
    if command == "crash":
        asyncio.run(crash(path, rest[0], rest[1]))
    elif command == "hammer":
        asyncio.run(hammer(path, int(rest[0])))
    elif command == "hold":
        hold(path, float(rest[0]))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
