"""What a wake's claim statement costs, part by part (PostgreSQL; issue #28).

    .venv/bin/python bench/claim_in_wake.py [--rounds 150] [--url postgresql://...]

A wake claims right after another session's commit, on a connection idle for
20-50 ms: not the back-to-back case, where the whole claim and a bare one
differ by ~0.05 ms. Each round sleeps 20-50 ms, enqueues one job with the
queue API, then times one claim of it, the kinds taking turns round by round:

- ``api``: ``queue.claim_batch(worker, 1)`` (the engine's claim statement on its
  kept claim connection, and the Python around it);
- ``claim``: the engine's claim statement alone, on a psycopg connection of its own;
- ``no swept``: without the arm that buries lapsed claims with no attempts left;
- ``no lapsed``: without the arm that takes over lapsed claims (and its notes);
- ``neither``: without both;
- ``lean``: the engine's ``claim_lean`` (the claim when no settings row gates the
  queue and no claim of it lapsed: no arms), if the checkout has it;
- ``bare``: the claim as a bare ``UPDATE … WHERE id = ANY(ARRAY(SELECT … FOR
  UPDATE SKIP LOCKED))`` returning three columns (the peers' and raw SQL's shape).

Prints the median and p90 per kind, in ms. A scratch schema, dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import uuid
from typing import Any

import psycopg

import alkstore

BARE = """UPDATE {s}.alk_jobs SET state = 'processing', attempts = attempts + 1, worker_id = 'w',
    claim_expires_at = now() + interval '300 seconds'
WHERE id = ANY(ARRAY(SELECT id FROM {s}.alk_jobs
    WHERE queue = %(queue)s AND state = 'pending' AND run_at <= now()
    ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED))
RETURNING id, payload, attempts"""

_NO_LAPSED = "lapsed AS MATERIALIZED (SELECT id, priority, run_at FROM pending WHERE false), "


def _cut(sql: str, start: str, end: str, put: str = "") -> str:
    i, j = sql.index(start), sql.index(end)
    return sql[:i] + put + sql[j:]


def _without_announced(sql: str) -> str:
    head = sql[: sql.index("announced AS MATERIALIZED (")].rstrip().rstrip(",")
    marker = sql.index("UNION ALL\nSELECT NULL::bigint")
    return head + "\nSELECT * FROM claimed\n" + sql[marker:]


def variants(claim: str, schema: str) -> dict[str, str]:
    """The claim statement and its cut-down forms (see the module)."""
    no_swept = _cut(claim, "swept AS (", "pending AS MATERIALIZED")
    no_lapsed = _without_announced(
        _cut(claim, "lapsed AS MATERIALIZED (", "chosen AS MATERIALIZED", _NO_LAPSED)
    )
    neither = _without_announced(
        _cut(no_swept, "lapsed AS MATERIALIZED (", "chosen AS MATERIALIZED", _NO_LAPSED)
    )
    return {
        "claim": claim,
        "no swept": no_swept,
        "no lapsed": no_lapsed,
        "neither": neither,
        "bare": BARE.format(s=schema),
    }


async def main(url: str, rounds: int) -> None:
    schema = "bench_wake_" + uuid.uuid4().hex[:8]
    store = await alkstore.connect(url, schema=schema)
    q: Any = store._engine.q  # type: ignore[attr-defined]
    claim = q["claim"].decode() if isinstance(q["claim"], bytes) else str(q["claim"])
    sqls = variants(claim, schema)
    if "claim_lean" in q:  # the claim when nothing is in its way (no gate, none lapsed)
        sqls["lean"] = q["claim_lean"]
    conns = {k: await psycopg.AsyncConnection.connect(url, autocommit=True) for k in sqls}
    kinds = ["api", *sqls]
    queues = {k: store.queue("q" + str(i)) for i, k in enumerate(kinds)}
    times: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        for n in range(rounds * len(kinds)):
            kind = kinds[n % len(kinds)]
            queue = queues[kind]
            await asyncio.sleep(random.uniform(0.02, 0.05))
            await queue.enqueue(b"x")
            if kind == "api":
                t0 = time.perf_counter()
                handles = await queue.claim_batch("w", 1)
                times[kind].append(time.perf_counter() - t0)
                await handles[0].ack()
                continue
            params = {
                "queue": queue.name,
                "worker": "w",
                "n": 1,
                "exhausted_error": "x",
                "gated": True,
            }
            conn = conns[kind]
            t0 = time.perf_counter()
            rows = await (await conn.execute(sqls[kind], params, binary=True)).fetchall()
            times[kind].append(time.perf_counter() - t0)
            assert rows and rows[0][0] is not None, (kind, rows)
            await conn.execute(f"DELETE FROM {schema}.alk_jobs WHERE id = %s", (rows[0][0],))
    finally:
        await conns["bare"].execute(f"DROP SCHEMA {schema} CASCADE")
        for conn in conns.values():
            await conn.close()
        await store.close()
    print(f"one claim of 1 right after an enqueue, 20-50 ms idle, {rounds} rounds (ms)")
    for kind, xs in times.items():
        xs = sorted(xs[5:])  # the first rounds plan the statements
        print(
            f"  {kind:10s} p50 {statistics.median(xs) * 1e3:6.3f}   "
            f"p90 {xs[int(len(xs) * 0.9)] * 1e3:6.3f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://root@127.0.0.1:5432/test")
    parser.add_argument("--rounds", type=int, default=150)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.rounds))
