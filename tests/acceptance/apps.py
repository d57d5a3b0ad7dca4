"""The App the acceptance tests run in real worker processes
(``alkstore worker tests.acceptance.apps:app --url … --schema …``).

Every task records what it saw as a job of the ``results`` queue of the same
store (``{"key", "attempt", "pid", "phase"}``), so the test process can read
what happened in the worker, on either engine.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from alkstore import App, Fail, Snooze, sync
from alkstore.worker import current_job

app = App()

RESULTS = "results"


async def record(key: str, **extra: Any) -> None:
    job = current_job()
    assert job is not None
    entry = {"key": key, "attempt": job.attempts, "pid": os.getpid(), "job": job.id, **extra}
    await app.store.queue(RESULTS).enqueue(entry)


@app.task(queue="work", name="echo")
async def echo(key: str, value: Any = None) -> None:
    await record(key, value=value)


@app.task(queue="work", name="echo_sync")
def echo_sync(key: str) -> None:
    """A sync task: runs in the worker's thread pool; records through the sync facade."""
    job = current_job()
    assert job is not None
    with sync.connect(app.url, schema=app.schema) as store:
        store.queue(RESULTS).enqueue(
            {"key": key, "attempt": job.attempts, "pid": os.getpid(), "job": job.id}
        )


@app.task(queue="work", name="always_fails", max_attempts=3, retry_base_s=0)
async def always_fails(key: str) -> None:
    await record(key)
    raise RuntimeError(f"{key} always fails")


@app.task(queue="work", name="fails_hard")
async def fails_hard(key: str) -> None:
    await record(key)
    raise Fail(f"{key}: no point retrying")


@app.task(queue="work", name="fails_on_type", fail_on=(LookupError,))
async def fails_on_type(key: str) -> None:
    await record(key)
    raise KeyError(key)


@app.task(queue="slow", name="slow", visibility_timeout_s=1, max_attempts=3, retry_base_s=0)
async def slow(key: str, seconds: float) -> None:
    await record(key, phase="start")
    await asyncio.sleep(seconds)
    await record(key, phase="end")


@app.task(queue="slow", name="timeboxed", timeout_s=0.5, max_attempts=2, retry_base_s=0)
async def timeboxed(key: str) -> None:
    job = current_job()
    assert job is not None
    await record(key, phase="start")
    if job.attempts == 1:
        await asyncio.sleep(30)  # cancelled by timeout_s
    await record(key, phase="end")


@app.task(queue="work", name="adds", keep_result_s=60)
async def adds(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@app.task(queue="work", name="returns_a_set", keep_result_s=60, max_attempts=2, retry_base_s=0)
def returns_a_set() -> set[int]:
    return {1, 2}


@app.task(queue="work", name="dies_keeping", keep_result_s=60, max_attempts=1)
async def dies_keeping(key: str) -> None:
    raise ValueError(f"{key} is broken")


# -- flow control: the handlers keep their own log (one line per event, O_APPEND) ----
def log_line(path: str, *fields: object) -> None:
    """Append one line atomically (O_APPEND): the file's order is the events' order."""
    line = " ".join(str(f) for f in fields) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def claimed_at() -> float:
    """When the store claimed the running job, by the database's own clock."""
    job = current_job()
    assert job is not None and job.claim_expires_at is not None
    return job.claim_expires_at.timestamp() - job.visibility_timeout_s


@app.task(queue="limited", name="limited")
async def limited(path: str, seconds: float) -> None:
    job = current_job()
    assert job is not None
    log_line(path, "start", job.id)
    await asyncio.sleep(seconds)
    log_line(path, "end", job.id)


@app.task(queue="rated", name="rated")
async def rated(path: str) -> None:
    job = current_job()
    assert job is not None
    log_line(path, "claimed", job.id, repr(claimed_at()))


@app.task(queue="long", name="long_async", visibility_timeout_s=30)
async def long_async(path: str) -> None:
    job = current_job()
    assert job is not None
    log_line(path, "start", job.id)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        log_line(path, "cancelled", job.id)
        raise
    log_line(path, "finished", job.id)


@app.task(queue="long", name="long_sync", visibility_timeout_s=30)
def long_sync(path: str) -> None:
    job = current_job()
    assert job is not None
    log_line(path, "start", job.id)
    for _ in range(36_000):  # an hour in 0.1 s steps, unless told to stop
        if job.cancelled:
            log_line(path, "cancelled", job.id)
            return
        time.sleep(0.1)
    log_line(path, "finished", job.id)


@app.task(queue="long", name="stubborn_sync", visibility_timeout_s=30)
def stubborn_sync(path: str) -> None:
    """A sync handler that never looks at current_job().cancelled."""
    job = current_job()
    assert job is not None
    log_line(path, "start", job.id, os.getpid())
    time.sleep(3600)
    log_line(path, "finished", job.id, os.getpid())


@app.task(queue="work", name="snoozy")
async def snoozy(path: str, times: int) -> None:
    job = current_job()
    assert job is not None
    with open(path, "a+") as f:
        f.seek(0)
        seen = len(f.read().splitlines())
        f.write(f"run {job.attempts}\n")
    if seen < times:
        raise Snooze(0)


@app.task(queue="lease", name="short_lease", visibility_timeout_s=1)
async def short_lease(path: str) -> None:
    job = current_job()
    assert job is not None
    log_line(path, "start", job.id, job.attempts)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        log_line(path, "cancelled", job.id, job.attempts)
        raise


@app.task(queue="work", name="stages_next")
async def stages_next(key: str) -> None:
    """Keeps a follow-up for its own ack (``alkstore.worker.stage``)."""
    from alkstore.worker import stage
    from alkstore.workflows import chain

    await record(key)
    stage(chain(echo.s(key + "-next"), echo.s(key + "-last")))
