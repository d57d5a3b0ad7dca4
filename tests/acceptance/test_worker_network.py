"""The worker when the database stops answering: handlers stop before their claims
lapse by the worker's own clock, every wait is bounded, and a signal while the worker
starts stops it cleanly. (The same with a real cut network: tests/cluster.)"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from typing import Any

import pytest

import alkstore
from alkstore.store import JobHandle
from tests.acceptance.conftest import ROOT, _env, store_args
from tests.conftest import Target


async def _hang(self: JobHandle, *args: Any, **kwargs: Any) -> bool:
    await asyncio.Event().wait()  # a heartbeat on a dead connection: no answer, ever
    return True


async def test_a_handler_whose_claim_lapses_by_the_worker_clock_is_stopped_before_it(
    target: Target, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    app = alkstore.App(target.url, schema=target.schema)
    seen: dict[str, float] = {}

    @app.task(queue="n", name="long", visibility_timeout_s=2.0)
    async def long() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen["stopped"] = time.time()
            raise

    monkeypatch.setattr(JobHandle, "heartbeat", _hang)
    caplog.set_level(logging.WARNING, "alkstore.worker")
    async with app:
        job_id = await long.defer()
        worker = app.worker(["n"], handle_signals=False, grace_s=0)
        run = asyncio.create_task(worker.run())
        while not worker.counts["lost"]:
            await asyncio.sleep(0.05)
        job = await app.store.queue("n").get_job(job_id)
        worker.stop()
        assert await run == 0
    assert worker.counts["lost"] == 1 and worker.counts["success"] == 0
    # stopped while the claim (never extended: no heartbeat got through) was still ours
    assert job is not None and job.claim_expires_at is not None
    assert seen["stopped"] < job.claim_expires_at.timestamp()
    assert any("no heartbeat got through" in r.getMessage() for r in caplog.records)


async def test_a_hung_ack_gives_up_logs_unreachable_then_reachable(
    target: Target, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """An ack batch that never answers is given up on (bounded wait), logged once as the
    database being unreachable; the retry's success logs it reachable again."""
    app = alkstore.App(target.url, schema=target.schema)

    @app.task(queue="m", name="quick")
    async def quick() -> None:
        worker.stop()

    caplog.set_level(logging.WARNING, "alkstore.worker")
    async with app:
        await quick.defer()
        worker = app.worker(["m"], handle_signals=False)
        worker._db.timeout_s = 0.2
        store = await app.connect()
        original = store._ack_receipted
        calls = 0

        async def hang_once(handles: Any, owner: str, token: str) -> list[bool]:
            nonlocal calls
            calls += 1
            if calls == 1:
                await asyncio.Event().wait()
            return await original(handles, owner, token)

        store._ack_receipted = hang_once  # type: ignore[method-assign]
        assert await worker.run() == 0
    assert calls == 2 and worker.counts["success"] == 1
    lines = [r.getMessage() for r in caplog.records]
    assert sum("database unreachable" in line for line in lines) == 1
    assert sum("database reachable again" in line for line in lines) == 1


def test_sigterm_while_the_worker_starts_is_a_clean_stop(target: Target) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "alkstore",
            "worker",
            "tests.acceptance.early_signal_app:app",  # SIGTERMs itself at import
            *store_args(target),
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out  # not -15: a clean stop
    assert "SIGTERM: no more claims" in out and "stopped" in out
