"""The App the acceptance tests run in real worker processes
(``alkstore worker tests.acceptance.apps:app --url … --schema …``).

Every task records what it saw as a job of the ``results`` queue of the same
store (``{"key", "attempt", "pid", "phase"}``), so the test process can read
what happened in the worker, on either engine.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from alkstore import App, Fail, sync
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
