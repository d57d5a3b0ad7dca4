"""A real worker process: its /metrics scraped over HTTP, its registry row, its outcome
history, and the CLI's ``workers`` and ``--json`` output."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import urllib.request

import alkstore
from tests.acceptance import apps
from tests.acceptance.conftest import Workers, run_cli, wait_until
from tests.dashboard.conftest import free_port


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text: str = r.read().decode()
        return text


def _sample(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels`` (0 if none)."""
    total = 0.0
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match:
            found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            if all(found.get(k) == v for k, v in labels.items()):
                total += float(match.group(2))
    return total


async def test_worker_metrics_over_http_count_the_jobs_it_ran(
    app_store: alkstore.Store, workers: Workers
) -> None:
    await apps.echo.defer_many([{"key": f"m{i}"} for i in range(7)])
    await apps.fails_hard.defer(key="hard")
    await apps.always_fails.defer(key="thrice")  # max_attempts 3: retry, retry, dead
    port = free_port()
    proc = workers.start(
        "--metrics-port", str(port), "--concurrency", "4", "--presence-interval", "0.2"
    )

    def scraped() -> str:
        try:
            return _scrape(port)
        except OSError:
            return ""

    async def all_counted() -> bool:
        text = await asyncio.to_thread(scraped)
        done = _sample(text, "alkstore_jobs_finished_total", task="echo", outcome="success")
        dead = _sample(text, "alkstore_jobs_finished_total", outcome="dead")
        return done == 7 and dead == 2

    await wait_until(all_counted, what="the worker's counters to reach the jobs run")
    text = await asyncio.to_thread(scraped)
    finished = {
        (labels["task"], labels["outcome"]): float(value)
        for raw, value in re.findall(r"^alkstore_jobs_finished_total\{(.*)\} (\S+)$", text, re.M)
        for labels in [dict(re.findall(r'(\w+)="([^"]*)"', raw))]
    }
    assert finished == {
        ("echo", "success"): 7,
        ("fails_hard", "dead"): 1,
        ("always_fails", "retry"): 2,
        ("always_fails", "dead"): 1,
    }
    assert _sample(text, "alkstore_job_duration_seconds_count", task="echo") == 7
    assert _sample(text, "alkstore_claim_batch_size_sum", queue="work") >= 10
    assert _sample(text, "alkstore_wake_latency_seconds_count", queue="work") >= 10
    assert "job=" not in text and "id=" not in text  # never a per-job label

    async def gauges_fresh() -> bool:
        text = await asyncio.to_thread(scraped)
        return _sample(text, "alkstore_queue_jobs", queue="work", state="dead") == 2

    await wait_until(gauges_fresh, what="the queue-depth gauges to refresh")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, workers.log(proc)


async def test_a_worker_is_listed_while_it_runs_and_unregisters_when_it_stops(
    app_store: alkstore.Store, workers: Workers, target: object
) -> None:
    admin = app_store.admin()
    proc = workers.start("--concurrency", "3", "--queue", "work", "--queue", "slow")

    async def listed() -> bool:
        return len(await admin.workers()) == 1

    await wait_until(listed, what="the worker to register")
    [worker] = await admin.workers()
    assert worker.pid == proc.pid and worker.alive
    assert worker.queues == ("work", "slow") and worker.concurrency == 3
    cli = await asyncio.to_thread(run_cli, target, "workers", "--json")
    assert cli.returncode == 0, cli.stderr
    [row] = json.loads(cli.stdout)
    assert row["id"] == worker.id and row["pid"] == proc.pid and row["alive"] is True
    table = await asyncio.to_thread(run_cli, target, "workers")
    assert worker.id in table.stdout and "alive" in table.stdout

    await apps.echo.defer_many([{"key": f"h{i}"} for i in range(4)])
    await apps.fails_hard.defer(key="h-dead")

    async def history_written() -> bool:
        counts = {(h.queue, h.outcome): h.jobs for h in await admin.outcome_history()}
        return counts.get(("work", "success")) == 4 and counts.get(("work", "dead")) == 1

    async def worked() -> bool:
        found = {s.queue: s for s in await admin.stats()}.get("work")
        return found is not None and (found.pending, found.processing, found.dead) == (0, 0, 1)

    await wait_until(worked, what="the jobs to be worked")
    proc.send_signal(signal.SIGTERM)  # the final flush writes what the last beat did not
    assert proc.wait(30) == 0, workers.log(proc)
    await wait_until(history_written, what="the outcome history")
    assert await admin.workers() == []


async def test_json_output_of_stats_and_jobs(app_store: alkstore.Store, target: object) -> None:
    q = app_store.queue("js")
    first = await q.enqueue({"hello": "wörld"})
    await q.enqueue(b"\xff\xfe")
    await q.enqueue(b"plain")
    stats = await asyncio.to_thread(run_cli, target, "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    [row] = [r for r in json.loads(stats.stdout) if r["queue"] == "js"]
    assert row["pending"] == 3 and row["dead"] == 0
    listed = await asyncio.to_thread(run_cli, target, "jobs", "list", "js", "--json")
    jobs = json.loads(listed.stdout)
    assert [(j["payload"], j["payload_encoding"]) for j in jobs] == [
        ({"hello": "wörld"}, "json"),
        ("//4=", "base64"),
        ("plain", "text"),
    ]
    shown = await asyncio.to_thread(run_cli, target, "jobs", "show", str(first), "--json")
    job = json.loads(shown.stdout)
    assert job["id"] == first and job["state"] == "pending" and job["died_at"] is None
    assert job["created_at"].endswith("Z")
    missing = await asyncio.to_thread(run_cli, target, "jobs", "show", "999999", "--json")
    assert missing.returncode == 1 and "no job 999999" in missing.stderr
