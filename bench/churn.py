"""Claims through churn: does the claim get slower as dead tuples pile up?

Two scenarios, each on a scratch PostgreSQL cluster of its own (never the shared
server: autovacuum is a server setting), or on a SQLite file:

- ``waves``: enqueue a wave of jobs, drain it with the queue API (claim_batch +
  ack_batch), again and again; prints each wave's drain pace, the dead tuples and
  the sizes of the job table and its indexes, and the last wave's pace over the
  first's.
- ``hold``: a steady offered rate; at ``--hold-at`` seconds a session opens a
  transaction, takes a snapshot and sits idle in it for ``--hold-for`` seconds
  (the xmin horizon is held back, vacuum can clear nothing newer). Every 10 s:
  claim p50/p99, backlog, dead tuples; then the p99 during the hold over the
  p99 before it.

    python bench/churn.py waves --autovacuum off --jobs 3000000 --wave 100000
    python bench/churn.py hold --rate 2000 --hold-at 60 --hold-for 600 --tail 60
    python bench/churn.py waves --engine sqlite --jobs 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import alkstore
from alkstore.core.options import QueueOpts

PG_USER = "postgres"
QUEUE = "churn"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def scratch_cluster(autovacuum: bool) -> Iterator[str]:
    """A throwaway PostgreSQL on 127.0.0.1 with server defaults but ``autovacuum``."""
    bindir = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
    data = Path(tempfile.mkdtemp(prefix="alkstore-churn-"))
    shutil.chown(data, PG_USER)
    as_pg = ["runuser", "-u", PG_USER, "--"]
    port = _free_port()
    subprocess.run(
        [*as_pg, f"{bindir}/initdb", "-D", str(data), "-U", "alk", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(
            f"listen_addresses = '127.0.0.1'\nport = {port}\n"
            f"unix_socket_directories = '{data}'\n"
            f"autovacuum = {'on' if autovacuum else 'off'}\n"
        )
    subprocess.run(
        [*as_pg, f"{bindir}/pg_ctl", "-D", str(data), "-l", str(data / "log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://alk@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_pg, f"{bindir}/pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(data, ignore_errors=True)


@contextlib.contextmanager
def target(engine: str, autovacuum: bool) -> Iterator[str]:
    if engine == "postgres":
        with scratch_cluster(autovacuum) as url:
            yield url
        return
    with tempfile.TemporaryDirectory(prefix="alkstore-churn-") as d:
        yield f"sqlite:///{d}/churn.db"


async def table_facts(store: alkstore.Store, url: str) -> str:
    """Dead tuples and sizes of the job table (PostgreSQL), or the file sizes (SQLite)."""
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        main = os.path.getsize(path)
        wal = os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
        with contextlib.closing(sqlite3.connect(path)) as conn:
            pages, free, size = (
                conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("page_count", "freelist_count", "page_size")
            )
        return (  # the main file shrinks to `pages` at the next checkpoint
            f"pages {pages * size / 2**20:6.1f} MiB  free pages {free:>6,}"
            f"  file {main / 2**20:6.1f} MiB  wal {wal / 2**20:5.1f} MiB"
        )
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT s.n_dead_tup, s.n_live_tup, pg_relation_size(c.oid),"
            " pg_indexes_size(c.oid), s.autovacuum_count + s.vacuum_count"
            " FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid"
            " WHERE s.schemaname = 'alkstore' AND s.relname = 'alk_jobs'"
        )
        row = await cur.fetchone()
    assert row is not None
    dead, live, heap, idx, vacuums = row
    return (
        f"dead {dead:>9,}  live {live:>9,}  heap {heap / 2**20:7.1f} MiB"
        f"  indexes {idx / 2**20:7.1f} MiB  vacuums {vacuums}"
    )


async def waves(url: str, jobs: int, wave: int, batch: int, sweep: bool) -> None:
    store = await alkstore.connect(url)
    q = store.queue(QUEUE, QueueOpts(visibility_timeout_s=300))
    paces: list[float] = []
    payloads = [f"job {i}" for i in range(1000)]
    try:
        for n in range(max(1, jobs // wave)):
            for start in range(0, wave, 1000):
                await q.enqueue_many(payloads[: min(1000, wave - start)])
            t0 = time.perf_counter()
            done = 0
            while hs := await q.claim_batch("w", batch):
                done += await q.ack_batch([h.job.id for h in hs])
            pace = done / (time.perf_counter() - t0)
            paces.append(pace)
            if sweep:  # what a worker's sweep loop does (SQLite: gives freed pages back)
                await q.sweep_expired()
            facts = await table_facts(store, url)
            print(f"wave {n + 1:3d}  {pace:9,.0f} jobs/s  {facts}", flush=True)
        print(f"last wave / first wave: {paces[-1] / paces[0]:.2f}")
        third = max(1, len(paces) // 3)
        print(
            f"median of the last third / median of the first third: "
            f"{statistics.median(paces[-third:]) / statistics.median(paces[:third]):.2f}"
        )
    finally:
        await store.close()


async def hold(url: str, rate: int, hold_at: float, hold_for: float, tail: float) -> None:
    store = await alkstore.connect(url)
    q = store.queue(QUEUE, QueueOpts(visibility_timeout_s=300))
    stop = time.monotonic() + hold_at + hold_for + tail
    t_start = time.monotonic()
    latencies: list[tuple[float, float]] = []  # (seconds since start, claim seconds)

    async def produce() -> None:
        tick = 0.1
        per_tick = max(1, int(rate * tick))
        payloads = ["x"] * per_tick
        next_at = time.monotonic()
        while time.monotonic() < stop:
            await q.enqueue_many(payloads)
            next_at += tick
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def consume() -> None:
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            hs = await q.claim_batch("w", 100)
            latencies.append((time.monotonic() - t_start, time.perf_counter() - t0))
            if hs:
                await q.ack_batch([h.job.id for h in hs])
            else:
                await asyncio.sleep(0.01)

    async def holder() -> None:
        if url.startswith("sqlite"):
            return  # a read transaction on SQLite holds back checkpoints, not vacuum
        await hold_xmin(url, hold_at, hold_for)

    async def report() -> None:
        seen = 0
        while time.monotonic() < stop:
            await asyncio.sleep(10)
            window = [lat for _, lat in latencies[seen:]]
            seen = len(latencies)
            infos = {i.queue: i for i in await store.admin().queues()}
            backlog = infos[QUEUE].pending if QUEUE in infos else 0
            facts = await table_facts(store, url)
            if window:
                print(
                    f"{time.monotonic() - t_start:5.0f} s  claims {len(window):6d}"
                    f"  p50 {statistics.median(window) * 1e3:6.2f} ms"
                    f"  p99 {percentile(window, 99) * 1e3:7.2f} ms  backlog {backlog:>7}  {facts}",
                    flush=True,
                )

    try:
        await asyncio.gather(produce(), consume(), holder(), report())
        before = [lat for t, lat in latencies if t < hold_at]
        during = [lat for t, lat in latencies if hold_at <= t < hold_at + hold_for]
        if before and during:
            p_before, p_during = percentile(before, 99), percentile(during, 99)
            print(
                f"claim p99 before {p_before * 1e3:.2f} ms, during the hold "
                f"{p_during * 1e3:.2f} ms: {p_during / p_before:.2f}x"
            )
    finally:
        await store.close()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def hold_xmin(url: str, hold_at: float, hold_for: float) -> None:
    """At ``hold_at`` s open a transaction on PostgreSQL ``url``, take a snapshot and sit
    idle in it for ``hold_for`` s: the xmin horizon is held back, vacuum clears nothing
    newer."""
    import psycopg

    await asyncio.sleep(hold_at)
    conn = await psycopg.AsyncConnection.connect(url)
    await conn.execute("SELECT txid_current()")  # a snapshot held: idle in transaction
    print(f"-- idle in transaction from {hold_at:.0f} s", flush=True)
    await asyncio.sleep(hold_for)
    await conn.rollback()
    await conn.close()
    print(f"-- released at {hold_at + hold_for:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=["waves", "hold"])
    parser.add_argument("--engine", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--autovacuum", choices=["on", "off"], default="on")
    parser.add_argument("--jobs", type=int, default=3_000_000)
    parser.add_argument("--wave", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument(
        "--sweep", choices=["on", "off"], default="on", help="sweep_expired() after each wave"
    )
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--hold-at", type=float, default=60)
    parser.add_argument("--hold-for", type=float, default=600)
    parser.add_argument("--tail", type=float, default=60)
    args = parser.parse_args()
    with target(args.engine, args.autovacuum == "on") as url:
        print(f"{args.scenario} on {args.engine}, autovacuum {args.autovacuum}", flush=True)
        if args.scenario == "waves":
            asyncio.run(waves(url, args.jobs, args.wave, args.batch, args.sweep == "on"))
        else:
            asyncio.run(hold(url, args.rate, args.hold_at, args.hold_for, args.tail))


if __name__ == "__main__":
    main()
