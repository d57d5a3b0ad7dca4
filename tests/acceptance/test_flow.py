"""Flow control with real worker processes on every engine: a global concurrency
limit, a rate limit, pause, stopping a cancelled handler, snooze.

The handlers keep their own log (tests/acceptance/apps.py, one O_APPEND line per
event), so what they saw is judged by the order of events, and rates by the
database's own claim timestamps, never by how long something took here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import alkstore
from tests.acceptance import apps
from tests.acceptance.conftest import Workers, run_cli, wait_until


def _lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def _count(path: Path, event: str) -> int:
    return sum(1 for fields in _lines(path) if fields[0] == event)


async def test_four_workers_never_run_more_than_the_queue_limit(
    app_store: alkstore.Store, workers: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "limited.log"
    queue = app_store.queue("limited")
    await queue.set_limits(concurrency=3)
    n = 60
    await apps.limited.defer_many([{"path": str(path), "seconds": 0.05}] * n)
    for _ in range(4):
        workers.start("--queue", "limited", "--concurrency", "16")

    async def all_ended() -> bool:
        return _count(path, "end") == n

    await wait_until(all_ended, timeout=120, what="every limited job to finish")
    running, peak, starts = 0, 0, []
    for event, job_id in _lines(path):
        running += 1 if event == "start" else -1
        peak = max(peak, running)
        if event == "start":
            starts.append(job_id)
    assert peak == 3, f"at most 3 at once, and 3 reached; saw {peak}"
    assert len(starts) == len(set(starts)) == n  # each job ran once


async def test_a_rate_limit_holds_every_one_second_window_to_the_rate(
    app_store: alkstore.Store, workers: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "rated.log"
    await app_store.queue("rated").set_limits(rate="50/s")
    n = 150  # three seconds' worth
    await apps.rated.defer_many([{"path": str(path)}] * n)
    for _ in range(2):
        workers.start("--queue", "rated", "--concurrency", "16")

    async def all_claimed() -> bool:
        return _count(path, "claimed") == n

    await wait_until(all_claimed, timeout=120, what="every rated job to run")
    times = sorted(float(fields[2]) for fields in _lines(path))
    # claim times are the database's; 1e-4 s covers microsecond rounding of stored times
    worst = max(
        sum(1 for t in times[i:] if t < start + 1.0 - 1e-4) for i, start in enumerate(times)
    )
    assert worst <= 50, f"a one-second window held {worst} claims"


async def test_after_pause_returns_no_worker_claims_and_resume_restarts_them(
    app_store: alkstore.Store, workers: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "paused.log"
    queue = app_store.queue("limited")
    n = 400
    ids = await apps.limited.defer_many([{"path": str(path), "seconds": 0.01}] * n)
    for _ in range(2):
        workers.start("--queue", "limited", "--concurrency", "4")

    async def some_started() -> bool:
        return _count(path, "start") >= 20

    await wait_until(some_started, what="the workers to be busy")
    await queue.pause()
    pending = {j.id for j in await app_store.admin().list_jobs("limited", "pending", 10_000)}
    taken = set(ids) - pending  # claimed before pause() returned

    async def idle() -> bool:
        return (await queue.info()).processing == 0

    await wait_until(idle, what="the running jobs to finish")
    await asyncio.sleep(1.0)  # five re-polls of every worker: chances to claim (there must be none)
    started = {int(fields[1]) for fields in _lines(path) if fields[0] == "start"}
    assert started <= taken, f"claimed after pause: {sorted(started - taken)[:10]}"
    still = {j.id for j in await app_store.admin().list_jobs("limited", "pending", 10_000)}
    assert still == pending and pending  # nothing left pending, and enqueues kept
    assert (await queue.info()).paused
    await queue.resume()

    async def all_ended() -> bool:
        return _count(path, "end") == n

    await wait_until(all_ended, timeout=120, what="the rest to run after resume")


async def test_a_cancelled_running_job_is_stopped_and_gets_no_outcome(
    app_store: alkstore.Store, workers: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "long.log"
    queue = app_store.queue("long")
    first = await apps.long_async.defer(str(path))
    second = await apps.long_sync.defer(str(path))
    proc = workers.start("--queue", "long", "--concurrency", "4")

    async def both_started() -> bool:
        return _count(path, "start") == 2

    await wait_until(both_started, what="both long jobs to start")
    assert await queue.cancel(first) and await queue.cancel(second)

    async def both_cancelled() -> bool:
        return _count(path, "cancelled") == 2

    await wait_until(both_cancelled, what="both handlers to see the cancel")
    events = {(fields[0], int(fields[1])) for fields in _lines(path)}
    assert {("cancelled", first), ("cancelled", second)} <= events
    assert not any(event == "finished" for event, _ in events)

    async def logged() -> bool:
        return workers.log(proc).count("outcome=cancelled") == 2

    await wait_until(logged, what="the worker to log both cancels")
    assert await queue.get_job(first) is None and await queue.get_job(second) is None
    assert proc.poll() is None  # the worker keeps running


async def test_a_snoozed_job_runs_again_without_spending_attempts(
    app_store: alkstore.Store, workers: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "snoozy.log"
    job_id = await apps.snoozy.defer(str(path), 2)
    proc = workers.start()

    async def done() -> bool:
        return len(_lines(path)) == 3 and await app_store.queue("work").get_job(job_id) is None

    await wait_until(done, what="the snoozed job to finish")
    assert _lines(path) == [["run", "1"]] * 3  # every run is attempt 1
    assert workers.log(proc).count("outcome=snoozed") == 2


async def _stop_between_writes(proc: Any, target: Any) -> None:
    """SIGSTOP ``proc`` outside a write transaction of its own. On SQLite a process
    stopped inside one (its presence beat, a sweep, a heartbeat) would hold the
    file's write lock until SIGCONT, and this test's own claim could never run: stop
    it, and if the lock is taken, let it go on a moment and try again."""
    for _ in range(100):
        proc.send_signal(signal.SIGSTOP)
        if target.engine != "sqlite":
            return
        try:
            with contextlib.closing(sqlite3.connect(target.url[len("sqlite:///") :], 0.2)) as db:
                db.execute("BEGIN IMMEDIATE")
                db.rollback()
            return
        except sqlite3.OperationalError:
            proc.send_signal(signal.SIGCONT)
            await asyncio.sleep(0.02)
    raise AssertionError("the worker never left its write transactions")


async def test_a_worker_whose_claim_was_reclaimed_stops_the_handler(
    app_store: alkstore.Store, workers: Workers, tmp_path: Path, target: Any
) -> None:
    path = tmp_path / "lease.log"
    job_id = await apps.short_lease.defer(str(path))
    proc = workers.start("--queue", "lease")

    async def started() -> bool:
        return _count(path, "start") == 1

    await wait_until(started, what="the job to start")
    await _stop_between_writes(proc, target)  # the worker stalls: its heartbeats stop
    try:
        queue = app_store.queue("lease")
        reclaimed: list[alkstore.JobHandle] = []

        async def lapsed_and_reclaimed() -> bool:
            handle = await queue.claim_one("the-test")
            if handle is not None:
                reclaimed.append(handle)
            return bool(reclaimed)

        await wait_until(lapsed_and_reclaimed, what="the stalled claim to lapse")
        assert reclaimed[0].job.id == job_id and reclaimed[0].job.attempts == 2
    finally:
        proc.send_signal(signal.SIGCONT)

    async def stopped() -> bool:
        return _count(path, "cancelled") == 1

    await wait_until(stopped, what="the old handler to be stopped")
    await wait_until(
        lambda: _async_true("outcome=lost" in workers.log(proc)), what="the lost outcome"
    )
    assert await reclaimed[0].ack()  # the new claim was never touched by the old worker


async def _async_true(value: bool) -> bool:
    return value


async def test_the_queues_commands_set_and_show_flow_control_also_as_json(
    app_store: alkstore.Store, target: object
) -> None:
    await app_store.queue("fc").enqueue(b"x")
    limited = await asyncio.to_thread(
        run_cli, target, "queues", "limit", "fc", "--concurrency", "3", "--rate", "10/s"
    )
    assert limited.returncode == 0, limited.stderr
    paused = await asyncio.to_thread(run_cli, target, "queues", "pause", "fc")
    assert paused.returncode == 0 and "paused" in paused.stdout
    assert (await app_store.queue("fc").info()).paused
    listed = await asyncio.to_thread(run_cli, target, "queues", "list", "--json")
    [row] = [r for r in json.loads(listed.stdout) if r["queue"] == "fc"]
    assert row["paused"] is True and row["concurrency"] == 3 and row["rate"] == "10/s"
    assert row["partition_concurrency"] is None and row["pending"] == 1
    stats = await asyncio.to_thread(run_cli, target, "stats", "--json")
    [counted] = [r for r in json.loads(stats.stdout) if r["queue"] == "fc"]
    assert counted["pending"] == 1 and counted["paused"] is True
    assert counted["concurrency"] == 3 and counted["rate"] == "10/s"
    bad = await asyncio.to_thread(run_cli, target, "queues", "limit", "fc", "--rate", "lots")
    assert bad.returncode != 0 and "lots" in bad.stderr and "Traceback" not in bad.stderr
    assert (await app_store.queue("fc").info()).concurrency == 3  # nothing written
