"""worker/executor.py: one job's handler in, one Outcome out (no database)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import alkstore
from alkstore.tasks import Fail, Snooze, encode_call
from alkstore.worker import current_job
from alkstore.worker.executor import Executor
from alkstore.worker.outcome import Kind, Outcome
from alkstore.worker.runs import BUFFERED, CANCELLED, DONE, LOST, RUNNING, Run, StopFlag
from alkstore.worker.unknown import UNKNOWN_DELAY_S, UnknownTasks

from .worker_runs import make_run


def _setup(max_age_s: float | None = 3600.0) -> tuple[alkstore.App, Executor, StopFlag]:
    app = alkstore.App("sqlite:///unused.db")
    stop = StopFlag()
    return app, Executor(app, 2, stop, UnknownTasks("w", max_age_s)), stop


async def _execute(executor: Executor, run: Run) -> Outcome:
    run.task = asyncio.ensure_future(executor.execute(run))  # type: ignore[assignment]
    return await run.task  # type: ignore[misc]


async def test_a_return_is_an_ack_and_the_run_is_done() -> None:
    app, executor, _ = _setup()

    @app.task(queue="q", name="ok")
    async def ok(n: int) -> int:
        return n

    run = make_run(encode_call("ok", {"n": 1}))
    outcome = await executor.execute(run)
    assert (outcome.kind, outcome.name, outcome.label, outcome.error) == (
        Kind.ACK,
        "ok",
        "success",
        None,
    )
    assert run.state is DONE
    again = await executor.execute(make_run(encode_call("ok", {"n": 2})))
    assert again is outcome  # one shared success per task: no allocation per job


async def test_a_kept_result_is_its_own_ack_counted_as_success() -> None:
    app, executor, _ = _setup()

    @app.task(queue="q", name="kept", keep_result_s=60)
    async def kept() -> dict[str, int]:
        return {"a": 1}

    @app.task(queue="q", name="unjson", keep_result_s=60)
    async def unjson() -> object:
        return object()

    outcome = await executor.execute(make_run(encode_call("kept", {})))
    assert (outcome.kind, outcome.label, outcome.value, outcome.seconds) == (
        Kind.ACK_RESULT,
        "success",
        {"a": 1},
        60,
    )
    outcome = await executor.execute(make_run(encode_call("unjson", {})))
    assert outcome.kind is Kind.RETRY and outcome.label == "retry"
    assert outcome.error is not None and outcome.error.startswith("PayloadError: task 'unjson'")


@pytest.mark.parametrize(
    ("attempts", "label"), [(1, "retry"), (5, "dead")], ids=["budget left", "last attempt"]
)
async def test_an_exception_is_a_retry_or_dead_at_the_budget(attempts: int, label: str) -> None:
    app, executor, _ = _setup()

    @app.task(queue="q", name="boom")
    async def boom() -> None:
        raise ValueError("no")

    outcome = await executor.execute(make_run(encode_call("boom", {}), attempts=attempts))
    assert (outcome.kind, outcome.label) == (Kind.RETRY, label)
    assert outcome.error is not None and outcome.error.startswith("ValueError: no\n")


async def test_fail_fail_on_and_bad_arguments_dead_letter_at_once() -> None:
    app, executor, _ = _setup()

    @app.task(queue="q", name="fail")
    async def fail() -> None:
        raise Fail("why")

    @app.task(queue="q", name="typed", fail_on=[KeyError])
    async def typed(n: int) -> None:
        raise KeyError(n)

    for payload, error in [
        (encode_call("fail", {}), "why"),
        (encode_call("typed", {"n": 1}), "KeyError: 1"),
        (encode_call("typed", {"m": 1}), "task 'typed'"),
    ]:
        outcome = await executor.execute(make_run(payload))
        assert (outcome.kind, outcome.label) == (Kind.FAIL, "dead")
        assert outcome.error is not None and outcome.error.startswith(error)


async def test_snooze_and_timeout() -> None:
    app, executor, _ = _setup()

    @app.task(queue="q", name="later")
    async def later() -> None:
        raise Snooze(12)

    @app.task(queue="q", name="slow", timeout_s=0.01)
    async def slow() -> None:
        await asyncio.Event().wait()

    outcome = await executor.execute(make_run(encode_call("later", {})))
    assert (outcome.kind, outcome.label, outcome.seconds) == (Kind.SNOOZE, "snoozed", 12)
    outcome = await executor.execute(make_run(encode_call("slow", {})))
    assert (outcome.kind, outcome.error) == (
        Kind.RETRY,
        "timeout: the handler ran longer than 0.01s",
    )


async def test_an_unknown_task_is_given_back_then_dead_after_its_age() -> None:
    _, executor, _ = _setup()
    outcome = await executor.execute(make_run(encode_call("nope", {})))
    assert (outcome.kind, outcome.label, outcome.seconds) == (
        Kind.GIVE_BACK,
        "unknown",
        UNKNOWN_DELAY_S,
    )
    outcome = await executor.execute(make_run(b"not a task call"))
    assert outcome.kind is Kind.GIVE_BACK
    _, at_once, _ = _setup(max_age_s=0.0)
    outcome = await at_once.execute(make_run(encode_call("nope", {})))
    assert (outcome.kind, outcome.label) == (Kind.FAIL, "dead")
    assert outcome.error is not None and outcome.error.startswith("unknown task 'nope'")


async def test_a_sync_handler_runs_in_a_thread_and_sees_its_job() -> None:
    app, executor, _ = _setup()
    seen: list[Any] = []

    @app.task(queue="q", name="sync")
    def sync() -> None:
        job = current_job()
        seen.append((threading.current_thread().name, job.id if job else None))

    outcome = await executor.execute(make_run(encode_call("sync", {}), job_id=42))
    assert outcome.kind is Kind.ACK
    assert seen[0][0].startswith("alkstore-task") and seen[0][1] == 42
    assert executor.abandoned_threads == 0
    executor.shutdown()


async def test_a_revoked_async_handler_is_stopped_and_writes_nothing() -> None:
    app, executor, _ = _setup()
    started = asyncio.Event()

    @app.task(queue="q", name="long")
    async def long() -> None:
        started.set()
        await asyncio.Event().wait()

    run = make_run(encode_call("long", {}))
    task = asyncio.ensure_future(_execute(executor, run))
    await started.wait()
    executor.revoke(run, "cancelled")
    outcome = await task
    assert (outcome.kind, outcome.label) == (Kind.REVOKED, "cancelled")
    assert run.state is CANCELLED and run.job.cancelled
    executor.revoke(run, "lost")  # no longer live: a second revoke changes nothing
    assert run.state is CANCELLED


async def test_the_stop_cancelling_a_handler_is_raised_not_an_outcome() -> None:
    app, executor, stop = _setup()
    started = asyncio.Event()

    @app.task(queue="q", name="long")
    async def long() -> None:
        started.set()
        await asyncio.Event().wait()

    run = make_run(encode_call("long", {}))
    run.task = task = asyncio.ensure_future(executor.execute(run))  # type: ignore[assignment]
    await started.wait()
    stop.requested = True
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert run.state is RUNNING  # the drain gives it back


def test_revoking_a_buffered_run_marks_it_lost_without_a_task() -> None:
    _, executor, _ = _setup()
    run = make_run(encode_call("x", {}), running=False)
    assert run.state is BUFFERED
    executor.revoke(run, "lost")
    assert run.state is LOST and run.revoked == "lost" and run.job.cancelled
