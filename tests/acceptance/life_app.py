"""The App of the job-life process tests (``test_job_life_procs.py``): durable steps
whose side effects append to a log file, a signal waiter, and a marker task."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from alkstore import App
from alkstore.worker import current_job

app = App()


def effect(log_path: str, what: str) -> str:
    """The step's side effect: one line in the log (pid and what), on disk at once."""
    with open(log_path, "a") as f:
        f.write(f"{os.getpid()} {what}\n")
        f.flush()
        os.fsync(f.fileno())
    return what


@app.task(queue="life", name="five_steps", visibility_timeout_s=2, keep_result_s=600)
async def five_steps(log_path: str, stop_after: int) -> list[str]:
    """Five steps; the first attempt announces ``stop_after`` and hangs (to be killed)."""
    job = current_job()
    assert job is not None
    out = []
    for i in range(1, 6):
        out.append(await job.step(f"s{i}", effect, log_path, f"step{i}"))
        if i == stop_after and job.attempts == 1:
            effect(log_path, "hanging")
            await asyncio.sleep(3600)
    return out


@app.task(queue="life", name="approval", keep_result_s=600)
async def approval(log_path: str) -> Any:
    job = current_job()
    assert job is not None
    effect(log_path, f"waiting {job.attempts}")
    return await job.wait_for("approval")


@app.task(queue="life", name="mark")
async def mark(log_path: str, n: int) -> None:
    effect(log_path, f"mark{n}")
