"""Claimed runs for the worker parts' unit tests: a real JobHandle around a job row,
never used for I/O (the parts under test here do none)."""

from __future__ import annotations

import time
from typing import Any

from alkstore.core.job import ROW_FIELDS, Job
from alkstore.job_handle import JobHandle
from alkstore.worker.runs import RUNNING, Run

T0 = 1_700_000_000.0


def make_run(
    payload: bytes,
    *,
    job_id: int = 7,
    queue: str = "q",
    attempts: int = 1,
    max_attempts: int = 5,
    visibility_timeout_s: float = 30.0,
    running: bool = True,
    sent: float | None = None,
    poll_beat_s: float | None = None,
) -> Run:
    """A run of a job claimed just now (``running``: its handler started)."""
    values: dict[str, Any] = {
        "id": job_id,
        "queue": queue,
        "payload": payload,
        "state": "processing",
        "priority": 0,
        "run_at": T0,
        "created_at": T0,
        "attempts": attempts,
        "max_attempts": max_attempts,
        "visibility_timeout_s": visibility_timeout_s,
        "retry_base_s": 1.0,
        "expires_at": None,
        "worker_id": "w",
        "claim_expires_at": T0 + visibility_timeout_s,
        "last_error": None,
        "died_at": None,
        "dedupe_key": None,
        "partition_key": None,
    }
    row = tuple(values[field] for field in ROW_FIELDS)
    handle = JobHandle(None, Job(row))  # type: ignore[arg-type]  # no queue: no I/O here
    now = time.monotonic()
    run = Run(handle, now, now if sent is None else sent, poll_beat_s)
    if running:
        run.state = RUNNING
    return run
