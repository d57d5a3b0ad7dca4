"""What one ``defer()`` costs on SQLite, and how much of it is Python.

    .venv/bin/python bench/sqlite_defer.py [--calls 300] [--gap-ms 20] [--runs 3] [--sync full]
    .venv/bin/python bench/old_code.py /work/main bench/sqlite_defer.py   # the other tree

Two numbers per run, in one process on a temp file (WAL, synchronous=FULL):

- idle call: ``await noop.defer(seq=i)`` and ``await queue.enqueue(b"...")``
  one at a time, ``--gap-ms`` apart (a producer that is idle between calls, as
  in the wake benchmarks): the median wall time of a call, commit included;
- Python: the same calls back to back with the engine's insert replaced by a
  no-op, so only the code before the insert is timed (µs per call).

``--sync normal`` (no fsync at a WAL commit) leaves the disk's noise out of an A/B
of the code around the commit.

Prints the median over ``--runs`` runs of each run's median, with [min–max].
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import alkstore


async def one_run(calls: int, gap_s: float, sync: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        app = alkstore.App(f"sqlite:///{Path(tmp) / 'defer.db'}?synchronous={sync}")

        @app.task(queue="bench", name="noop")
        async def noop(seq: int) -> None:
            del seq

        store = await app.connect()
        q = store.queue("bench")
        kinds: dict[str, Any] = {
            "defer": lambda i: noop.defer(seq=i),
            "enqueue": lambda i: q.enqueue(b'{"seq":%d}' % i),
        }
        idle: dict[str, list[float]] = {k: [] for k in kinds}
        for i in range(calls):
            for kind, call in kinds.items():
                await asyncio.sleep(gap_s)
                t0 = time.perf_counter()
                await call(i)
                idle[kind].append((time.perf_counter() - t0) * 1000)
        out = {f"{k} idle call ms": statistics.median(v[10:]) for k, v in idle.items()}
        engine = store._engine
        real = type(engine).enqueue

        async def no_insert(self: Any, queue: str, payloads: Any, stamps: Any) -> list[int]:
            return [1] * len(payloads)

        type(engine).enqueue = no_insert  # type: ignore[method-assign]
        try:
            for kind, call in kinds.items():
                t0 = time.perf_counter()
                for i in range(20_000):
                    await call(i)
                out[f"{kind} Python us"] = (time.perf_counter() - t0) / 20_000 * 1e6
        finally:
            type(engine).enqueue = real  # type: ignore[method-assign]
        await app.close()
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--gap-ms", type=float, default=20.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sync", choices=["full", "normal"], default="full")
    a = ap.parse_args()
    runs = [asyncio.run(one_run(a.calls, a.gap_ms / 1000, a.sync)) for _ in range(a.runs)]
    for key in runs[0]:
        values = [r[key] for r in runs]
        print(f"{key:<22} {statistics.median(values):8.3f}  [{min(values):.3f}–{max(values):.3f}]")


if __name__ == "__main__":
    main()
