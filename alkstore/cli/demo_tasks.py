"""The tasks ``alkstore demo`` runs: no-op work, a flaky task, a doomed one, a poison pill
and wake-latency probes. Workers run them with ``alkstore worker alkstore.cli.demo_tasks:app``.
"""

from __future__ import annotations

import time

from alkstore.app import App
from alkstore.worker import Fail, current_job

__all__ = ["EVENTS", "QUEUE", "app"]

QUEUE = "demo"
EVENTS = "demo.events"  # workers report retries and probe latencies here

app = App()


@app.task(queue=QUEUE, name="demo.work")
async def work(n: int) -> None:
    """A no-op job: the worker's own overhead is what the demo measures."""


@app.task(queue=QUEUE, name="demo.flaky", max_attempts=3, retry_base_s=1)
async def flaky(n: int) -> None:
    """Fails its first attempt, then succeeds: a retry on the backoff curve."""
    job = current_job()
    if job is not None and job.attempts == 1:
        await app.store.notify(EVENTS, "retry")
        raise RuntimeError(f"flaky job {n}: first attempt fails on purpose")


@app.task(queue=QUEUE, name="demo.doomed", max_attempts=2, retry_base_s=1)
async def doomed(n: int) -> None:
    """Always raises: retried once on the backoff curve, then dead-lettered."""
    job = current_job()
    if job is not None and job.attempts < job.max_attempts:
        await app.store.notify(EVENTS, "retry")
    raise ValueError(f"doomed job {n} always fails")


@app.task(queue=QUEUE, name="demo.poison")
def poison(n: int) -> None:
    """A sync task (run in a thread) raising Fail: dead-lettered at once, no retry."""
    raise Fail(f"poison pill {n}: dead-lettered at once")


@app.task(queue=QUEUE, name="demo.probe")
async def probe(sent: float) -> None:
    """Reports enqueue→start latency (``sent`` is the producer's time.time())."""
    await app.store.notify(EVENTS, f"probe {time.time() - sent:.6f}")
