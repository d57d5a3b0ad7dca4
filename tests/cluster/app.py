"""The app the cluster test's workers run: every handler start and end is appended to
the process's own event file ($ALKC_EVENTS), checked offline against the database."""

from __future__ import annotations

import asyncio
import json
import os
import time

import alkstore

app = alkstore.App()

VISIBILITY_S = 3.0  # short, so a cut-off host's claims lapse within a scenario
_events = None


def _event(kind: str) -> None:
    global _events
    if _events is None:
        _events = open(os.environ["ALKC_EVENTS"], "a", buffering=1)  # noqa: SIM115
    job = alkstore.current_job()
    assert job is not None
    line = {
        "ev": kind,
        "job": job.id,
        "attempt": job.attempts,
        "host": os.environ.get("ALKC_HOST", "?"),
        "pid": os.getpid(),
        "t": time.time(),
    }
    _events.write(json.dumps(line) + "\n")


async def _run(seconds: float) -> None:
    _event("start")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _event("stop")  # cancelled: lost claim, cancel, or the worker's stop
        raise
    _event("finish")


@app.task(queue="work", name="work", visibility_timeout_s=VISIBILITY_S, max_attempts=20)
async def work(seconds: float) -> None:
    await _run(seconds)


@app.task(queue="ticks", name="tick", visibility_timeout_s=VISIBILITY_S, max_attempts=20)
async def tick() -> None:
    await _run(0.8)


if os.environ.get("ALKC_TICKS"):  # the schedule scenario only
    app.periodic(cron="* * * * * *")(tick)  # every second
