"""Where the server's time goes when N worker processes drain one PostgreSQL queue.

    .venv/bin/python bench/two_procs.py --pg URL [--jobs 20000] [--runs 3] [--procs 1,2]

For a scratch cluster with ``pg_stat_statements`` preloaded (never the shared
server: the counters are reset). Each run fills a fresh schema, then drains the
backlog with ``procs`` spawned worker processes at ``--concurrency`` (0 = the
worker in this process, bench/worker_throughput.py's in-process row); each
handler counts into shared memory, so nothing polls the database for the end.
The counters and the clock start once the workers are connected. It prints:
jobs/s, client CPU per job and the cluster's server CPU per job (its
postmaster, live and reaped children, read from /proc: another cluster on the
machine is not counted), from the go until every process exited; the server
CPU up to the moment the last handler ran, by process (the busiest backends:
the claim's and the acks' connections), and in the tail (SIGTERM to exit: the
stop and the backends' exits); the claim-path indexes' entries read and heap
tuples fetched per job; per statement, calls per 1000 jobs, rows per call,
server execution µs per call and per job (wall time inside the server, which a
busy machine inflates: compare CPU, not these) and shared buffers per call.
Runs alternate between the process counts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from worker_throughput import _configure_logging, drain_here

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int, int]:
    """(ppid, own CPU ticks, reaped children's CPU ticks) of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def cluster_cpu_s(postmaster: int) -> float:
    """CPU seconds of a cluster: its postmaster, its reaped and its live children."""
    ticks = _stat(postmaster)[1] + _stat(postmaster)[2]
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            ppid, own, _ = _stat(int(name))
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if ppid == postmaster:
            ticks += own
    return ticks / CLK_TCK


def by_kind(postmaster: int) -> dict[int, tuple[str, int]]:
    """{pid: (kind, CPU ticks)} of the cluster's live children; kind is the
    process title ('root test ...' for a backend: its user and database)."""
    kinds = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            ppid, own, _ = _stat(int(name))
            with open(f"/proc/{name}/cmdline", "rb") as f:
                title = f.read().split(b"\0")[0].decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if ppid == postmaster:
            kind = title.removeprefix("postgres: ")
            if kind.startswith(("root ", "postgres ")):
                kind = "backend " + ("active" if "idle" not in kind else "idle")
            kinds[int(name)] = (kind, own)
    return kinds


def kind_deltas(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]]) -> str:
    sums: dict[str, float] = {}
    for pid, (kind, ticks) in after.items():
        base = before.get(pid, (kind, 0))[1]
        k = kind.split(" ")[0] if not kind.startswith("backend") else "backends"
        sums[k] = sums.get(k, 0) + (ticks - base) / CLK_TCK * 1e3
    n = sum(1 for kind, _ in after.values() if kind.startswith("backend"))
    top = sorted(
        (
            (ticks - before.get(pid, (kind, 0))[1]) / CLK_TCK * 1e3
            for pid, (kind, ticks) in after.items()
            if kind.startswith("backend")
        ),
        reverse=True,
    )
    backends = f"{n} backends (busiest: {', '.join(f'{ms:.0f}' for ms in top[:4])})"
    return f"{backends}: " + ", ".join(
        f"{k} {v:.0f}" for k, v in sorted(sums.items(), key=lambda x: -x[1]) if v
    )


def one_run(url: str, jobs: int, concurrency: int, procs: int, log: str) -> None:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        postmaster = _stat(backend)[0]
    try:
        # drain_* fill first; reset the counters when the fill is done: start
        # the clock of server CPU and statements at the first claim instead.
        if procs == 0:
            rate, client = asyncio.run(_here(url, schema, jobs, concurrency, postmaster))
        else:
            rate, client = _procs(url, schema, jobs, concurrency, procs, log, postmaster)
        server = (cluster_cpu_s(postmaster) - _MARK[0]) / jobs * 1e6
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT calls, rows, total_exec_time, shared_blks_hit + shared_blks_read,"
                " regexp_replace(left(query, 400), '\\s+', ' ', 'g')"
                " FROM pg_stat_statements WHERE calls > 0 AND query NOT ILIKE '%%pg_stat%%'"
                " ORDER BY total_exec_time DESC LIMIT 14"
            ).fetchall()
        print(
            f"procs={procs} c={concurrency}: {rate:,.0f}/s, client {client:.1f} µs/job,"
            f" server CPU {server:.1f} µs/job"
            + (
                f", setup server CPU {_SETUP[0] * 1e3:.0f} ms, per process {_PER[0]}"
                f"\n  server CPU ms by process until the last handler ran: {_KINDS[0]}"
                if procs
                else ""
            )
        )
        if procs:
            with psycopg.connect(url, autocommit=True) as conn:
                tail = conn.execute(
                    "SELECT queryid, calls, total_exec_time,"
                    " regexp_replace(left(query, 400), '\\s+', ' ', 'g')"
                    " FROM pg_stat_statements"
                ).fetchall()
            diffs = sorted(
                (
                    (t - _TAIL0.get(q, (0, 0.0))[1], c - _TAIL0.get(q, (0, 0.0))[0], text)
                    for q, c, t, text in tail
                ),
                key=lambda d: d[0],
                reverse=True,
            )
            print("  after the last handler ran (ms, calls):")
            for ms, calls, text in diffs[:6]:
                print(f"    {ms:7.1f} {calls:5d}  {_label(text)}")
        with psycopg.connect(url, autocommit=True) as conn:
            for name, scans, read, fetch in conn.execute(
                "SELECT indexrelname, idx_scan, idx_tup_read, idx_tup_fetch"
                " FROM pg_stat_user_indexes WHERE schemaname = %s AND idx_scan > 0"
                " ORDER BY idx_tup_read DESC LIMIT 3",
                (schema,),
            ).fetchall():
                print(
                    f"  index {name}: {scans} scans, entries read per job {read / jobs:.2f},"
                    f" heap fetched per job {fetch / jobs:.2f}"
                )
        print("  calls/1k jobs  rows/call  µs/call  µs/job  bufs/call  statement")
        for calls, nrows, ms, bufs, query in rows:
            print(
                f"  {calls / jobs * 1000:13.1f}  {nrows / calls:9.1f}  {ms * 1000 / calls:7.1f}"
                f"  {ms * 1000 / jobs:6.2f}  {bufs / calls:9.1f}  {_label(query)}"
            )
        sys.stdout.flush()
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


_MARK = [0.0]


def _reset(url: str, postmaster: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    _MARK[0] = cluster_cpu_s(postmaster)


def _label(query: str) -> str:
    for word in ("claim_lean", "alk_dead", "claim_ids"):
        if word in query:
            return f"[{word}] {query[:90]}"
    return query[:110]


async def _here(url: str, schema: str, jobs: int, c: int, postmaster: int) -> tuple[float, float]:
    import worker_throughput as wt

    fill = wt._fill

    async def fill_then_reset(*a: object, **k: object) -> None:
        await fill(*a, **k)  # type: ignore[arg-type]
        _reset(url, postmaster)

    wt._fill = fill_then_reset
    try:
        return await drain_here(url, schema, jobs, c)
    finally:
        wt._fill = fill


def _procs(
    url: str, schema: str, jobs: int, c: int, procs: int, log: str, postmaster: int
) -> tuple[float, float]:
    """drain_procs without polling the database for the end (each handler counts
    into shared memory, as the peer harness does): the poll's own statements
    would be counted as the workers' server time."""
    import multiprocessing as mp
    import signal

    import worker_throughput as wt

    asyncio.run(wt._fill(url, schema, jobs))
    ctx = mp.get_context("spawn")
    counts, go, out = ctx.Array("q", procs, lock=False), ctx.Event(), ctx.Queue()
    workers = [
        ctx.Process(target=wt._worker_process, args=(url, schema, c, log, go, out, counts, i))
        for i in range(procs)
    ]
    setup0 = cluster_cpu_s(postmaster)
    for w in workers:
        w.start()
    time.sleep(2.0)  # imports and connections before the clock starts
    _SETUP[0] = cluster_cpu_s(postmaster) - setup0
    _reset(url, postmaster)
    kinds0 = by_kind(postmaster)
    t0 = time.time()
    go.set()
    while sum(counts) < jobs:
        time.sleep(0.002)
    _KINDS[0] = kind_deltas(kinds0, by_kind(postmaster))
    _KINDS[0] += f"; all {(cluster_cpu_s(postmaster) - _MARK[0]) * 1e3:.0f}"
    with psycopg.connect(url, autocommit=True) as conn:
        _TAIL0.clear()
        _TAIL0.update(
            (q, (c, t))
            for q, c, t in conn.execute(
                "SELECT queryid, calls, total_exec_time FROM pg_stat_statements"
            ).fetchall()
        )
    tail0 = cluster_cpu_s(postmaster)
    seen0 = by_kind(postmaster)
    for w in workers:
        assert w.pid is not None
        os.kill(w.pid, signal.SIGTERM)
    seen = dict(seen0)
    while any(w.is_alive() for w in workers):
        seen.update(by_kind(postmaster))
        time.sleep(0.003)
    seen.update(by_kind(postmaster))
    tracked = sum(t - seen0.get(p, (k, 0))[1] for p, (k, t) in seen.items()) / CLK_TCK
    gone = len(set(seen) - set(by_kind(postmaster)))
    _KINDS[0] += (
        f"\n  tail (SIGTERM to exit): {(cluster_cpu_s(postmaster) - tail0) * 1e3:.0f} ms,"
        f" of which seen in live processes {tracked * 1e3:.0f} ms; {gone} backends exited"
    )
    results = [out.get(timeout=120) for _ in workers]
    for w in workers:
        w.join()
    _PER[0] = [r[0] for r in results]
    assert sum(r[0] for r in results) == jobs
    elapsed = max(r[2] for r in results) - t0
    return jobs / elapsed, sum(r[1] for r in results) / jobs * 1e6


_SETUP = [0.0]
_KINDS = [""]
_TAIL0: dict[Any, tuple[int, float]] = {}
_PER: list[Any] = [[]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg", required=True, help="a scratch cluster with pg_stat_statements")
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--procs", default="1,2")
    parser.add_argument("--log", default="info")
    args = parser.parse_args()
    _configure_logging(args.log)
    for _ in range(args.runs):
        for procs in (int(p) for p in args.procs.split(",")):
            one_run(args.pg, args.jobs, args.concurrency, procs, args.log)


if __name__ == "__main__":
    main()
