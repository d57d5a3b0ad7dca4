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
import alkstore.consume
from alkstore.errors import EngineError
from alkstore.job_handle import JobHandle
from alkstore.queue import Queue
from alkstore.worker import completer
from tests.acceptance.conftest import ROOT, _env, store_args
from tests.conftest import Target


async def _hang(self: JobHandle, *args: Any, **kwargs: Any) -> bool:
    await asyncio.Event().wait()  # a heartbeat on a dead connection: no answer, ever
    return True


async def _no_answer() -> None:
    await asyncio.Event().wait()  # a statement on a dead connection


async def _refuse() -> None:
    raise EngineError("connection refused (the server restarts)")


class _FailingAcks:
    """The store's receipted ack with its first ``tries`` tries failed by ``fail``
    (a hang: no answer ever; or a refusal); ``calls`` counts every try."""

    def __init__(self, store: Any, tries: int, fail: Any) -> None:
        self.calls = 0
        original = store._ack_receipted

        async def ack(handles: Any, owner: str, token: str) -> list[bool]:
            self.calls += 1
            if self.calls <= tries:
                await fail()
            return await original(handles, owner, token)

        store._ack_receipted = ack


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
    """An ack batch that never answers is given up on (bounded wait), logged once, and
    retried. Whether the database counts as away meanwhile depends on whether another
    call got an answer since the ack was sent (tests/unit/test_worker_services.py):
    if it was logged unreachable, the retry's success logs it reachable again."""
    app = alkstore.App(target.url, schema=target.schema)

    @app.task(queue="m", name="quick")
    async def quick() -> None:
        worker.stop()

    caplog.set_level(logging.WARNING, "alkstore.worker")
    async with app:
        await quick.defer()
        worker = app.worker(["m"], handle_signals=False)
        worker._db.timeout_s = 0.2
        acks = _FailingAcks(await app.connect(), 1, _no_answer)
        assert await worker.run() == 0
    assert acks.calls == 2 and worker.counts["success"] == 1
    lines = [r.getMessage() for r in caplog.records]
    assert sum("ack of 1 job(s) failed (no answer from the database" in x for x in lines) == 1
    away = sum("database unreachable" in line for line in lines)
    assert away <= 1 and sum("database reachable again" in line for line in lines) == away


async def test_claims_go_again_once_the_database_answers_not_after_their_backoff(
    target: Target, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """After an outage: a claim loop backed off while the database was away claims
    again as soon as another call gets through, and a claim that hung on a
    connection cut before the server came back (given up on after another call got
    an answer) starts the backoff over instead of lengthening it. The backoff here
    is an hour past the first failure: only those two rules end this test."""
    app = alkstore.App(target.url, schema=target.schema)

    @app.task(queue="r", name="after")
    async def after() -> None:
        worker.stop()

    monkeypatch.setattr(alkstore.consume, "backoff_s", lambda n: 0.01 if n <= 1 else 3600.0)
    caplog.set_level(logging.WARNING)
    original = Queue.claim_held
    calls = 0
    hung = asyncio.Event()

    async def outage(self: Queue, worker_id: str, n: int) -> Any:
        nonlocal calls
        calls += 1
        if calls <= 2:  # refused while the server is down: the backoff grows
            raise EngineError("connection refused (the server restarts)")
        if calls == 3:  # sent on a connection the restart cut: never answers
            hung.set()
            await asyncio.Event().wait()
        return await original(self, worker_id, n)

    monkeypatch.setattr(Queue, "claim_held", outage)

    def retries() -> int:
        return sum("retrying in" in r.getMessage() for r in caplog.records)

    async with app:
        await after.defer()
        worker = app.worker(["r"], handle_signals=False)
        worker._db.timeout_s = 0.3
        run = asyncio.create_task(worker.run())
        info = app.store.queue("r").info
        while retries() < 2:  # the second failure: paused for an hour
            await asyncio.sleep(0.01)
        await worker._db.call(info(), "probe")  # another call gets through: back
        await asyncio.wait_for(hung.wait(), 60)
        await worker._db.call(info(), "probe")  # answered while the third claim hangs
        assert await asyncio.wait_for(run, 60) == 0
    assert worker.counts["success"] == 1 and calls == 4
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split("retrying in ")[1] for line in lines if "retrying in" in line] == [
        "0.0s",
        "3600.0s",
        "0.0s",  # the hung claim: the database answered meanwhile, the backoff starts over
    ]
    assert sum("database unreachable" in line for line in lines) == 1
    assert sum("database reachable again" in line for line in lines) == 1


async def test_a_claim_that_hung_until_its_bound_has_waited_its_backoff(
    target: Target, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """The backoff counts from the failed claim's start: one that waited out its
    bound (for a connection, while the server restarted) goes again at once, not a
    whole pause later, which would be spent after the server is back."""
    app = alkstore.App(target.url, schema=target.schema)

    @app.task(queue="h", name="after")
    async def after() -> None:
        worker.stop()

    monkeypatch.setattr(alkstore.consume, "backoff_s", lambda n: 0.25)
    caplog.set_level(logging.WARNING, "alkstore.consume")
    original = Queue.claim_held
    calls = 0

    async def hang_once(self: Queue, worker_id: str, n: int) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:  # waits for a connection the pool cannot make yet
            await asyncio.Event().wait()
        return await original(self, worker_id, n)

    monkeypatch.setattr(Queue, "claim_held", hang_once)
    async with app:
        await after.defer()
        worker = app.worker(["h"], handle_signals=False)
        worker._db.timeout_s = 0.3
        assert await asyncio.wait_for(worker.run(), 60) == 0
    assert worker.counts["success"] == 1 and calls == 2
    (line,) = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert "no answer from the database in 0.3s" in line and line.endswith("retrying in 0.0s")


async def test_an_ack_backed_off_while_the_database_is_away_goes_once_a_call_gets_through(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ack batch refused twice (the server restarting) pauses an hour before its
    third try here; another call getting through ends that pause at once."""
    app = alkstore.App(target.url, schema=target.schema)

    @app.task(queue="a", name="acked", visibility_timeout_s=7200.0)
    async def acked() -> None:
        pass

    monkeypatch.setattr(completer, "ack_backoff_s", lambda n: 0.01 if n <= 1 else 3600.0)
    async with app:
        await acked.defer()
        worker = app.worker(["a"], handle_signals=False)
        store = await app.connect()
        acks = _FailingAcks(store, 2, _refuse)
        run = asyncio.create_task(worker.run())
        db = worker._db
        for _ in range(6000):  # the second refusal: paused for an hour
            if (acks.calls == 2 and db._back) or acks.calls > 2:  # (or a worker call ended it)
                break
            await asyncio.sleep(0.01)
        assert db._back or acks.calls > 2, "the ack's pause does not wait for the database"
        await db.call(store.queue("a").info(), "probe")  # the server is back
        for _ in range(6000):  # a minute at most (a liveness bound): else an hour
            if worker.counts["success"]:
                break
            await asyncio.sleep(0.01)
        assert worker.counts["success"] == 1
        worker.stop()
        assert await asyncio.wait_for(run, 60) == 0
    assert acks.calls == 3 and worker.counts["success"] == 1


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
