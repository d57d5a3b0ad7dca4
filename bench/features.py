"""What dedupe keys and kept results cost: ``python bench/features.py``.

Per engine, median of ``--runs`` runs, each on a fresh store, one process:
- enqueue rate, one job per call: plain ``enqueue`` vs ``enqueue`` with a
  (distinct) ``dedupe_key``, and with a key plus a ``dedupe_window_s``;
- enqueue_many of 100: plain vs a key per item;
- claim drain: ``claim_one`` then ``ack`` vs ``ack_result`` (a small JSON
  result kept), one job at a time, so each ack is its own commit.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Target, engine_home, fresh_target, median, postgres_available, render_table

import alkstore
from alkstore import EnqueueOpts

QUEUE = "bench"
_keys = itertools.count()


async def _open(target: Target) -> alkstore.Store:
    return await alkstore.connect(target.url, **target.kwargs())


async def enqueue_rate(target: Target, total: int, mode: str) -> float:
    async with await _open(target) as store:
        q = store.queue(QUEUE)
        await q.get_job(0)  # warm the connection
        start = time.perf_counter()
        for _ in range(total):
            if mode == "plain":
                await q.enqueue(b'{"n":1}')
            elif mode == "key":
                await q.enqueue(b'{"n":1}', EnqueueOpts(dedupe_key=f"k{next(_keys)}"))
            else:
                opts = EnqueueOpts(dedupe_key=f"k{next(_keys)}", dedupe_window_s=3600)
                await q.enqueue(b'{"n":1}', opts)
        return total / (time.perf_counter() - start)


async def enqueue_many_rate(target: Target, total: int, keyed: bool) -> float:
    async with await _open(target) as store:
        q = store.queue(QUEUE)
        await q.get_job(0)
        payloads = [b'{"n":1}'] * 100
        start = time.perf_counter()
        for _ in range(total // 100):
            keys = [f"k{next(_keys)}" for _ in range(100)] if keyed else None
            await q.enqueue_many(payloads, dedupe_keys=keys)
        return total / (time.perf_counter() - start)


async def drain_rate(target: Target, total: int, keep: bool) -> float:
    async with await _open(target) as store:
        q = store.queue(QUEUE)
        for start in range(0, total, 1000):
            await q.enqueue_many([b'{"n":1}'] * min(1000, total - start))
        start_t = time.perf_counter()
        done = 0
        while (h := await q.claim_one("w")) is not None:
            done += await (h.ack_result({"ok": True, "n": h.job.id}, 3600) if keep else h.ack())
        elapsed = time.perf_counter() - start_t
        if done != total:
            raise RuntimeError(f"drained {done} of {total}")
        return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller N, for a smoke run")
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if "postgres" in engines and not postgres_available():
        print("PostgreSQL unreachable: skipping it", file=sys.stderr)
        engines.remove("postgres")
    n = 300 if args.quick else 2000
    metrics = [
        ("enqueue, plain (jobs/s)", lambda t: enqueue_rate(t, n, "plain")),
        ("enqueue, dedupe key (jobs/s)", lambda t: enqueue_rate(t, n, "key")),
        ("enqueue, key + window (jobs/s)", lambda t: enqueue_rate(t, n, "window")),
        ("enqueue_many 100, plain (jobs/s)", lambda t: enqueue_many_rate(t, n * 5, False)),
        ("enqueue_many 100, key per item (jobs/s)", lambda t: enqueue_many_rate(t, n * 5, True)),
        ("claim+ack drain (jobs/s)", lambda t: drain_rate(t, n, False)),
        ("claim+ack drain, result kept (jobs/s)", lambda t: drain_rate(t, n, True)),
    ]
    rows = []
    for label, run in metrics:
        row = [label]
        for engine in engines:
            values = []
            with engine_home(engine) as home:
                for _ in range(args.runs):
                    values.append(asyncio.run(run(fresh_target(engine, home))))
            row.append(f"{median(values):,.0f}")
        rows.append(row)
        print(f"{label}: {row[1:]}", file=sys.stderr)
    note = f"median of {args.runs} runs, n={n}, one process"
    print(render_table(f"dedupe and results cost ({note})", ["metric", *engines], rows))


if __name__ == "__main__":
    main()
