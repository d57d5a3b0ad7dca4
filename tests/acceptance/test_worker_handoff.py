"""Hand-offs across real processes (PostgreSQL only: docs/postgres.md "Hand-offs").

Worker processes (``alkstore worker``) and producer processes: every job runs once,
at its first attempt, whoever was idle; a killed worker's idle mark dies with its
session; a frozen one's goes stale within seconds, and nothing is handed to it.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import uuid
from collections import Counter
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore.engines.postgres.handoff import lock_class
from tests.acceptance import apps
from tests.acceptance.conftest import ROOT, Workers, _env, results, wait_until
from tests.conftest import Target

PRODUCER = """
import asyncio, random, sys
from tests.acceptance import apps

async def main(url, schema, tag, n):
    apps.app.url, apps.app.schema = url, schema
    await apps.app.connect()
    rng = random.Random(tag)
    for i in range(n):
        await apps.echo.defer(key=f"{tag}-{i}")
        await asyncio.sleep(rng.choice([0, 0, 0.001, 0.004]))
    await apps.app.close()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


@pytest.fixture
def target(pg_url: str) -> Target:
    """A fresh schema in this session's PostgreSQL database (no SQLite: it hands off nothing)."""
    return Target("postgres", pg_url, f"t_{uuid.uuid4().hex[:12]}")


async def idle_workers(target: Target) -> int:
    """How many workers hold an idle mark now (each holds its slot's keys)."""
    async with await psycopg.AsyncConnection.connect(target.url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(DISTINCT objid::bigint / 256) FROM pg_locks"
            " WHERE locktype = 'advisory' AND classid = %s::oid AND granted"
            " AND mode = 'ExclusiveLock'",
            (lock_class(target.schema) % 2**32,),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


def _idle(target: Target, n: int) -> Any:
    async def check() -> bool:
        return await idle_workers(target) == n

    return check


def _handed(log: str) -> int:
    return sum(
        int(line.split(" job(s) handed over")[0].rsplit(" ", 1)[1])
        for line in log.splitlines()
        if " job(s) handed over" in line
    )


async def test_jobs_from_two_producer_processes_run_once_across_three_workers(
    app_store: alkstore.Store, workers: Workers, target: Target
) -> None:
    procs = [workers.start("--concurrency", "4") for _ in range(3)]
    await wait_until(_idle(target, 3), what="three idle workers")
    producers = [
        subprocess.Popen(
            [sys.executable, "-c", PRODUCER, target.url, target.schema, tag, "150"],
            cwd=ROOT,
            env=_env(),
        )
        for tag in ("p", "q")
    ]
    for producer in producers:
        assert await asyncio.to_thread(producer.wait, 60) == 0

    async def all_ran() -> bool:
        return len(await results(app_store)) >= 300

    await wait_until(all_ran, what="the 300 jobs to run")
    runs = await results(app_store)
    keys = Counter(r["key"] for r in runs)
    assert len(runs) == 300 and set(keys.values()) == {1}, keys.most_common(3)
    assert {r["attempt"] for r in runs} == {1}
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        assert await asyncio.to_thread(proc.wait, 30) == 0, workers.log(proc)
    assert sum(_handed(workers.log(proc)) for proc in procs) > 0  # the workers were idle


async def test_a_killed_workers_idle_mark_dies_with_its_session(
    app_store: alkstore.Store, workers: Workers, target: Target
) -> None:
    first = workers.start()
    await wait_until(_idle(target, 1), what="the first worker to be idle")
    first.kill()  # SIGKILL: no stop, no goodbye; its slot row stays behind
    first.wait()
    await wait_until(_idle(target, 0), what="its idle mark to go with its connection")
    second = workers.start()
    await wait_until(_idle(target, 1), what="the second worker to be idle")
    for i in range(5):
        await apps.echo.defer(key=f"k{i}")

    async def all_ran() -> bool:
        return len(await results(app_store)) == 5

    await wait_until(all_ran, what="the five jobs to run")
    assert {(r["pid"], r["attempt"]) for r in await results(app_store)} == {(second.pid, 1)}


async def test_a_frozen_worker_is_handed_nothing_once_its_mark_is_stale(
    app_store: alkstore.Store, workers: Workers, target: Target
) -> None:
    frozen = workers.start()
    live = workers.start()
    await wait_until(_idle(target, 2), what="both workers to be idle")
    frozen.send_signal(signal.SIGSTOP)
    try:
        # its listener still holds the keys of the seconds around the one it froze in;
        # past them no enqueue finds it idle (docs/postgres.md "Hand-offs")
        await asyncio.sleep(2.5)
        for i in range(10):
            await apps.echo.defer(key=f"k{i}")

        async def all_ran() -> bool:
            return len(await results(app_store)) == 10

        await wait_until(all_ran, what="the ten jobs to run while one worker is frozen")
        assert {(r["pid"], r["attempt"]) for r in await results(app_store)} == {(live.pid, 1)}
    finally:
        frozen.send_signal(signal.SIGCONT)


async def test_a_worker_stopping_while_jobs_stream_in_loses_none_to_a_lapse(
    app_store: alkstore.Store, workers: Workers, target: Target
) -> None:
    """Jobs handed to a worker as it stops are given back at once (no waiting for
    a claim to lapse): every job runs once, at its first attempt."""
    stopping = workers.start("--concurrency", "4")
    staying = workers.start("--concurrency", "4")
    await wait_until(_idle(target, 2), what="both workers to be idle")
    for i in range(200):
        await apps.echo.defer(key=f"k{i}")
        if i == 60:
            stopping.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.002)
    assert await asyncio.to_thread(stopping.wait, 30) == 0, workers.log(stopping)

    async def all_ran() -> bool:
        return len(await results(app_store)) >= 200

    await wait_until(all_ran, what="the 200 jobs to run")
    runs = await results(app_store)
    assert sorted(r["key"] for r in runs) == sorted(f"k{i}" for i in range(200))
    assert {r["attempt"] for r in runs} == {1}
    assert {r["pid"] for r in runs} == {stopping.pid, staying.pid}
