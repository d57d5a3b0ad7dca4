"""The plain worker path before and after a change: the same drain of no-op jobs
by ``app.worker()`` in a fresh process, importing alkstore from two trees in turn.

    .venv/bin/python bench/plain_path_cost.py --before /work/main [--after .] \
        [--jobs 20000] [--runs 5] [--pg URL]

Each run is a child process (cwd outside both trees, ``PYTHONPATH`` = the tree),
a fresh store, the backlog enqueued first (``defer_many`` ×1000), then timed
from ``worker.run()`` until every job ran and the worker stopped. The runs of
the two trees alternate (A B A B …) so drift in the machine's load falls on
both. Printed per engine and tree: the median jobs/s with [min–max], and the
median client CPU per job (the worker process's CPU time / jobs). The worker
runs with its defaults (no hooks, no --max-jobs, presence every 5 s, which
writes the per-minute outcome history), plus ``--presence 0.05`` for a run where
the history is written 100× as often as by default, to make its cost visible.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

CHILD = r"""
import asyncio, json, os, sys, time, logging
import alkstore

url, schema, jobs, presence = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
logging.basicConfig(level="WARNING")
app = alkstore.App(url, schema=schema)
done = 0
finished = None

@app.task(queue="bench", name="noop")
async def noop(i: int) -> None:
    global done
    done += 1
    if done == jobs:
        finished.set()

async def main() -> dict:
    global finished
    finished = asyncio.Event()
    await app.connect()
    for start in range(0, jobs, 1000):
        await noop.defer_many([{"i": i} for i in range(start, min(jobs, start + 1000))])
    worker = app.worker(["bench"], concurrency=32, handle_signals=False,
                        presence_interval_s=presence)
    cpu0, t0 = time.process_time(), time.perf_counter()
    run = asyncio.ensure_future(worker.run())
    await finished.wait()
    worker.stop()
    await run
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await app.close()
    return {"file": alkstore.__file__, "jobs_s": jobs / wall, "cpu_us": 1e6 * cpu / jobs}

print(json.dumps(asyncio.run(main())))
"""


def one_run(tree: str, engine: str, pg: str, jobs: int, presence: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        if engine == "sqlite":
            url, schema = f"sqlite:///{tmp}/bench.db", "alkstore"
        else:
            url, schema = pg, f"bench_{uuid.uuid4().hex[:8]}"
        env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
        try:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, url, schema, str(jobs), str(presence)],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        finally:
            if engine == "postgres":
                subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        "import psycopg,sys; "
                        "c=psycopg.connect(sys.argv[1], autocommit=True); "
                        "c.execute(f'DROP SCHEMA IF EXISTS {sys.argv[2]} CASCADE')",
                        pg,
                        schema,
                    ],
                    check=True,
                )
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    assert str(result.pop("file")).startswith(str(Path(tree).resolve())), "wrong tree imported"
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="the tree to compare against")
    parser.add_argument("--after", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pg", default="postgresql://root@127.0.0.1:5432/test")
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--presence", default="5,0.05", help="presence intervals (seconds)")
    args = parser.parse_args()
    trees = {"before": args.before, "after": args.after}
    print(f"{args.jobs} no-op jobs, concurrency 32, median of {args.runs} alternating runs")
    for engine in args.engines.split(","):
        for presence in (float(p) for p in args.presence.split(",")):
            got: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
            for _ in range(args.runs):
                for name, tree in trees.items():
                    got[name].append(one_run(tree, engine, args.pg, args.jobs, presence))
            for name in trees:
                rates = [r["jobs_s"] for r in got[name]]
                cpu = statistics.median(r["cpu_us"] for r in got[name])
                print(
                    f"{engine:8} presence {presence:<5g}s {name:6} "
                    f"{statistics.median(rates):8.0f} jobs/s [{min(rates):.0f}–{max(rates):.0f}]"
                    f"  {cpu:6.1f} µs CPU/job"
                )


if __name__ == "__main__":
    main()
