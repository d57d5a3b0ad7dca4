"""Worker hygiene as real processes: recycling after N jobs or above a memory size
(a supervisor starts a fresh process), ``--reload`` on a source change, and the
App's job hooks (before/after/on_failure, plain and async, their errors)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import alkstore
from tests.acceptance import hygiene_app
from tests.acceptance.conftest import Target, Workers, wait_until

hooks_app = hygiene_app.app


@pytest.fixture
def procs(target: Target, tmp_path: Path) -> Iterator[Workers]:
    p = Workers(target, tmp_path, "tests.acceptance.hygiene_app:app")
    yield p
    p.close()


@pytest.fixture
async def store(target: Target) -> AsyncIterator[alkstore.Store]:
    hooks_app.url, hooks_app.schema = target.url, target.schema
    yield await hooks_app.connect()
    await hooks_app.close()
    hooks_app.url, hooks_app.schema = None, "alkstore"


def lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


async def until_lines(path: Path, test: Any, what: str) -> list[list[str]]:
    async def ok() -> bool:
        return bool(test(lines(path)))

    await wait_until(ok, timeout=90, what=what)
    return lines(path)


def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=90)


def worker_pids(log: str) -> list[int]:
    """The worker processes the supervisor started, from its log lines."""
    return [
        int(line.split("worker process ")[1].split()[0])
        for line in log.splitlines()
        if "worker process" in line and "started" in line
    ]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_max_jobs_recycles_into_fresh_processes_each_running_exactly_n(
    store: alkstore.Store, procs: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "runs.log"
    for _ in range(7):
        await hygiene_app.note.defer(str(path))
    proc = procs.start("--max-jobs", "3", "--concurrency", "2")
    runs = await until_lines(path, lambda rows: len(rows) == 7, "the 7 jobs to run")
    per_pid: dict[str, int] = {}
    for row in runs:
        pid = row[2].split(":")[0]
        per_pid[pid] = per_pid.get(pid, 0) + 1
    # 3, 3, then 1 in a third process that keeps running; never the supervisor itself
    assert sorted(per_pid.values()) == [1, 3, 3], per_pid
    assert str(proc.pid) not in per_pid
    assert stop(proc) == 0
    log = procs.log(proc)
    assert log.count("recycling: 3 job(s) started (--max-jobs 3)") == 2, log
    # a worker claims no more than it may start: nothing claimed ahead goes back unrun
    assert "buffered job(s) that never started" not in log, log
    assert all(gone(pid) for pid in worker_pids(log)), "a child outlived its supervisor"
    assert {str(p) for p in worker_pids(log)} >= set(per_pid)


async def test_max_memory_recycles_a_worker_that_grew(
    store: alkstore.Store, procs: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "runs.log"
    proc = procs.start("--max-memory", "400MB")
    await hygiene_app.hog.defer(str(path), 450)  # the first process grows past the limit
    first = await until_lines(path, lambda rows: len(rows) == 1, "the hog to run")
    await wait_until(
        lambda: _async(len(worker_pids(procs.log(proc))) == 2),
        timeout=90,
        what="a fresh process after the memory limit",
    )
    await hygiene_app.note.defer(str(path))
    both = await until_lines(path, lambda rows: len(rows) == 2, "the next job to run")
    assert both[1][2].split(":")[0] != first[0][2].split(":")[0]
    assert "is above --max-memory 400.0 MB" in procs.log(proc)
    assert stop(proc) == 0


async def test_a_sigterm_while_recycling_is_a_graceful_stop_not_a_second_signal(
    store: alkstore.Store, procs: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "runs.log"
    await hygiene_app.nap.defer(str(path), 3.0)
    proc = procs.start("--max-jobs", "1")
    await until_lines(path, lambda rows: len(rows) == 1, "the nap to start")  # now recycling
    assert stop(proc) == 0
    assert [r[0] for r in lines(path)] == ["start", "end"]  # it finished, not interrupted
    log = procs.log(proc)
    assert "again: stopping now" not in log and "recycled; starting" not in log


async def test_a_worker_does_not_outlive_its_killed_supervisor(
    store: alkstore.Store, procs: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "runs.log"
    await hygiene_app.nap.defer(str(path), 1.0)
    proc = procs.start("--max-jobs", "5")
    await until_lines(path, lambda rows: len(rows) == 1, "the nap to start")
    [child] = worker_pids(procs.log(proc))
    proc.kill()  # SIGKILL: the supervisor cannot pass anything on
    proc.wait()
    await wait_until(lambda: _async(gone(child)), timeout=60, what="the orphaned worker to stop")
    assert [r[0] for r in lines(path)] == ["start", "end"]  # a graceful stop: it finished


async def _async(value: bool) -> bool:
    return value


def test_bad_max_memory_is_one_line_not_a_restart_loop(target: Target, procs: Workers) -> None:
    proc = procs.start("--max-memory", "lots")
    assert proc.wait(timeout=60) != 0
    log = procs.log(proc)
    assert "max_memory must be a size such as 512MB" in log and "'lots'" in log
    assert "Traceback" not in log and "started" not in log


async def test_external_supervisor_gets_exit_75_when_recycled(
    store: alkstore.Store, procs: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "runs.log"
    for _ in range(2):
        await hygiene_app.note.defer(str(path))
    proc = procs.start("--max-jobs", "2", ALKSTORE_WORKER_SUPERVISED="1")
    assert proc.wait(timeout=90) == 75
    assert len(lines(path)) == 2


RELOADED = """
import os
from alkstore import App
from tests.acceptance.apps import log_line

app = App()


@app.task(queue="hygiene", name="version")
async def version(path: str) -> None:
    log_line(path, "VERSION", os.getpid())
"""


async def test_reload_restarts_the_worker_when_a_source_file_changes(
    target: Target, procs: Workers, tmp_path: Path
) -> None:
    src = tmp_path / "project"
    src.mkdir()
    module = src / "reloaded.py"
    module.write_text(RELOADED.replace("VERSION", "v1"))
    path = tmp_path / "runs.log"
    proc = procs.start("--reload", spec=f"{module}:app", cwd=str(src))
    async with await alkstore.connect(target.url, schema=target.schema) as store:
        queue = store.queue("hygiene")
        call = {"task": "version", "args": {"path": str(path)}}
        await queue.enqueue(call)
        await until_lines(path, lambda rows: len(rows) == 1, "v1 to run")
        time.sleep(0.01)  # a newer mtime than the first write on coarse clocks
        module.write_text(RELOADED.replace("VERSION", "v2"))
        await wait_until(
            lambda: _async("reloaded.py changed; restarting" in procs.log(proc)),
            timeout=60,
            what="the change to be seen",
        )
        await queue.enqueue(call)
        rows = await until_lines(path, lambda rows: len(rows) == 2, "v2 to run")
    assert [rows[0][0], rows[1][0]] == ["v1", "v2"]
    assert rows[0][1] != rows[1][1]  # a fresh process
    assert stop(proc) == 0


AROUND = ["before_async", "before_sync", "run", "after_async", "after_sync"]


async def test_job_hooks_run_around_each_job_in_order_where_the_handler_runs(
    store: alkstore.Store, procs: Workers, tmp_path: Path
) -> None:
    ok, ok_sync, bad = (tmp_path / f"{n}.log" for n in ("ok", "ok_sync", "bad"))
    await hygiene_app.note.defer(str(ok))
    await hygiene_app.note_sync.defer(str(ok_sync))
    await hygiene_app.breaks.defer(str(bad))
    proc = procs.start(HYGIENE_HOOKS="1")
    rows = await until_lines(ok, lambda rows: len(rows) == 5, "the async job's hooks")
    assert [r[0] for r in rows] == [
        "before_async",
        "before_sync",
        "run",
        "after_async",
        "after_sync",
    ]
    assert rows[3][-1] == rows[4][-1] == "NoneType"
    rows = await until_lines(ok_sync, lambda rows: len(rows) == 5, "the sync job's hooks")
    assert [r[0] for r in rows] == [
        "before_async",
        "before_sync",
        "run",
        "after_async",
        "after_sync",
    ]
    handler_thread = rows[2][2]
    assert rows[1][2] == handler_thread and rows[4][2] == handler_thread  # the sync hooks' thread
    rows = await until_lines(bad, lambda rows: len(rows) == 12, "both failed attempts' hooks")
    assert [r[0] for r in rows if r[0] in ("after_sync", "on_failure")] == [
        "after_sync",
        "on_failure",
    ] * 2
    failures = [r for r in rows if r[0] == "on_failure"]
    assert [f[2] for f in failures] == ["1", "2"]
    assert failures[0][3] == "ValueError:broken"
    assert stop(proc) == 0


async def test_a_raising_before_hook_fails_the_attempt_and_names_itself(
    store: alkstore.Store, procs: Workers, tmp_path: Path
) -> None:
    refused = tmp_path / "refuse.log"
    job_id = await hygiene_app.note.defer(str(refused))
    proc = procs.start(HYGIENE_HOOKS="1")
    rows = await until_lines(refused, lambda rows: len(rows) >= 5, "the refused attempt's hooks")
    assert "run" not in [r[0] for r in rows[:5]]  # the handler never ran
    assert [r[-1] for r in rows[:5] if r[0].startswith("after")] == ["HookError"] * 2

    async def retried() -> bool:  # the hooks' lines are written before the outcome is
        job = await store.admin().find_job(job_id)
        return job is not None and job.last_error is not None

    await wait_until(retried, what="the refused attempt's retry to be written")
    job = await store.admin().find_job(job_id)
    assert job is not None and job.last_error is not None
    assert job.last_error.startswith("HookError: before_job hook ")
    assert "before_sync raised PermissionError: no session for you" in job.last_error
    stop(proc)


async def test_a_raising_after_hook_is_logged_and_the_job_still_succeeds(
    store: alkstore.Store, procs: Workers, tmp_path: Path
) -> None:
    path = tmp_path / "after-raises.log"
    job_id = await hygiene_app.note.defer(str(path))
    proc = procs.start(HYGIENE_HOOKS="1")
    await until_lines(path, lambda rows: len(rows) == 5, "the job's hooks")

    async def acked() -> bool:
        return await store.admin().find_job(job_id) is None

    await wait_until(acked, what="the job to be acked")
    assert stop(proc) == 0
    log = procs.log(proc)
    assert f"after_job hook tests.acceptance.hygiene_app.after_async raised for job {job_id}" in log
    assert "RuntimeError: after hook broke" in log and "the job's outcome stands" in log
