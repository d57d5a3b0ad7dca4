"""Three worker hosts against one PostgreSQL, run as in production, with links cut.

Each scenario runs `alkstore worker` processes in network namespaces (conftest.py),
then checks offline, against the database and every process's append-only event
file (handler start / finish / stop) and outcome log: nothing lost (every job
finished and acked, none dead), no false success (each job reported ``success``
exactly once, by the claim whose handler finished), no two claims of one job
running at once (the worker stops a handler before its claim lapses by its own
clock, so the allowed overlap is 0), and every process exits on its own after a
second signal. The figures (time to notice a cut, to resume after a heal, exit
times) are printed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import time
import uuid
from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

import psycopg
import pytest

from tests.cluster import app as cluster_app
from tests.cluster.conftest import Cluster, Worker

pytestmark = pytest.mark.slow

OVERLAP_MARGIN_S = 0.0  # docs/worker.md: a handler stops before its claim lapses


def _schema() -> str:
    return f"c_{uuid.uuid4().hex[:10]}"


async def _enqueue(cluster: Cluster, schema: str, seconds: list[float]) -> list[int]:
    app = cluster_app.app
    app.url, app.schema = cluster.url(), schema
    await app.connect()
    try:
        return await cluster_app.work.defer_many([{"seconds": s} for s in seconds])
    finally:
        await app.close()


def _rows(cluster: Cluster, schema: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(cluster.url(connect_timeout="5"), autocommit=True) as conn:
        return conn.execute(sql.replace("{s}", f'"{schema}"')).fetchall()


def _left(cluster: Cluster, schema: str, queue: str = "work") -> int:
    rows = _rows(cluster, schema, f"SELECT count(*) FROM {{s}}.alk_jobs WHERE queue = '{queue}'")
    return int(rows[0][0])


async def _until(check: Any, what: str, limit_s: float = 60.0) -> None:
    """Poll ``check`` until true; a liveness limit, named in the failure."""
    deadline = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def _events(workers: list[Worker]) -> list[dict[str, Any]]:
    out = []
    for worker in workers:
        if worker.events.exists():
            for line in worker.events.read_text().splitlines():
                event = json.loads(line)
                event["worker"] = worker.name
                out.append(event)
    return out


def _started(worker: Worker, jobs: set[int]) -> bool:
    return any(e["ev"] == "start" and e["job"] in jobs for e in _events([worker]))


def _running(worker: Worker) -> bool:
    """Whether a handler of the worker started and has not ended."""
    events = _events([worker])
    ended = {(e["job"], e["attempt"]) for e in events if e["ev"] != "start"}
    return any((e["job"], e["attempt"]) not in ended for e in events if e["ev"] == "start")


def _stop(workers: list[Worker], *, twice: bool = False) -> dict[str, float]:
    """SIGTERM each (and again: ``twice``), then wait for each to exit on its own;
    the seconds from the last signal to the exit."""
    for worker in workers:
        worker.proc.send_signal(signal.SIGTERM)
        if twice:
            time.sleep(0.3)
            worker.proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    took = {}
    for worker in workers:
        worker.proc.wait(timeout=30)  # liveness: it must exit by itself
        worker.exited_at = time.time()
        took[worker.name] = time.monotonic() - sent
    return took


def _when(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(record["time"]).timestamp()


def _first(worker: Worker, text: str, after: float) -> float | None:
    for record in worker.records():
        if text in record.get("message", "") and _when(record) >= after:
            return _when(record)
    return None


def _check(
    cluster: Cluster, schema: str, workers: list[Worker], jobs: set[int], queue: str = "work"
) -> dict[str, Any]:
    """The offline checks; returns the figures."""
    events = _events(workers)
    # nothing lost: no live or dead row left of these jobs, each finished somewhere
    live = _rows(cluster, schema, "SELECT id, state FROM {s}.alk_jobs")
    dead = _rows(cluster, schema, "SELECT id, last_error FROM {s}.alk_dead")
    assert not dead, f"dead jobs: {dead}"
    assert not [r for r in live if r[0] in jobs], f"left behind: {live}"
    finished = {(e["job"], e["attempt"], e["worker"]) for e in events if e["ev"] == "finish"}
    assert jobs <= {job for job, _, _ in finished}, "a job never finished"
    # no false success: exactly one success per job, by a claim whose handler finished
    successes = [
        (r["id"], r["attempt"], w.name)
        for w in workers
        for r in w.records()
        if r.get("outcome") == "success" and r.get("queue") == queue
    ]
    per_job = Counter(job for job, _, _ in successes)
    assert all(per_job[job] == 1 for job in jobs), {
        job: n for job, n in per_job.items() if n != 1
    } or {job: 0 for job in jobs if job not in per_job}
    assert set(successes) <= finished, "a success without a finished handler"
    # no overlapping runs of one job by two claims
    spans: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    open_at: dict[tuple[int, int, str], float] = {}
    ends = {w.name: (w.exited_at or time.time()) for w in workers}
    for e in sorted(events, key=lambda e: e["t"]):
        key = (e["job"], e["attempt"], e["worker"])
        if e["ev"] == "start":
            open_at[key] = e["t"]
        elif key in open_at:
            spans[e["job"]].append((open_at.pop(key), e["t"], e["worker"]))
    for (job, _, name), start in open_at.items():  # never ended: until its process did
        spans[job].append((start, ends[name], name))
    worst, overlapped = 0.0, 0
    for runs in spans.values():
        pairs = itertools.combinations(sorted(runs), 2)
        overlap = max((min(e1, e2) - s2 for (_, e1, _), (s2, e2, _) in pairs), default=0.0)
        if overlap > OVERLAP_MARGIN_S:
            overlapped += 1
            worst = max(worst, overlap)
    assert overlapped == 0, f"{overlapped} job(s) ran on two claims at once, by up to {worst:.3f}s"
    reruns = sum(1 for runs in spans.values() if len(runs) > 1)
    return {"jobs": len(jobs), "reruns": reruns, "overlaps": overlapped}


def _report(capsys: pytest.CaptureFixture[str], name: str, figures: dict[str, Any]) -> None:
    shown = ", ".join(
        f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items()
    )
    with capsys.disabled():
        print(f"\ncluster {name}: {shown}")


async def test_baseline_drain(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema()
    jobs = set(await _enqueue(cluster, schema, [0.02] * 240))
    workers = [cluster.start(h, schema, "--concurrency", "8") for h in cluster.hosts]
    started = time.monotonic()
    await _until(lambda: _left(cluster, schema) == 0, "the drain")
    drained = time.monotonic() - started
    exits = _stop(workers)
    assert all(w.proc.returncode == 0 for w in workers)
    figures = _check(cluster, schema, workers, jobs)
    _report(capsys, "baseline", {**figures, "drain_s": drained, "exit_s": max(exits.values())})


async def _cut_scenario(cluster: Cluster, schema: str) -> tuple[list[Worker], set[int], float]:
    """Long (heartbeating) and short jobs on three hosts; host 1 cut once it runs a
    long one. Returns the workers, the jobs and the time of the cut."""
    long = await _enqueue(cluster, schema, [4.0] * 9)
    short = await _enqueue(cluster, schema, [0.05] * 120)
    args = ("--concurrency", "4", "--grace", "3")
    workers = [cluster.start(cluster.hosts[0], schema, *args)]  # first: it takes long jobs
    await _until(lambda: _started(workers[0], set(long)), "host 1 to run a long job")
    workers += [cluster.start(h, schema, *args) for h in cluster.hosts[1:]]
    await _until(lambda: all(w.events.exists() for w in workers), "every host to run jobs")
    return workers, set(long) | set(short), cluster.cut(cluster.hosts[0])


async def test_cut_and_heal(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema()
    workers, jobs, cut_at = await _cut_scenario(cluster, schema)
    await asyncio.sleep(cluster_app.VISIBILITY_S + 4)  # its claims lapse and are taken
    healed_at = cluster.heal(cluster.hosts[0])
    await _until(lambda: _left(cluster, schema) == 0, "the drain")
    await asyncio.sleep(1.0)  # the healed host's outcomes, written or refused
    _stop(workers)
    assert all(w.proc.returncode == 0 for w in workers)
    figures = _check(cluster, schema, workers, jobs)
    cut_off = workers[0]
    noticed = _first(cut_off, "database unreachable", cut_at)
    back = _first(cut_off, "database reachable again", healed_at)
    assert noticed is not None and back is not None, "the cut and heal were not logged"
    lapsed = [r for r in cut_off.records() if "no heartbeat got through" in r.get("message", "")]
    _report(
        capsys,
        "cut and heal",
        {
            **figures,
            "notice_s": noticed - cut_at,
            "resume_s": back - healed_at,
            "stopped_locally": len(lapsed),
        },
    )


async def test_cut_forever_then_two_signals(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _schema()
    workers, jobs, cut_at = await _cut_scenario(cluster, schema)
    try:
        await asyncio.sleep(1.0)
        exits = _stop([workers[0]], twice=True)  # then nothing else: it must exit
        assert workers[0].proc.returncode == 1
        await _until(lambda: _left(cluster, schema) == 0, "the others to drain")
        _stop(workers[1:])
    finally:
        cluster.heal(cluster.hosts[0])
    figures = _check(cluster, schema, workers, jobs)
    noticed = _first(workers[0], "database unreachable", cut_at)
    _report(
        capsys,
        "cut forever",
        {
            **figures,
            "exit_after_2nd_signal_s": exits[workers[0].name],
            "notice_s": (noticed - cut_at) if noticed is not None else -1.0,
        },
    )


async def test_schedules_with_a_host_cut_off(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _schema()
    env = {"ALKC_TICKS": "1"}
    workers = [
        cluster.start(h, schema, "--queue", "ticks", "--concurrency", "2", env=env)
        for h in cluster.hosts
    ]
    await _until(lambda: _running(workers[0]), "host 1 to run a tick", 30)
    cut_at = cluster.cut(cluster.hosts[0])  # it holds the tick: the next ones are skipped
    await asyncio.sleep(cluster_app.VISIBILITY_S + 2)
    healed_at = cluster.heal(cluster.hosts[0])
    await asyncio.sleep(2.0)
    _stop(workers)
    events = _events(workers)
    ran = {e["job"] for e in events if e["ev"] == "start"}
    left = {row[0] for row in _rows(cluster, schema, "SELECT id FROM {s}.alk_jobs")}
    finished = ran - left  # a tick given back at the stop is still there: not lost
    figures = _check(cluster, schema, workers, finished, queue="ticks")
    skipped = sum(
        1 for w in workers for r in w.records() if "skipped (still running)" in r.get("message", "")
    )
    during = [e for e in events if cut_at <= e["t"] < healed_at and e["ev"] == "start"]
    assert during, "no tick ran while a host was cut off"
    _report(
        capsys, "schedules", {**figures, "ticks_skipped": skipped, "ran_during_cut": len(during)}
    )


async def test_rolling_restart(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    schema = _schema()
    jobs = set(await _enqueue(cluster, schema, [0.2] * 500))
    args = ("--concurrency", "8", "--grace", "5")
    workers = [cluster.start(h, schema, *args) for h in cluster.hosts]
    every = list(workers)
    for i, host in enumerate(cluster.hosts):
        old = workers[i]
        await _until(lambda: _started(old, jobs), f"{host} to run jobs")  # noqa: B023
        _stop([old])
        assert old.proc.returncode == 0
        workers[i] = cluster.start(host, schema, *args)
        every.append(workers[i])
    await _until(lambda: _left(cluster, schema) == 0, "the drain")
    _stop(workers)
    figures = _check(cluster, schema, every, jobs)
    _report(capsys, "rolling restart", figures)
