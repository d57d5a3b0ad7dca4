"""Where a SQLite fair claim's time goes: each step of the claim flow timed, and the
write-ahead log's frames of each claim and ack counted per b-tree.

    .venv/bin/python bench/fair_steps.py [--jobs 1000000] [--keys 1000] [--claims 300]
                                         [--frames] [--keep PATH]

Fills a plain and a fair queue of one fresh file with the same backlog (as
``bench/fairness.py`` does, key by key), then runs on its own ``sqlite3``
connection (WAL, ``synchronous=FULL``: the engine's defaults) what the engine
runs per claim: ``BEGIN IMMEDIATE``, the pre-claim sweep reads, ``core``'s claim
flow through the engine's own step function (``claim_steps``), ``COMMIT``; then
the batch's ack (``ack_many``) in a transaction of its own. Plain and fair
alternate claim by claim. Each step, the flow's Python around them, the commit,
and the ack are timed (medians and means, ms). ``--frames`` turns the automatic
checkpoint off and attributes every frame a claim or ack appended to the log to
the b-tree that owns its page (``dbstat``): the pages each operation dirtied.
``--keep PATH`` keeps the filled file there and reuses it when it exists (a copy
is worked on).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fairness import _fill

import alkstore
from alkstore.core.limited_claim import limited_claim
from alkstore.core.steps import Rows, run_steps_sync
from alkstore.engines.sqlite.flowcontrol import claim_steps
from alkstore.engines.sqlite.migrator import QUERIES as Q

FRAME = 4096 + 24  # a WAL frame: its header and a page (the store's 4 KiB pages)


async def _filled(path: str, jobs: int, keys: int) -> None:
    async with await alkstore.connect(f"sqlite:///{path}") as store:
        plain, fair = store.queue("plain"), store.queue("fair")
        await _fill(plain, jobs, keys)
        await _fill(fair, jobs, keys)
        await fair.set_fair()


class Probe:
    def __init__(self, path: str, frames: bool) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "temp_store=MEMORY"):
            self.conn.execute(f"PRAGMA {pragma}")
        self.conn.execute("PRAGMA recursive_triggers=ON")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.frames = frames
        self.owner: dict[int, str] = {}
        if frames:
            self.conn.execute("PRAGMA wal_autocheckpoint=0")
            self.owner = dict(
                (page, name) for name, page in self.conn.execute("SELECT name, pageno FROM dbstat")
            )
        self.times: dict[str, list[float]] = {}
        self.pages: dict[str, dict[str, int]] = {}
        self.counts: dict[str, list[int]] = {}

    def _add(self, key: str, value: float) -> None:
        self.times.setdefault(key, []).append(value)

    def _wal(self) -> int:
        try:
            return os.path.getsize(self.path + "-wal")
        except FileNotFoundError:
            return 0

    def _count(self, begin: int, end: int, what: str) -> None:
        if not self.frames:
            return
        begin = max(begin, 32)  # the log's header
        with open(self.path + "-wal", "rb") as f:
            f.seek(begin)
            data = f.read(end - begin)
        n = len(data) // FRAME
        self.counts.setdefault(what, []).append(n)
        tally = self.pages.setdefault(what, {})
        for i in range(n):
            (page,) = struct.unpack(">I", data[i * FRAME : i * FRAME + 4])
            name = self.owner.get(page, "(other: freelist, pointer map)")
            tally[name] = tally.get(name, 0) + 1

    def claim(self, queue: str, n: int) -> None:
        conn, now = self.conn, time.time()
        wal = self._wal()
        began = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        params = {"queue": queue, "now": now, "exhausted_error": "x"}
        if conn.execute(Q["sweep_exhausted_copy"], params).rowcount:
            conn.execute(Q["sweep_exhausted_delete"], params)
        lapsed = {row[0] for row in conn.execute(Q["lapsed_ids"], params)}
        inner = claim_steps(conn, queue, "bench", now, lapsed)
        in_steps = 0.0

        def step(name: str, p: dict[str, Any]) -> Rows:
            nonlocal in_steps
            start = time.perf_counter()
            rows = inner(name, p)
            spent = time.perf_counter() - start
            in_steps += spent
            self._add(f"{queue}: step {name}", spent)
            return rows

        flow_began = time.perf_counter()
        rows = run_steps_sync(limited_claim(n), step).rows
        flow_spent = time.perf_counter() - flow_began
        self._add(f"{queue}: flow's Python", flow_spent - in_steps)
        committing = time.perf_counter()
        conn.execute("COMMIT")
        claimed = time.perf_counter()
        self._add(f"{queue}: commit", claimed - committing)
        self._add(f"{queue}: CLAIM", claimed - began)
        middle = self._wal()
        self._count(wal, middle, f"{queue} claim")
        if len(rows) != n:
            raise SystemExit(f"queue {queue} ran dry: raise --jobs")
        items = json.dumps([[row[0], queue, row[7]] for row in rows])
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(Q["ack_many"], {"items": items, "now": time.time()}).fetchall()
        conn.execute("COMMIT")
        acked = time.perf_counter()
        self._add(f"{queue}: ACK", acked - claimed)
        self._add(f"{queue}: CLAIM + ACK", acked - began)
        self._count(middle, self._wal(), f"{queue} ack")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=300)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--frames", action="store_true", help="count WAL frames per b-tree")
    parser.add_argument("--keep", help="the filled file: kept, and reused if it exists")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="alkstore-bench-") as home:
        source = args.keep or f"{home}/filled.db"
        if not os.path.exists(source):
            began = time.perf_counter()
            asyncio.run(_filled(source, args.jobs, args.keys))
            print(f"filled {source} in {time.perf_counter() - began:.1f}s", flush=True)
        work = f"{home}/work.db"
        shutil.copy(source, work)
        probe = Probe(work, args.frames)
        for _ in range(args.claims):
            probe.claim("plain", args.batch)
            probe.claim("fair", args.batch)
    print(f"{args.claims} alternated claims of {args.batch} per queue, then each batch's ack")
    print(f"{'what':<34}{'median ms':>10}{'mean ms':>10}")
    for key in sorted(probe.times):
        values = probe.times[key]
        median, mean = statistics.median(values) * 1e3, statistics.mean(values) * 1e3
        print(f"{key:<34}{median:>10.3f}{mean:>10.3f}")
    totals = {k: sum(v) for k, v in probe.times.items()}
    claim = totals["plain: CLAIM"] / totals["fair: CLAIM"]
    both = totals["plain: CLAIM + ACK"] / totals["fair: CLAIM + ACK"]
    print(f"fair/plain rate from the summed times: claim {claim:.2f}, claim + ack {both:.2f}")
    for what, tally in probe.pages.items():
        mean = statistics.mean(probe.counts[what])
        parts = ", ".join(
            f"{name} {count / args.claims:.1f}"
            for name, count in sorted(tally.items(), key=lambda item: -item[1])
        )
        print(f"WAL frames per {what}: {mean:.1f} ({parts})")


if __name__ == "__main__":
    main()
