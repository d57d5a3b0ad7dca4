"""The worker as real processes: outcomes, heartbeats, signals, crashes, timeouts."""

from __future__ import annotations

import signal
from typing import Any

import alkstore
from tests.acceptance import apps
from tests.acceptance.conftest import Workers, results, run_cli, wait_until


async def _keys(store: alkstore.Store, key: str, **match: Any) -> list[dict[str, Any]]:
    return [
        r
        for r in await results(store)
        if r["key"] == key and all(r.get(k) == v for k, v in match.items())
    ]


async def test_worker_process_runs_deferred_async_and_sync_tasks(
    app_store: alkstore.Store, workers: Workers
) -> None:
    ids = [await apps.echo.defer(key=f"a{i}", value={"n": i}) for i in range(5)]
    ids += await apps.echo.defer_many([{"key": "b0"}, {"key": "b1", "value": [1, 2]}])
    ids.append(await apps.echo_sync.defer("s0"))
    workers.start("--concurrency", "4")

    async def all_done() -> bool:
        return len(await results(app_store)) == len(ids)

    await wait_until(all_done, what="every task to run")
    seen = {r["key"]: r for r in await results(app_store)}
    assert set(seen) == {"a0", "a1", "a2", "a3", "a4", "b0", "b1", "s0"}
    assert seen["a3"]["value"] == {"n": 3} and seen["b1"]["value"] == [1, 2]
    assert all(r["attempt"] == 1 for r in seen.values())
    for job_id in ids:  # acked: gone from the store
        await wait_until(lambda i=job_id: _gone(app_store, i), what=f"job {job_id} to be acked")


async def test_exception_retries_on_the_curve_then_dead_letters(
    app_store: alkstore.Store, workers: Workers
) -> None:
    job_id = await apps.always_fails.defer(key="boom")
    workers.start()
    admin = app_store.admin()

    async def dead() -> bool:
        job = await admin.find_job(job_id)
        return job is not None and job.state == "dead"

    await wait_until(dead, what="the job to die")
    job = await admin.find_job(job_id)
    assert job is not None and job.attempts == 3
    assert job.last_error is not None and job.last_error.startswith("RuntimeError: boom always")
    assert [r["attempt"] for r in await _keys(app_store, "boom")] == [1, 2, 3]


async def test_fail_dead_letters_at_once(app_store: alkstore.Store, workers: Workers) -> None:
    hard = await apps.fails_hard.defer(key="hard")
    typed = await apps.fails_on_type.defer(key="typed")
    workers.start()
    admin = app_store.admin()

    async def both_dead() -> bool:
        jobs = [await admin.find_job(i) for i in (hard, typed)]
        return all(j is not None and j.state == "dead" for j in jobs)

    await wait_until(both_dead, what="both jobs to die")
    hard_job, typed_job = await admin.find_job(hard), await admin.find_job(typed)
    assert hard_job is not None and hard_job.attempts == 1
    assert hard_job.last_error == "hard: no point retrying"
    assert typed_job is not None and typed_job.attempts == 1
    assert typed_job.last_error is not None and typed_job.last_error.startswith("KeyError")
    assert len(await _keys(app_store, "hard")) == 1 and len(await _keys(app_store, "typed")) == 1


async def test_unknown_task_is_given_back_unrun_with_a_warning_naming_task_and_worker(
    app_store: alkstore.Store, workers: Workers
) -> None:
    # a rolling deploy: an older worker meets a task only newer ones know
    queue = app_store.queue("work")
    job_id = await queue.enqueue({"task": "no.such.task", "args": {}})
    proc = workers.start("--worker-id", "old-worker")
    admin = app_store.admin()
    warning = "does not know task 'no.such.task'"
    await wait_until(_logged(workers, proc, warning), what="the warning")
    line = next(line for line in workers.log(proc).splitlines() if warning in line)
    assert "old-worker" in line and "echo" in line  # which worker, and what it knows
    job = await admin.find_job(job_id)
    assert job is not None and (job.state, job.attempts) in {("pending", 0), ("processing", 1)}
    assert job.last_error is None  # given back, not failed


async def test_heartbeats_keep_a_handler_running_3x_its_visibility_timeout(
    app_store: alkstore.Store, workers: Workers
) -> None:
    job_id = await apps.slow.defer(key="long", seconds=3.0)  # visibility timeout 1 s
    workers.start()
    workers.start()  # a second worker, hungry for a lapsed claim

    async def ended() -> bool:
        return bool(await _keys(app_store, "long", phase="end"))

    await wait_until(ended, what="the long job to end")
    await wait_until(lambda: _gone(app_store, job_id), what="the long job to be acked")
    runs = await _keys(app_store, "long")
    assert [(r["phase"], r["attempt"]) for r in runs] == [("start", 1), ("end", 1)]


async def _gone(store: alkstore.Store, job_id: int) -> bool:
    return await store.admin().find_job(job_id) is None


async def test_sigterm_mid_job_lets_the_job_finish(
    app_store: alkstore.Store, workers: Workers
) -> None:
    job_id = await apps.slow.defer(key="term", seconds=1.5)
    proc = workers.start()

    async def started() -> bool:
        return bool(await _keys(app_store, "term", phase="start"))

    await wait_until(started, what="the job to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, workers.log(proc)
    assert [r["phase"] for r in await _keys(app_store, "term")] == ["start", "end"]
    assert await _gone(app_store, job_id)


async def test_sigterm_past_the_grace_period_gives_the_job_back(
    app_store: alkstore.Store, workers: Workers
) -> None:
    job_id = await apps.slow.defer(key="grace", seconds=60)
    proc = workers.start(grace=0.3)

    async def started() -> bool:
        return bool(await _keys(app_store, "grace", phase="start"))

    await wait_until(started, what="the job to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, workers.log(proc)
    job = await app_store.admin().find_job(job_id)
    assert job is not None and job.state == "pending" and job.attempts == 1
    assert (job.last_error or "").startswith("interrupted")
    assert "outcome=interrupted" in workers.log(proc)


async def test_a_sync_handler_past_the_grace_period_is_given_back_and_not_finished_here(
    app_store: alkstore.Store, workers: Workers, tmp_path: Any
) -> None:
    path = tmp_path / "stubborn.log"
    job_id = await apps.stubborn_sync.defer(str(path))
    proc = workers.start("--queue", "long", grace=0.3)

    async def started() -> bool:
        return path.exists() and "start" in path.read_text()

    await wait_until(started, what="the sync handler to start")
    proc.send_signal(signal.SIGTERM)
    # the process neither waits an hour for the thread nor lets it finish the job
    assert proc.wait(60) == 0, workers.log(proc)
    job = await app_store.admin().find_job(job_id)
    assert job is not None and job.state == "pending" and job.attempts == 1
    assert (job.last_error or "").startswith("interrupted")
    log = workers.log(proc)
    assert "outcome=interrupted" in log and "1 sync handler(s) still running" in log
    assert "finished" not in path.read_text()


async def test_second_signal_stops_at_once_and_gives_the_job_back(
    app_store: alkstore.Store, workers: Workers
) -> None:
    job_id = await apps.slow.defer(key="twice", seconds=60)
    proc = workers.start(grace=60)

    async def started() -> bool:
        return bool(await _keys(app_store, "twice", phase="start"))

    await wait_until(started, what="the job to start")
    proc.send_signal(signal.SIGTERM)
    await wait_until(_logged(workers, proc, "get 60s to finish"), what="the first signal")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 1, workers.log(proc)
    job = await app_store.admin().find_job(job_id)
    assert job is not None and job.state == "pending" and job.attempts == 1


def _logged(workers: Workers, proc: Any, text: str) -> Any:
    async def check() -> bool:
        return text in workers.log(proc)

    return check


async def test_kill_9_mid_job_another_worker_reclaims_after_the_deadline(
    app_store: alkstore.Store, workers: Workers
) -> None:
    job_id = await apps.slow.defer(key="crash", seconds=1.0)
    first = workers.start()

    async def started() -> bool:
        return bool(await _keys(app_store, "crash", phase="start"))

    await wait_until(started, what="the job to start")
    first.kill()  # SIGKILL: no give-back, no ack; the claim must lapse
    first.wait()
    second = workers.start()

    async def ended() -> bool:
        return bool(await _keys(app_store, "crash", phase="end"))

    await wait_until(ended, what="the reclaimed job to end")
    await wait_until(lambda: _gone(app_store, job_id), what="the reclaimed job to be acked")
    runs = await _keys(app_store, "crash")
    assert [(r["phase"], r["attempt"]) for r in runs] == [
        ("start", 1),
        ("start", 2),
        ("end", 2),
    ]
    assert runs[0]["pid"] == first.pid and runs[2]["pid"] == second.pid


async def test_handler_past_its_timeout_is_cancelled_and_retried(
    app_store: alkstore.Store, workers: Workers
) -> None:
    job_id = await apps.timeboxed.defer(key="tb")
    proc = workers.start()

    async def ended() -> bool:
        return bool(await _keys(app_store, "tb", phase="end"))

    await wait_until(ended, what="the retried job to end")
    await wait_until(lambda: _gone(app_store, job_id), what="the retried job to be acked")
    runs = await _keys(app_store, "tb")
    assert [(r["phase"], r["attempt"]) for r in runs] == [("start", 1), ("start", 2), ("end", 2)]
    assert "outcome=retry" in workers.log(proc) and "timeout" in workers.log(proc)


async def test_worker_logs_one_structured_line_per_outcome(
    app_store: alkstore.Store, workers: Workers, target: Any
) -> None:
    job_id = await apps.echo.defer(key="log")
    proc = workers.start("--log-level", "debug")  # a success's own line is DEBUG

    async def done() -> bool:
        return await _gone(app_store, job_id) and bool(await _keys(app_store, "log"))

    await wait_until(done, what="the job")
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    lines = [line for line in workers.log(proc).splitlines() if f"id={job_id} " in line]
    assert len(lines) == 1
    for field in ("outcome=success", "queue=work", "task=echo", "attempt=1/5", "duration_ms="):
        assert field in lines[0]


async def test_worker_summarizes_successes_at_info(
    app_store: alkstore.Store, workers: Workers, target: Any
) -> None:
    ids = [await apps.echo.defer(key=f"sum{i}") for i in range(3)]
    proc = workers.start()  # the default: INFO

    async def done() -> bool:
        return all([await _gone(app_store, job_id) for job_id in ids])

    await wait_until(done, what="the jobs")
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    log = workers.log(proc)
    assert "outcome=success" not in log  # no line per success at INFO
    summaries = [line for line in log.splitlines() if "alkstore.worker: jobs done in " in line]
    assert summaries and all(" INFO " in line for line in summaries)
    # each line counts its window's outcomes; the stop logs the last window
    assert sum(int(line.rsplit(" success=", 1)[1]) for line in summaries) == 3


async def test_worker_command_rejects_a_bad_app(target: Any) -> None:
    out = run_cli(target, "worker", "tests.acceptance.apps:nothing")
    assert out.returncode == 2 and "is not an alkstore.App" in out.stderr
    assert "Traceback" not in out.stderr
    out = run_cli(target, "worker", "no_such_module_here:app")
    assert out.returncode == 2 and "cannot import" in out.stderr


async def test_worker_sweeps_expired_jobs_of_its_queues(
    app_store: alkstore.Store, workers: Workers
) -> None:
    job_id = await apps.echo.configure(delay_s=30, expires_in_s=0.2).defer(key="expiring")
    workers.start("--sweep-interval", "0.2")

    async def expired() -> bool:
        job = await app_store.admin().find_job(job_id)
        return job is not None and job.state == "dead"

    await wait_until(expired, what="the worker's sweep")
    job = await app_store.admin().find_job(job_id)
    assert job is not None and job.last_error == "expired" and job.attempts == 0


async def test_a_job_cancelled_mid_run_is_stopped_logged_cancelled_and_not_recorded(
    app_store: alkstore.Store, workers: Workers, target: Any
) -> None:
    job_id = await apps.slow.defer(key="cancelled", seconds=3)  # heartbeats every 1/3 s
    proc = workers.start()

    async def started() -> bool:
        return bool(await _keys(app_store, "cancelled", phase="start"))

    await wait_until(started, what="the job to start")
    out = run_cli(target, "jobs", "cancel", str(job_id))
    assert out.returncode == 0, out.stderr
    # the cancel is announced: the handler is stopped at once (not at the next heartbeat)
    await wait_until(_logged(workers, proc, "outcome=cancelled"), what="the cancelled outcome")
    assert await app_store.admin().find_job(job_id) is None
    assert not await _keys(app_store, "cancelled", phase="end")


def test_worker_reports_a_syntax_error_in_the_app_module_in_one_line(
    target: Any, tmp_path: Any
) -> None:
    broken = tmp_path / "broken_shop.py"
    broken.write_text("import alkstore\napp = alkstore.App(\n")
    out = run_cli(target, "worker", f"{broken}:app")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "SyntaxError" in lines[0] and "line 2" in lines[0]
    full = run_cli(target, "worker", f"{broken}:app", "--traceback")
    assert full.returncode == 2 and "Traceback" in full.stderr


def test_worker_reports_an_exception_raised_at_import_in_one_line(
    target: Any, tmp_path: Any
) -> None:
    raising = tmp_path / "raising_shop.py"
    raising.write_text("raise RuntimeError('no config here')\n")
    out = run_cli(target, "worker", f"{raising}:app")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "RuntimeError: no config here" in out.stderr


async def test_worker_loads_an_app_from_a_path_and_takes_options_from_the_environment(
    target: Any, tmp_path: Any
) -> None:
    import os
    import subprocess
    import sys

    from tests.acceptance.conftest import ROOT, _env

    shop = tmp_path / "shop.py"
    shop.write_text(
        "import alkstore\napp = alkstore.App()\n\n"
        "@app.task(queue='shop', name='shop.noop')\nasync def noop() -> None: ...\n"
    )
    async with await alkstore.connect(target.url, schema=target.schema) as store:
        job_id = await store.queue("shop").enqueue({"task": "shop.noop", "args": {}})
        env = {
            **_env(),
            "ALKSTORE_URL": target.url,
            "ALKSTORE_SCHEMA": target.schema,
            "ALKSTORE_WORKER_POLL_INTERVAL": "0.1",
            "ALKSTORE_WORKER_LOG_FORMAT": "json",
            "ALKSTORE_WORKER_LOG_LEVEL": "debug",  # a success's own line is DEBUG
            "ALKSTORE_WORKER_ID": "from-env",
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "alkstore", "worker", f"./{os.path.relpath(shop, ROOT)}:app"],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:

            async def done() -> bool:
                return await store.queue("shop").get_job(job_id) is None

            await wait_until(done, what="the path-loaded app to run the job")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
    import json

    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    outcomes = [r for r in records if r.get("outcome") == "success"]
    assert outcomes and outcomes[0]["id"] == job_id and outcomes[0]["task"] == "shop.noop"
    summaries = [r for r in records if "jobs" in r and r["level"] == "info"]
    assert sum(r.get("success", 0) for r in summaries) == 1  # the INFO summary's fields
    assert any("from-env" in r["message"] for r in records)
