"""What a hand-off's probe costs an enqueue that hands nothing off (PostgreSQL).

    .venv/bin/python bench/handoff_enqueue.py [--jobs 3000] [--runs 5] [--pg URL]

Single ``queue.enqueue`` calls, one after another (a producer's one-row path), on a
fresh schema per run, the rows of each kind alternating run by run:

- ``handoff=off``: the plain insert (``insert_jobs``), as before hand-offs;
- ``handoff=on, no workers``: ``insert_handoff`` finding no worker row;
- ``handoff=on, 8 busy workers``: eight workers' rows for the queue, none idle (the
  probe tries each one's lock and hands nothing off: the most it pays).

Prints per kind the median rate with [min-max] and the client CPU per enqueue, and
the ratio to ``handoff=off``. No worker runs: the jobs stay pending.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import psycopg
from psycopg import sql

import alkstore

KINDS = ("handoff=off", "handoff=on, no workers", "handoff=on, 8 busy workers")


async def one(url: str, kind: str, jobs: int) -> tuple[float, float]:
    schema = "bench_ho_" + uuid.uuid4().hex[:8]
    store = await alkstore.connect(
        url, schema=schema, handoff="off" if kind == "handoff=off" else "on"
    )
    try:
        if "busy" in kind:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                for i in range(8):
                    await conn.execute(
                        sql.SQL(
                            "INSERT INTO {}.alk_handoff (worker_id, queues, channel, created_at)"
                            " VALUES (%s, ARRAY['bench'], %s, now())"
                        ).format(sql.Identifier(schema)),
                        (f"w{i}", f"alk_h_bench{i}"),
                    )
        q = store.queue("bench")
        for _ in range(200):  # warm: prepared statements, pool
            await q.enqueue(b"{}")
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(jobs):
            await q.enqueue(b"{}")
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu
        return jobs / wall, cpu / jobs * 1e6
    finally:
        await store.close()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pg", default="postgresql://root@127.0.0.1:5432/test")
    args = parser.parse_args()
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
    for run in range(args.runs):
        for kind in KINDS if run % 2 == 0 else reversed(KINDS):
            got[kind].append(await one(args.pg, kind, args.jobs))
    base = statistics.median(r for r, _ in got["handoff=off"])
    print(f"single enqueue, {args.jobs} per run, median of {args.runs} (alternating)")
    for kind in KINDS:
        rates = [r for r, _ in got[kind]]
        cpus = [c for _, c in got[kind]]
        rate = statistics.median(rates)
        print(
            f"{kind:28} {rate:8.0f}/s [{min(rates):.0f}-{max(rates):.0f}]"
            f"  client {statistics.median(cpus):5.1f} µs/enqueue  {rate / base:.3f}x"
        )


if __name__ == "__main__":
    asyncio.run(main())
