"""Claim throughput of a fair queue against the plain claim, on a large backlog.

    .venv/bin/python bench/fairness.py [--jobs 1000000] [--keys 1000] [--claims 500]
                                       [--batch 10] [--runs 3] [--engines sqlite,postgres]
                                       [--analyze] [--plain-only] [--split]
                                       [--interleave N]

For each engine and each shape (the backlog spread over ``--keys`` partition
keys, and all of it on one key), two queues of a fresh store get the same
backlog of ``--jobs`` jobs, one plain (the one-statement claim, untouched by
fairness) and one fair (``queue.set_fair()``: key cursors, one index probe per
key). Then ``--runs`` times, ``--claims`` claims of ``--batch`` jobs are timed
on each, alternately claim by claim (a shared machine's load falls on both
alike). Each claimed batch is acked with ``ack_batch``, timed apart from the claim.
Rows: the median claims/s per mode and the median of the runs' ratios on/off
(the issue wants >= 0.7), of the claim alone and of claim + ack (what a worker
pays per batch: a change that moves work from the claim to the ack shows
there). The timed claims walk the front of the backlog (a few thousand of its
jobs per run), so the figure is the per-claim cost at that backlog size, not a
drain. ``--plain-only`` times the plain claim alone (to compare the plain path
of two versions: ``bench/old_code.py``). ``--split`` (SQLite) puts the two
queues in two files, so each mode pays the checkpoints of its own write-ahead
log: in one file, the commit that takes the log past its 1,000 pages runs the
checkpoint of both modes' pages, and with claims alternating, which mode that
commit is depends on the modes' page counts, not on their share of the pages.
``--interleave N`` fills in rounds of ``N`` jobs per key (tenants enqueueing
side by side) instead of key by key (one tenant's import after another's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import engine_home, fresh_target, median, postgres_available

import alkstore
from alkstore import EnqueueOpts

CHUNK = 10_000


async def _fill(q: alkstore.Queue, jobs: int, keys: int, interleave: int = 0) -> None:
    """``jobs`` jobs, key by key in chunks (each key's share in turn), or with
    ``interleave`` > 0 in rounds of that many jobs per key (tenants that enqueue
    side by side: the keys' heads are neighbours in the table and its indexes)."""
    per_key = [jobs // keys + (1 if k < jobs % keys else 0) for k in range(keys)]
    if interleave > 0:
        left = per_key[:]
        while any(left):
            for k in range(keys):
                size = min(interleave, left[k])
                if size:
                    opts = EnqueueOpts(partition_key=f"tenant-{k:05}")
                    await q.enqueue_many([b"x"] * size, opts)
                    left[k] -= size
        return
    for k, count in enumerate(per_key):
        opts = EnqueueOpts(partition_key=f"tenant-{k:05}")
        for start in range(0, count, CHUNK):
            size = min(CHUNK, count - start)
            await q.enqueue_many([b"x"] * size, opts)


async def _claim(q: alkstore.Queue, batch: int) -> tuple[float, float]:
    """One timed claim of ``batch`` and its ack: (claim s, ack s)."""
    began = time.perf_counter()
    handles = await q.claim_batch("bench", batch)
    spent = time.perf_counter() - began
    if not handles:
        raise SystemExit(f"queue {q.name} ran dry: raise --jobs")
    began = time.perf_counter()
    await q.ack_batch([h.job.id for h in handles])
    return spent, time.perf_counter() - began


def _analyze(url: str, schema: str) -> None:
    """Planner statistics for the freshly filled tables, as autovacuum would gather
    them within a minute (right after the fill, ``alk_fair`` looks empty to the
    planner, which then reads every cursor instead of walking its index)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("alk_jobs", "alk_fair", "alk_fair_weights"):
            conn.execute(f'ANALYZE "{schema}".{table}')


Rates = tuple[list[float], list[float], list[float], list[float]]


async def _shape(engine: str, home: str, args: argparse.Namespace, keys: int) -> Rates:
    """Two queues with the same backlog, one plain and one fair, claimed alternately
    (one claim each in turn, so both see the same load): claims/s per run, of the
    claim alone (plain, fair) and of claim + ack (plain, fair)."""
    target = fresh_target(engine, home)
    plain: list[float] = []
    fair: list[float] = []
    plain_ack: list[float] = []
    fair_ack: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        store = await stack.enter_async_context(
            await alkstore.connect(target.url, **target.kwargs())
        )
        fair_store = store  # one store, unless --split (SQLite): a second file
        if args.split and engine == "sqlite":
            other = fresh_target(engine, home)
            fair_store = await stack.enter_async_context(await alkstore.connect(other.url))
        plain_q, fair_q = store.queue("plain"), fair_store.queue("fair")
        for q in (plain_q, fair_q) if not args.plain_only else (plain_q,):
            began = time.perf_counter()
            await _fill(q, args.jobs, keys, args.interleave)
            print(f"    {q.name}: fill {time.perf_counter() - began:.1f}s", flush=True)
        if not args.plain_only:
            began = time.perf_counter()
            await fair_q.set_fair()
            print(f"    fairness switched on in {time.perf_counter() - began:.2f}s", flush=True)
        if args.analyze and engine == "postgres":
            _analyze(target.url, target.schema)
        for run in range(args.runs):
            spent = {"plain": 0.0, "fair": 0.0}
            acks = {"plain": 0.0, "fair": 0.0}
            for _ in range(args.claims):
                for mode, q in (("plain", plain_q), ("fair", fair_q)):
                    if mode == "fair" and args.plain_only:
                        continue
                    claim_s, ack_s = await _claim(q, args.batch)
                    spent[mode] += claim_s
                    acks[mode] += ack_s
            plain.append(args.claims / spent["plain"])
            plain_ack.append(args.claims / (spent["plain"] + acks["plain"]))
            line = f"    run {run + 1}: plain {plain[-1]:.0f} claims/s"
            line += f" ({plain_ack[-1]:.0f} with acks)"
            if not args.plain_only:
                fair.append(args.claims / spent["fair"])
                fair_ack.append(args.claims / (spent["fair"] + acks["fair"]))
                line += (
                    f", fair {fair[-1]:.0f} ({fair_ack[-1]:.0f}), ratio {fair[-1] / plain[-1]:.2f}"
                    f" (with acks {fair_ack[-1] / plain_ack[-1]:.2f})"
                )
            print(line, flush=True)
    return plain, fair, plain_ack, fair_ack


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="backlog size")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=500, help="claims timed per run")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs per mode")
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="PostgreSQL: ANALYZE the tables after the fill and after fairness is switched on",
    )
    parser.add_argument("--plain-only", action="store_true", help="time the plain claim only")
    parser.add_argument(
        "--split", action="store_true", help="SQLite: the plain and the fair queue in two files"
    )
    parser.add_argument(
        "--interleave",
        type=int,
        default=0,
        help="fill in rounds of this many jobs per key (0: key by key)",
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
                print(f"{engine}: {args.jobs} jobs over {keys} key(s)", flush=True)
                rows.append((engine, keys, *await _shape(engine, home, args, keys)))
    print()
    print(
        f"claims of {args.batch} on a backlog of {args.jobs} jobs ({args.claims} claims timed "
        f"per run, {args.runs} runs per mode, medians)"
    )
    print(
        f"{'engine':<9}{'keys':>6}{'plain claims/s':>16}{'fair claims/s':>15}{'fair/plain':>12}"
        f"{'with acks: plain/s':>20}{'fair/s':>8}{'fair/plain':>12}"
    )
    for engine, keys, plain, fair, plain_ack, fair_ack in rows:
        line = f"{engine:<9}{keys:>6}{median(plain):>16.0f}"
        if fair:
            ratio = median([f / p for f, p in zip(fair, plain, strict=True)])
            ratio_ack = median([f / p for f, p in zip(fair_ack, plain_ack, strict=True)])
            line += f"{median(fair):>15.0f}{ratio:>12.2f}{median(plain_ack):>20.0f}"
            line += f"{median(fair_ack):>8.0f}{ratio_ack:>12.2f}"
        else:
            line += f"{'-':>15}{'-':>12}{median(plain_ack):>20.0f}{'-':>8}{'-':>12}"
        print(line)
    print(
        "\nplain: the one-statement claim (its SQL is not changed by fairness); fair: key "
        "cursors + one index probe per key read. fair/plain: the median of the runs' ratios; "
        "with acks: claim + ack timed (per batch)."
    )


if __name__ == "__main__":
    asyncio.run(main())
