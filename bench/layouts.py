"""PostgreSQL job-table layouts under churn, in plain SQL (#27): one table vs a ring.

A prototype to choose the layout before building it into the engine, on a
scratch cluster of its own (``churn.py``'s): the same claim (``id =
ANY(ARRAY(SELECT … FOR UPDATE SKIP LOCKED LIMIT n))`` over a partial index of
pending rows, as alkstore's) and ack (``DELETE … WHERE id = ANY``) on

- ``table``: one table, fillfactor 70, alkstore's claim / processing indexes;
- ``ring``: the same table LIST-partitioned on a small ``part`` column, a ring
  of ``--ring`` partitions. Inserts go to the current one (the column's
  DEFAULT reads a one-row ring table); between drain batches a maintenance
  step advances the ring once the current partition took ``--cap`` jobs (and
  the next one is empty), and TRUNCATEs a partition that holds no live row
  (``lock_timeout`` 50 ms, re-checked under the lock; skipped on timeout).

Scenarios as ``churn.py``'s: ``waves`` (enqueue a wave, drain it, print pace,
dead tuples, heap and index sizes) and ``hold`` (a steady rate, an idle
transaction holding the xmin from ``--hold-at`` for ``--hold-for`` seconds).

    python bench/layouts.py waves --layout ring --autovacuum off --jobs 600000
    python bench/layouts.py hold --layout table --rate 2000 --hold-at 30 --hold-for 120
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import psycopg
from churn import hold_xmin, percentile, scratch_cluster

QUEUE = "churn"

_COLUMNS = """
    id bigint GENERATED ALWAYS AS IDENTITY,
    queue text NOT NULL,
    payload bytea NOT NULL,
    state text NOT NULL DEFAULT 'pending',
    priority integer NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now(),
    attempts integer NOT NULL DEFAULT 0,
    worker_id text,
    claim_expires_at timestamptz"""

_INDEXES = [
    "CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at, id) WHERE state = 'pending'",
    "CREATE INDEX jobs_processing ON jobs (queue, claim_expires_at) WHERE state = 'processing'",
]


def schema(layout: str, ring: int) -> list[str]:
    if layout == "table":
        return [
            f"CREATE TABLE jobs ({_COLUMNS}, PRIMARY KEY (id)) WITH (fillfactor = 70)",
            *_INDEXES,
        ]
    parts = [
        f"CREATE TABLE jobs_p{k} PARTITION OF jobs FOR VALUES IN ({k}) WITH (fillfactor = 70)"
        for k in range(ring)
    ]
    return [
        "CREATE TABLE ring (one boolean PRIMARY KEY DEFAULT true CHECK (one),"
        " cur smallint NOT NULL, start_id bigint NOT NULL)",
        "INSERT INTO ring VALUES (true, 0, 0)",
        "CREATE FUNCTION ring_current() RETURNS smallint LANGUAGE sql STABLE"
        " AS 'SELECT cur FROM ring'",
        f"CREATE TABLE jobs ({_COLUMNS}, part smallint NOT NULL DEFAULT ring_current())"
        " PARTITION BY LIST (part)",
        *parts,
        "CREATE INDEX jobs_id ON jobs (id)",
        *_INDEXES,
    ]


# The claim's pick walks the partial index; the UPDATE and the ack go by id only
# (`state || ''` keeps the planner off the partial indexes, as alkstore's ack).
CLAIM = """
UPDATE jobs SET state = 'processing', worker_id = 'w', attempts = attempts + 1,
       claim_expires_at = now() + interval '300 seconds'
WHERE id = ANY(ARRAY(
    SELECT id FROM jobs WHERE queue = %(q)s AND state = 'pending' AND run_at <= now()
    ORDER BY priority DESC, run_at, id LIMIT %(n)s FOR UPDATE SKIP LOCKED))
RETURNING id"""
ACK = "DELETE FROM jobs WHERE id = ANY(%(ids)s) AND (state || '') = 'processing'"
ENQUEUE = "INSERT INTO jobs (queue, payload) SELECT %(q)s, 'job' FROM generate_series(1, %(n)s)"


class Ring:
    """The ring's maintenance step (one connection, autocommit)."""

    def __init__(self, conn: psycopg.AsyncConnection, size: int, cap: int) -> None:
        self.conn, self.size, self.cap = conn, size, cap
        self.truncated = self.skipped = self.advanced = 0

    async def step(self) -> None:
        conn = self.conn
        row = await (await conn.execute("SELECT cur, start_id FROM ring")).fetchone()
        assert row is not None
        cur, start = row
        last = await (await conn.execute("SELECT last_value FROM jobs_id_seq")).fetchone()
        assert last is not None
        nxt = (cur + 1) % self.size
        if last[0] - start >= self.cap and await self._empty(nxt):
            await conn.execute("UPDATE ring SET cur = %s, start_id = %s", (nxt, last[0]))
            self.advanced += 1
            cur = nxt
        for k in range(self.size):
            if k == cur or not await self._dirty(k):
                continue
            try:
                async with conn.transaction():
                    await conn.execute("SET LOCAL lock_timeout = '50ms'")
                    await conn.execute(f"LOCK TABLE jobs_p{k} IN ACCESS EXCLUSIVE MODE")
                    if await self._empty(k):  # re-checked under the lock
                        await conn.execute(f"TRUNCATE jobs_p{k}")
                        self.truncated += 1
            except psycopg.errors.LockNotAvailable:
                self.skipped += 1

    async def _empty(self, k: int) -> bool:
        cur = await self.conn.execute(f"SELECT NOT EXISTS (SELECT 1 FROM jobs_p{k})")
        row = await cur.fetchone()
        return bool(row and row[0])

    async def _dirty(self, k: int) -> bool:
        cur = await self.conn.execute(f"SELECT pg_relation_size('jobs_p{k}') > 0")
        row = await cur.fetchone()
        return bool(row and row[0]) and await self._empty(k)


async def facts(conn: psycopg.AsyncConnection) -> str:
    cur = await conn.execute(
        "SELECT sum(s.n_dead_tup), sum(s.n_live_tup), sum(pg_relation_size(c.oid)),"
        " sum(pg_indexes_size(c.oid)) FROM pg_stat_user_tables s"
        " JOIN pg_class c ON c.oid = s.relid WHERE s.relname LIKE 'jobs%'"
    )
    row = await cur.fetchone()
    assert row is not None
    dead, live, heap, idx = (int(v or 0) for v in row)
    return (
        f"dead {dead:>9,}  live {live:>8,}  heap {heap / 2**20:6.1f} MiB"
        f"  indexes {idx / 2**20:6.1f} MiB"
    )


async def setup(
    url: str, layout: str, ring: int, cap: int
) -> tuple[psycopg.AsyncConnection, psycopg.AsyncConnection, Ring | None]:
    work = await psycopg.AsyncConnection.connect(url, autocommit=True)
    for statement in schema(layout, ring):
        await work.execute(statement)
    maint = await psycopg.AsyncConnection.connect(url, autocommit=True)
    return work, maint, (Ring(maint, ring, cap) if layout == "ring" else None)


async def waves(url: str, layout: str, ring: int, cap: int, jobs: int, wave: int) -> None:
    work, maint, rotor = await setup(url, layout, ring, cap)
    paces: list[float] = []
    for n in range(max(1, jobs // wave)):
        for start in range(0, wave, 1000):
            await work.execute(ENQUEUE, {"q": QUEUE, "n": min(1000, wave - start)})
        t0 = time.perf_counter()
        done = batches = 0
        while ids := [
            r[0] for r in await (await work.execute(CLAIM, {"q": QUEUE, "n": 1000})).fetchall()
        ]:
            done += (await work.execute(ACK, {"ids": ids})).rowcount
            batches += 1
            if rotor is not None and batches % 10 == 0:
                await rotor.step()
        if rotor is not None:
            await rotor.step()
        pace = done / (time.perf_counter() - t0)
        paces.append(pace)
        extra = (
            f"  ring: advanced {rotor.advanced} truncated {rotor.truncated} skipped {rotor.skipped}"
            if rotor
            else ""
        )
        print(f"wave {n + 1:3d}  {pace:9,.0f} jobs/s  {await facts(maint)}{extra}", flush=True)
    print(f"last wave / first wave: {paces[-1] / paces[0]:.2f}")
    await work.close()
    await maint.close()


async def hold(
    url: str,
    layout: str,
    ring: int,
    cap: int,
    rate: int,
    hold_at: float,
    hold_for: float,
    tail: float,
) -> None:
    work, maint, rotor = await setup(url, layout, ring, cap)
    producer = await psycopg.AsyncConnection.connect(url, autocommit=True)
    t_start = time.monotonic()
    stop = t_start + hold_at + hold_for + tail
    latencies: list[tuple[float, float]] = []

    async def produce() -> None:
        next_at = time.monotonic()
        while time.monotonic() < stop:
            await producer.execute(ENQUEUE, {"q": QUEUE, "n": max(1, rate // 10)})
            next_at += 0.1
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def consume() -> None:
        batches = 0
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            rows = await (await work.execute(CLAIM, {"q": QUEUE, "n": 100})).fetchall()
            latencies.append((time.monotonic() - t_start, time.perf_counter() - t0))
            if rows:
                await work.execute(ACK, {"ids": [r[0] for r in rows]})
            else:
                await asyncio.sleep(0.01)
            batches += 1
            if rotor is not None and batches % 50 == 0:
                await rotor.step()

    async def report() -> None:
        seen = 0
        side = await psycopg.AsyncConnection.connect(url, autocommit=True)
        while time.monotonic() < stop:
            await asyncio.sleep(10)
            window = [lat for _, lat in latencies[seen:]]
            seen = len(latencies)
            row = await (
                await side.execute("SELECT count(*) FROM jobs WHERE state = 'pending'")
            ).fetchone()
            if window:
                print(
                    f"{time.monotonic() - t_start:5.0f} s  claims {len(window):6d}"
                    f"  p50 {statistics.median(window) * 1e3:6.2f} ms"
                    f"  p99 {percentile(window, 99) * 1e3:7.2f} ms"
                    f"  backlog {row[0] if row else 0:>7}  {await facts(side)}",
                    flush=True,
                )
        await side.close()

    await asyncio.gather(produce(), consume(), hold_xmin(url, hold_at, hold_for), report())
    before = [lat for t, lat in latencies if t < hold_at]
    during = [lat for t, lat in latencies if hold_at <= t < hold_at + hold_for]
    if before and during:
        p_before, p_during = percentile(before, 99), percentile(during, 99)
        print(
            f"claim p99 before {p_before * 1e3:.2f} ms, during the hold "
            f"{p_during * 1e3:.2f} ms: {p_during / p_before:.2f}x"
        )
    for conn in (work, maint, producer):
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=["waves", "hold"])
    parser.add_argument("--layout", choices=["table", "ring"], default="ring")
    parser.add_argument("--ring", type=int, default=4, help="partitions in the ring")
    parser.add_argument("--cap", type=int, default=50_000, help="jobs per partition before a turn")
    parser.add_argument("--autovacuum", choices=["on", "off"], default="on")
    parser.add_argument("--jobs", type=int, default=600_000)
    parser.add_argument("--wave", type=int, default=100_000)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--hold-at", type=float, default=60)
    parser.add_argument("--hold-for", type=float, default=600)
    parser.add_argument("--tail", type=float, default=30)
    args = parser.parse_args()
    with scratch_cluster(args.autovacuum == "on") as url:
        print(f"{args.scenario}, layout {args.layout}, autovacuum {args.autovacuum}", flush=True)
        if args.scenario == "waves":
            asyncio.run(waves(url, args.layout, args.ring, args.cap, args.jobs, args.wave))
        else:
            asyncio.run(
                hold(
                    url,
                    args.layout,
                    args.ring,
                    args.cap,
                    args.rate,
                    args.hold_at,
                    args.hold_for,
                    args.tail,
                )
            )


if __name__ == "__main__":
    main()
