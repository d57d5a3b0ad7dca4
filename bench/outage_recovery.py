"""How soon a worker's heartbeats get through after a PostgreSQL outage.

A scratch server (its own data directory and port, started and removed here:
the shared server's settings are never touched), an ``alkstore worker``
process holding long jobs whose visibility timeout outlasts the outage. The
server is stopped for ``--outage`` seconds and started again; from the moment
it accepts connections the bench watches the held jobs' claim deadlines (a
heartbeat moves them) and one new job. Printed per outage, over ``--runs``
runs: server ready → first heartbeat landed, → the new job done (claimed, run
and acked), and how many held jobs the worker stopped because no heartbeat got
through in time. The held jobs' visibility timeout is the outage + 30 s and
they beat every third of it, so outages shorter than 15 s end before a beat is
due: the first beat after them is simply the next one on schedule.

Heartbeats go through the store's pool. Its connections die with the server
and psycopg_pool reconnects on a backoff (1, 2, 4 … s, to five minutes), so a
pool left to its schedule comes back up to about an outage later.

    .venv/bin/python bench/outage_recovery.py [--outage 20 40 60] [--runs 1] [--logs DIR]
    .venv/bin/python bench/old_code.py OTHER_CHECKOUT bench/outage_recovery.py ...
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg

import alkstore

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # scratch_pg: the scratch server the tests use too
from scratch_pg import ScratchServer, server_bindir  # type: ignore[import-not-found]  # noqa: E402

APP = """
import asyncio
import os
import alkstore

app = alkstore.App(os.environ["ALKSTORE_URL"])


@app.task(queue="hold", name="hold", visibility_timeout_s={vt}, max_attempts=20)
async def hold(seconds: float) -> None:
    await asyncio.sleep(seconds)


@app.task(queue="hold", name="mark", visibility_timeout_s={vt})
async def mark() -> None:
    pass
"""


Conn = psycopg.Connection[tuple[Any, ...]]


def _deadlines(conn: Conn, ids: list[int]) -> dict[int, float]:
    rows = conn.execute(
        "SELECT id, extract(epoch FROM claim_expires_at)::float8 FROM alkstore.alk_jobs"
        " WHERE id = ANY(%s)",
        (ids,),
    ).fetchall()
    return {r[0]: r[1] for r in rows if r[1] is not None}


def _load_app(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("outage_app", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _defer(app_module: ModuleType, task: str, n: int, **kw: object) -> list[int]:
    async with app_module.app:
        return [(await getattr(app_module, task).defer(**kw)).id for _ in range(n)]


def _pending(conn: Conn, job_id: int) -> bool:
    row = conn.execute("SELECT count(*) FROM alkstore.alk_jobs WHERE id = %s", (job_id,))
    return bool(row.fetchone()[0])  # type: ignore[index]


def one_run(
    bindir: str, home: Path, outage_s: float, logs: Path | None
) -> tuple[float, float, int]:
    """(ready → first heartbeat landed, ready → a new job done, jobs stopped locally)."""
    vt = outage_s + 30.0  # the held claims outlast the outage
    server = ScratchServer(bindir)
    server.start()
    (home / "outage_app.py").write_text(textwrap.dedent(APP.format(vt=vt)))
    os.environ["ALKSTORE_URL"] = server.url
    app_module = _load_app(home / "outage_app.py")
    code = Path(alkstore.__file__).resolve().parents[1]  # bench/old_code.py's, if run so
    log_path = home / "worker.log"
    worker = None
    try:
        with open(log_path, "w") as log:
            worker = subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / "old_code.py"), str(code),
                 str(code / "alkstore" / "__main__.py"), "worker", "outage_app:app",
                 "--url", server.url, "--concurrency", "5", "--log-level", "info"],
                env={**os.environ, "PYTHONPATH": str(home)}, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        held = asyncio.run(_defer(app_module, "hold", 4, seconds=vt * 3))
        deadline = time.monotonic() + 30
        with psycopg.connect(server.url, autocommit=True) as conn:
            while len(_deadlines(conn, held)) < 4:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the worker claimed nothing:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.1)
        time.sleep(1.0)
        server.stop()
        time.sleep(outage_s)
        server.start()
        ready = time.time()
        with psycopg.connect(server.url, autocommit=True) as conn:  # one for the polls
            seen = _deadlines(conn, held)
            marked = asyncio.run(_defer(app_module, "mark", 1))[0]
            beat_at = done_at = None
            while time.time() - ready < vt and (beat_at is None or done_at is None):
                now = _deadlines(conn, held)
                if beat_at is None and any(now.get(i, 0) > seen.get(i, 0) + 0.5 for i in held):
                    beat_at = time.time()
                if done_at is None and not _pending(conn, marked):
                    done_at = time.time()
                time.sleep(0.05)
        worker.kill()  # its held jobs run for minutes: no graceful stop
        worker.wait(30)
        if logs is not None:
            shutil.copy(log_path, logs / f"outage-{outage_s:g}-{int(ready)}.log")
        stopped = log_path.read_text().count("no heartbeat got through")
        nan = float("nan")
        return (
            beat_at - ready if beat_at else nan,
            done_at - ready if done_at else nan,
            stopped,
        )
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        server.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage", type=float, nargs="+", default=[20.0, 40.0, 60.0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--logs", type=Path, help="keep each run's worker log here")
    args = parser.parse_args()
    bindir = server_bindir()
    if bindir is None:
        raise SystemExit("needs PostgreSQL's server binaries in /usr/lib/postgresql/*/bin")
    print("| outage | ready → first heartbeat (s) | ready → new job done (s) | stopped locally |")
    print("|---|---|---|---|")
    for outage in args.outage:
        beats, starts, stops = [], [], 0
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="alk-outage-") as d:
                b, s, k = one_run(bindir, Path(d), outage, args.logs)
            beats.append(b)
            starts.append(s)
            stops += k
            print(f"  run: outage {outage:g} s: beat {b:.2f} s, job {s:.2f} s, stopped {k}",
                  file=sys.stderr)  # fmt: skip
        each = ", ".join(f"{b:.2f}" for b in beats)
        print(
            f"| {outage:g} s | {statistics.median(beats):.2f} ({each})"
            f" | {statistics.median(starts):.2f} | {stops} |"
        )


if __name__ == "__main__":
    main()
