"""An idle SQLite ``defer()`` of two trees, taken in turns call by call (an A/B
that the machine's load and the disk's noise hit alike).

    .venv/bin/python bench/sqlite_defer_ab.py /work/main /work/wt-x [--calls 400]
        [--kind defer|enqueue] [--sync full|normal]

Each tree runs in a process of its own (``bench/old_code.py TREE``) on its own
temp file. On its turn a process sleeps 20–50 ms, as an idle producer does, and
times one call (commit included); the order of the two is shuffled each round.
Prints each side's median and quartiles (µs) and the median of the paired
differences B − A. Run it A/A once to see the bias (it was +5 µs here).
``--sync normal`` (no fsync at a WAL commit) leaves the disk out when the code
around the commit is what changed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


async def side(kind: str, sync: str) -> None:
    """One tree's process: on each b"g" read from stdin, one timed call; b"q" ends."""
    import alkstore

    with tempfile.TemporaryDirectory() as tmp:
        app = alkstore.App(f"sqlite:///{Path(tmp) / 'ab.db'}?synchronous={sync}")

        @app.task(queue="bench", name="noop")
        async def noop(seq: int) -> None:
            del seq

        store = await app.connect()
        queue = store.queue("bench")
        loop = asyncio.get_running_loop()
        turns: asyncio.Queue[int] = asyncio.Queue()
        loop.add_reader(0, lambda: [turns.put_nowait(b) for b in os.read(0, 64)])
        rng = random.Random(os.getpid())
        os.write(1, b"ready\n")
        seq = 0
        while await turns.get() != ord("q"):
            await asyncio.sleep(rng.uniform(0.02, 0.05))
            t0 = time.perf_counter()
            if kind == "defer":
                await noop.defer(seq=seq)
            else:
                await queue.enqueue(b'{"seq":%d}' % seq)
            os.write(1, b"%.1f\n" % ((time.perf_counter() - t0) * 1e6))
            seq += 1
        loop.remove_reader(0)
        await app.close()


def drive(a: argparse.Namespace) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    procs = {
        tree: subprocess.Popen(
            [sys.executable, str(HERE / "old_code.py"), tree, __file__, "--side", a.kind, a.sync],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        for tree in (a.tree_a, a.tree_b)
    }
    for p in procs.values():
        assert p.stdout is not None
        while p.stdout.readline().strip() != b"ready":
            pass
    times: dict[str, list[float]] = {tree: [] for tree in procs}
    rng = random.Random(0)
    order = list(procs)
    for _ in range(a.calls):
        rng.shuffle(order)
        for tree in order:
            p = procs[tree]
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(b"g")
            p.stdin.flush()
            times[tree].append(float(p.stdout.readline()))
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.write(b"q")
        p.stdin.flush()
        p.wait()
    for label, tree in (("A", a.tree_a), ("B", a.tree_b)):
        s = sorted(times[tree][10:])
        q1, q3 = s[len(s) // 4], s[3 * len(s) // 4]
        print(f"{label} {tree}: p50 {statistics.median(s):7.1f} us  [p25 {q1:.1f}, p75 {q3:.1f}]")
    diffs = [b - a_ for a_, b in zip(times[a.tree_a][10:], times[a.tree_b][10:], strict=True)]
    print(f"paired B - A: median {statistics.median(diffs):+.1f} us over {len(diffs)} calls")


def main() -> None:
    if sys.argv[1:2] == ["--side"]:
        asyncio.run(side(sys.argv[2], sys.argv[3]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("tree_a")
    ap.add_argument("tree_b")
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--kind", choices=["defer", "enqueue"], default="defer")
    ap.add_argument("--sync", choices=["full", "normal"], default="normal")
    drive(ap.parse_args())


if __name__ == "__main__":
    main()
