"""Periodic ticks through real worker processes: each tick one job, across workers and kills."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import alkstore
from tests.acceptance import periodic_app
from tests.acceptance.conftest import ROOT, _env, run_cli, store_args, wait_until

WORKERS = 4
TICKS = 20


def _start(target, tmp_path: Path, n: int) -> subprocess.Popen[bytes]:  # type: ignore[no-untyped-def]
    log = open(tmp_path / f"periodic-{n}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "alkstore",
            "worker",
            "tests.acceptance.periodic_app:app",
            *store_args(target),
            "--poll-interval",
            "0.2",
            "--grace",
            "5",
        ],
        cwd=ROOT,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    return proc


async def _ticks(store: alkstore.Store) -> list[dict[str, float]]:
    jobs = await store.admin().list_jobs(periodic_app.TICKS, limit=10_000)
    return [json.loads(job.payload) for job in jobs]


@pytest.mark.slow
async def test_four_workers_enqueue_every_tick_exactly_once_even_when_one_is_killed(
    target,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    procs = [_start(target, tmp_path, n) for n in range(WORKERS)]
    store = await alkstore.connect(target.url, **target.connect_kwargs())
    try:

        async def ran(n: int) -> bool:
            return len({r["tick"] for r in await _ticks(store)}) >= n

        await wait_until(lambda: ran(TICKS // 2), timeout=90, what="half the ticks")
        procs[0].send_signal(signal.SIGKILL)  # mid-run: no give-back, no goodbye
        procs[0].wait()
        await wait_until(lambda: ran(TICKS + 2), timeout=90, what="every tick")
        for proc in procs[1:]:
            proc.send_signal(signal.SIGTERM)
        for proc in procs[1:]:
            proc.wait(timeout=60)
        records = await _ticks(store)
        shown = run_cli(target, "schedules", "tests.acceptance.periodic_app:app")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        await store.close()
    jobs_of: dict[float, set[int]] = defaultdict(set)
    for r in records:
        jobs_of[r["tick"]].add(int(r["job"]))
    ticks = sorted(jobs_of)
    assert len(ticks) >= TICKS
    doubled = {t: j for t, j in jobs_of.items() if len(j) > 1}
    assert not doubled, f"ticks enqueued more than once: {doubled}"
    # not lost: every second from the first tick to the last ran (killed worker included)
    # except possibly the last one, which may have been enqueued as the workers stopped
    expected = {ticks[0] + i for i in range(int(ticks[-1] - ticks[0]))}
    missing = sorted(expected - set(ticks))
    assert not missing, f"ticks lost: {missing}"
    assert shown.returncode == 0, shown.stderr
    assert "every-second" in shown.stdout and "* * * * * *" in shown.stdout
