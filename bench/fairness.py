"""Claim throughput of a fair queue against the plain claim, on a large backlog.

    .venv/bin/python bench/fairness.py [--jobs 1000000] [--keys 1000] [--claims 500]
                                       [--batch 10] [--engines sqlite,postgres] [--analyze]

For each engine and each shape (the backlog spread over ``--keys`` partition
keys, and all of it on one key), the same backlog of ``--jobs`` jobs is built
on a fresh store, then ``--claims`` claims of ``--batch`` jobs are timed with
fairness off (the plain one-statement claim, untouched by fairness) and on
(``queue.set_fair()``: key cursors, one index probe per key). Each claimed
batch is acked with ``ack_batch`` outside the timed part. Rows: claims/s and
jobs/s per mode, and the ratio on/off (the issue wants >= 0.7). The timed
claims walk the front of the backlog, so the figure is the per-claim cost at
that backlog size, not a drain.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import engine_home, fresh_target, postgres_available

import alkstore
from alkstore import EnqueueOpts

CHUNK = 10_000


async def _fill(q: alkstore.Queue, jobs: int, keys: int) -> None:
    """``jobs`` jobs, key by key in chunks (each key's share in turn)."""
    per_key = [jobs // keys + (1 if k < jobs % keys else 0) for k in range(keys)]
    for k, count in enumerate(per_key):
        opts = EnqueueOpts(partition_key=f"tenant-{k:05}")
        for start in range(0, count, CHUNK):
            size = min(CHUNK, count - start)
            await q.enqueue_many([b"x"] * size, opts)


async def _time_claims(q: alkstore.Queue, claims: int, batch: int) -> tuple[float, int]:
    spent, taken = 0.0, 0
    for _ in range(claims):
        began = time.perf_counter()
        handles = await q.claim_batch("bench", batch)
        spent += time.perf_counter() - began
        if not handles:
            break
        taken += len(handles)
        await q.ack_batch([h.job.id for h in handles])
    return spent, taken


def _analyze(url: str, schema: str) -> None:
    """Planner statistics for the freshly filled tables, as autovacuum would gather
    them within a minute (right after the fill, ``alk_fair`` looks empty to the
    planner, which then reads every cursor instead of walking its index)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("alk_jobs", "alk_fair", "alk_fair_weights"):
            conn.execute(f'ANALYZE "{schema}".{table}')


async def _run(
    engine: str, home: str, args: argparse.Namespace, keys: int, fair: bool
) -> tuple[float, float]:
    target = fresh_target(engine, home)
    async with await alkstore.connect(target.url, **target.kwargs()) as store:
        q = store.queue("bench")
        began = time.perf_counter()
        await _fill(q, args.jobs, keys)
        filled = time.perf_counter() - began
        if fair:
            began = time.perf_counter()
            await q.set_fair()
            seeded = time.perf_counter() - began
            print(f"    fill {filled:.1f}s, fairness switched on in {seeded:.2f}s", flush=True)
        else:
            print(f"    fill {filled:.1f}s", flush=True)
        if args.analyze and engine == "postgres":
            _analyze(target.url, target.schema)
        spent, taken = await _time_claims(q, args.claims, args.batch)
    claims_per_s = args.claims / spent if spent else float("nan")
    return claims_per_s, taken / spent if spent else float("nan")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=500)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="PostgreSQL: ANALYZE the tables after the fill, before the timed claims",
    )
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if "postgres" in engines and not postgres_available():
        print("postgres unreachable: skipped", flush=True)
        engines.remove("postgres")
    rows = []
    for engine in engines:
        for keys in (args.keys, 1):
            with engine_home(engine) as home:
                result = {}
                for fair in (False, True):
                    mode = "fair" if fair else "plain"
                    print(f"{engine}: {args.jobs} jobs over {keys} key(s), {mode}", flush=True)
                    result[fair] = await _run(engine, home, args, keys, fair)
                rows.append((engine, keys, result[False], result[True]))
    print()
    print(f"claims of {args.batch} on a backlog of {args.jobs} jobs ({args.claims} claims timed)")
    print(f"{'engine':<9}{'keys':>6}{'plain claims/s':>16}{'fair claims/s':>15}{'fair/plain':>12}")
    for engine, keys, plain, fair in rows:
        ratio = fair[0] / plain[0] if plain[0] else float("nan")
        print(f"{engine:<9}{keys:>6}{plain[0]:>16.0f}{fair[0]:>15.0f}{ratio:>12.2f}")
    print(
        "\nplain: the one-statement claim (its SQL is not changed by fairness); fair: key "
        "cursors + one index probe per key read. The ratio is fair/plain claims per second."
    )


if __name__ == "__main__":
    asyncio.run(main())
