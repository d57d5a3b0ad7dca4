"""A job's life (#24): attempt history, progress, durable steps, durable sleep and
signals, on both engines, with an in-process worker; fencing through a stale claim."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import alkstore
from alkstore import QueueOpts
from alkstore.core.life import GONE_LIFE_KEPT_S
from alkstore.errors import (
    InvalidArgumentError,
    JobLostError,
    PayloadError,
    SignalTimeoutError,
)
from alkstore.worker import current_job
from alkstore.worker.job_life import JobLife, Park

from .catalog import Target
from .conftest import Clock


async def wait_until(
    check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30.0
) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)  # polling a condition; the deadline bounds only a failure


@pytest.fixture
async def app(target: Target) -> AsyncIterator[alkstore.App]:
    app = alkstore.App(target.url, schema=target.schema)
    async with app:
        yield app


class Running:
    """An in-process worker of ``app`` while the block runs."""

    def __init__(self, app: alkstore.App, **options: Any) -> None:
        options.setdefault("handle_signals", False)
        options.setdefault("poll_interval_s", 0.2)
        self.worker = app.worker(**options)
        self.task: asyncio.Task[int] | None = None

    async def __aenter__(self) -> alkstore.Worker:
        self.task = asyncio.create_task(self.worker.run())
        return self.worker

    async def __aexit__(self, *exc: object) -> None:
        self.worker.stop()
        assert self.task is not None
        await self.task


def j() -> Any:
    job = current_job()
    assert job is not None
    return job


# -- attempt history -------------------------------------------------------------------
async def test_every_attempt_is_kept_with_its_outcome_worker_and_traceback(
    app: alkstore.App,
) -> None:
    @app.task(queue="h", name="flaky", max_attempts=5, retry_base_s=0, keep_result_s=60)
    async def flaky() -> int:
        if j().attempts < 3:
            raise ValueError(f"boom {j().attempts}")
        return j().attempts

    async with app:
        job_id = await flaky.defer()
        queue = app.store.queue("h")
        async with Running(app, worker_id="w-hist"):
            assert await queue.result(job_id, timeout_s=30) == 3
        history = await queue.attempts(job_id)
    assert [(a.number, a.outcome) for a in history] == [(1, "retry"), (2, "retry"), (3, "success")]
    for a in history:
        assert a.worker_id == "w-hist" and a.host
        assert a.claimed_at is not None and a.finished_at is not None
        assert a.claimed_at <= a.finished_at
    assert history[0].error is not None and history[0].error.startswith("ValueError: boom 1")
    assert "Traceback" in history[0].error
    assert history[2].error is None


async def test_history_is_bounded_per_job_and_shows_a_dead_job(app: alkstore.App) -> None:
    @app.task(queue="h", name="doomed", max_attempts=6, retry_base_s=0)
    async def doomed() -> None:
        raise RuntimeError("always")

    async with app:
        job_id = await doomed.defer()
        queue = app.store.queue("h")
        async with Running(app, attempt_history=4):
            await wait_until(lambda: _state_is(queue, job_id, "dead"), "the job to die")
            await wait_until(lambda: _has(queue, job_id, 4), "the history to be written")
        history = await queue.attempts(job_id)
    # the newest 4 of 6: attempts 3..6, the last one dead
    assert [(a.number, a.outcome) for a in history] == [
        (3, "retry"),
        (4, "retry"),
        (5, "retry"),
        (6, "dead"),
    ]


async def test_a_cancelled_run_is_recorded_cancelled(app: alkstore.App) -> None:
    started = asyncio.Event()

    @app.task(queue="h", name="long")
    async def long() -> None:
        started.set()
        await asyncio.sleep(3600)  # never ends by itself: the cancel ends it

    async with app:
        job_id = await long.defer()
        queue = app.store.queue("h")
        async with Running(app):
            await asyncio.wait_for(started.wait(), 30)
            assert await queue.cancel(job_id)
            await wait_until(lambda: _has(queue, job_id, 1), "the cancelled attempt")
        assert [a.outcome for a in await queue.attempts(job_id)] == ["cancelled"]


async def test_a_plain_success_writes_no_history(app: alkstore.App) -> None:
    @app.task(queue="h", name="fine")
    async def fine() -> None:
        return None

    async with app:
        job_id = await fine.defer()
        queue = app.store.queue("h")
        async with Running(app) as worker:
            await wait_until(lambda: _true(worker.counts["success"] == 1), "the success")
        assert await queue.attempts(job_id) == []


async def test_a_gap_in_the_numbers_reads_as_lost(store: alkstore.Store, qname: str) -> None:
    """A worker that died wrote nothing: the next claim's number shows the gap."""
    queue = store.queue(qname, QueueOpts(visibility_timeout_s=60))
    job_id = await queue.enqueue("x")
    clock = Clock().install(store)
    first = await queue.claim_one("dies")
    assert first is not None
    clock.advance(120)
    second = await queue.claim_one("lives")
    assert second is not None and second.job.attempts == 2
    assert [(a.number, a.outcome) for a in await queue.attempts(job_id)] == [(1, "lost")]
    await second.retry("later", delay_s=0)
    history = await queue.attempts(job_id)
    assert [(a.number, a.outcome) for a in history] == [(1, "lost"), (2, "lost")]


# -- progress -----------------------------------------------------------------------------
async def test_progress_from_a_tight_loop_is_coalesced_and_readable(
    app: alkstore.App,
) -> None:
    gate = asyncio.Event()
    writes = Counter[int]()

    @app.task(queue="p", name="busy")
    async def busy(n: int) -> None:
        for i in range(n + 1):
            j().progress(i / n, f"row {i}")
        await gate.wait()

    @app.task(queue="p", name="busy_sync")
    def busy_sync(n: int) -> None:
        for i in range(n + 1):
            j().progress(i, "counting")
        while not j().cancelled and not gate.is_set():
            time.sleep(0.01)  # a sync handler's thread polling its two ways out

    async with app:
        engine = app.store._engine
        original = engine.put_progress

        async def counted(*args: Any) -> bool:
            writes[args[1]] += 1
            return await original(*args)

        engine.put_progress = counted  # type: ignore[method-assign,assignment]  # a spy
        a = await busy.defer(n=20000)
        b = await busy_sync.defer(n=20000)
        queue = app.store.queue("p")
        async with Running(app, concurrency=2):
            await wait_until(lambda: _progress_is(queue, a, 1.0), "async progress 1.0")
            await wait_until(lambda: _progress_is(queue, b, 20000.0), "sync progress 20000")
            progress = await queue.progress(a)
            assert progress is not None
            assert (progress.message, progress.attempt) == ("row 20000", 1)
            gate.set()
    assert 1 <= writes[a] < 100 and 1 <= writes[b] < 100  # never one write per call


async def test_progress_validates(app: alkstore.App) -> None:
    seen: list[str] = []

    @app.task(queue="p", name="bad", max_attempts=1)
    async def bad() -> None:
        for value in (-1, float("nan"), "half", True):
            try:
                j().progress(value)
            except InvalidArgumentError as e:
                seen.append(str(e))

    async with app:
        await bad.defer()
        async with Running(app) as worker:
            await wait_until(lambda: _true(worker.counts["success"] == 1), "the run")
    assert len(seen) == 4 and all("progress must be" in s for s in seen)


# -- durable steps ------------------------------------------------------------------------
async def test_completed_steps_are_not_run_again_by_a_later_attempt(app: alkstore.App) -> None:
    ran: list[str] = []

    async def effect(name: str, value: Any) -> Any:
        ran.append(name)
        return value

    @app.task(queue="s", name="flow", max_attempts=3, retry_base_s=0, keep_result_s=60)
    async def flow() -> Any:
        a = await j().step("a", effect, "a", {"n": 1})
        b = await j().step("b", effect, "b", [1, 2])
        if j().attempts == 1:
            raise RuntimeError("crash after b")
        c = await j().step("c", effect, "c", "three")
        return [a, b, c]

    async with app:
        job_id = await flow.defer()
        async with Running(app):
            result = await app.store.queue("s").result(job_id, timeout_s=30)
    assert result == [{"n": 1}, [1, 2], "three"]
    assert ran == ["a", "b", "c"]  # a and b once, though the handler ran twice


async def test_sync_steps_and_repeated_names(app: alkstore.App) -> None:
    ran: list[int] = []

    def effect(i: int) -> int:
        ran.append(i)
        return i * 10

    @app.task(queue="s", name="loop", max_attempts=2, retry_base_s=0, keep_result_s=60)
    def loop() -> list[int]:
        out = [j().step_sync("item", effect, i) for i in range(3)]
        if j().attempts == 1:
            raise RuntimeError("crash after the loop")
        return out

    async with app:
        job_id = await loop.defer()
        async with Running(app):
            assert await app.store.queue("s").result(job_id, timeout_s=30) == [0, 10, 20]
    assert ran == [0, 1, 2]  # item, item#2, item#3: each once


async def test_a_step_result_must_be_json_and_fit(app: alkstore.App) -> None:
    errors: list[BaseException] = []

    @app.task(queue="s", name="odd", max_attempts=1)
    async def odd() -> None:
        for fn in (lambda: {1, 2}, lambda: "x" * 2_000_000):
            try:
                await j().step("odd", fn)
            except PayloadError as e:
                errors.append(e)
        for name in ("", "a#b", "@sleep", 7):
            try:
                await j().step(name, lambda: 1)  # type: ignore[arg-type]
            except InvalidArgumentError as e:
                errors.append(e)

    async with app:
        await odd.defer()
        async with Running(app) as worker:
            await wait_until(lambda: _true(worker.counts["success"] == 1), "the run")
    assert [type(e).__name__ for e in errors] == [
        "PayloadError",
        "PayloadTooLargeError",
        *["InvalidArgumentError"] * 4,
    ]


# -- fencing --------------------------------------------------------------------------------
async def test_a_reclaimed_jobs_old_holder_writes_neither_progress_nor_a_step(
    store: alkstore.Store, qname: str
) -> None:
    queue = store.queue(qname, QueueOpts(visibility_timeout_s=30))
    job_id = await queue.enqueue("x")
    clock = Clock().install(store)
    old = await queue.claim_one("old")
    assert old is not None
    loop = asyncio.get_running_loop()
    stale = JobLife(old, loop)
    assert await stale.step("before", lambda: 1) == 1  # still ours: stored
    clock.advance(60)  # the claim lapses
    new = await queue.claim_one("new")
    assert new is not None and new.job.attempts == 2
    with pytest.raises(JobLostError, match="step 'after'"):
        await stale.step("after", lambda: 2)
    await stale._write(0.5, "stale")
    assert await queue.progress(job_id) is None
    fresh = JobLife(new, loop)
    assert await fresh.step("before", lambda: 99) == 1  # the stored result, not run again
    assert await fresh.step("after", lambda: 3) == 3
    await fresh._write(0.75, "fresh")
    progress = await queue.progress(job_id)
    assert progress is not None and (progress.value, progress.attempt) == (0.75, 2)


# -- durable sleep ----------------------------------------------------------------------------
async def test_a_durable_sleep_frees_the_slot_and_keeps_steps_and_the_attempt(
    app: alkstore.App,
) -> None:
    ran: list[str] = []
    others: list[int] = []

    @app.task(queue="d", name="napper", keep_result_s=60)
    async def napper() -> Any:
        await j().step("before", ran.append, "before")
        await j().sleep(0.5)
        await j().step("after", ran.append, "after")
        return j().attempts

    @app.task(queue="d", name="other")
    async def other(i: int) -> None:
        others.append(i)

    async with app:
        job_id = await napper.defer()
        queue = app.store.queue("d")
        async with Running(app, concurrency=1):
            await wait_until(lambda: _has(queue, job_id, 1), "the sleep's give-back")
            await other.defer_many([{"i": i} for i in range(3)])  # the one slot is free
            await wait_until(lambda: _true(len(others) == 3), "other jobs while it sleeps")
            assert await queue.result(job_id, timeout_s=30) == 1  # no attempt spent
        history = await queue.attempts(job_id)
    assert ran == ["before", "after"]
    assert [a.outcome for a in history] == ["snoozed", "success"]


# -- signals ------------------------------------------------------------------------------------
async def test_a_signal_wakes_a_parked_job_with_its_payload(app: alkstore.App) -> None:
    others: list[int] = []

    @app.task(queue="g", name="approve", keep_result_s=60)
    async def approve() -> Any:
        return {"got": await j().wait_for("approval"), "attempt": j().attempts}

    @app.task(queue="g", name="other")
    async def other(i: int) -> None:
        others.append(i)

    async with app:
        job_id = await approve.defer()
        queue = app.store.queue("g")
        async with Running(app, concurrency=1, poll_interval_s=30):
            await wait_until(lambda: _state_is(queue, job_id, "pending"), "the park")
            await other.defer_many([{"i": i} for i in range(3)])  # it holds no slot
            await wait_until(lambda: _true(len(others) == 3), "others while parked")
            assert await app.store.signal(job_id, "approval", {"by": "ann"})
            # the wake, not the 30 s re-poll, brings it back
            result = await queue.result(job_id, timeout_s=20)
    assert result == {"got": {"by": "ann"}, "attempt": 1}


async def test_a_signal_sent_before_the_wait_is_returned_at_once(app: alkstore.App) -> None:
    gate = asyncio.Event()

    @app.task(queue="g", name="late", keep_result_s=60)
    async def late() -> Any:
        await gate.wait()
        return await j().wait_for("go")

    async with app:
        job_id = await late.defer()
        async with Running(app):
            assert await app.store.signal(job_id, "go", [1, "two"])
            gate.set()
            assert await app.store.queue("g").result(job_id, timeout_s=30) == [1, "two"]


async def test_a_wait_times_out_with_a_typed_error(app: alkstore.App) -> None:
    @app.task(queue="g", name="impatient", keep_result_s=60)
    async def impatient() -> str:
        try:
            await j().wait_for("never", timeout_s=0.3)
        except SignalTimeoutError as e:
            return f"timeout: {e}"
        return "signalled"

    async with app:
        job_id = await impatient.defer()
        async with Running(app):
            result = await app.store.queue("g").result(job_id, timeout_s=30)
    assert result.startswith("timeout: ") and "'never'" in result


async def test_signal_validates_and_answers_false_for_no_live_job(
    store: alkstore.Store, qname: str
) -> None:
    assert await store.signal(10**9, "x") is False
    job_id = await store.queue(qname).enqueue("x")
    assert await store.signal(job_id, "x", {"ok": True}) is True
    for name in ("", "a#b", "@wait:x", None):
        with pytest.raises(InvalidArgumentError, match="signal name"):
            await store.signal(job_id, name)  # type: ignore[arg-type]
    with pytest.raises(PayloadError):
        await store.signal(job_id, "y", {1, 2})
    with pytest.raises(InvalidArgumentError, match="job id"):
        await store.signal("7", "x")  # type: ignore[arg-type]


async def test_a_signal_does_not_start_a_delayed_job_early(
    store: alkstore.Store, qname: str
) -> None:
    queue = store.queue(qname)
    job_id = await queue.enqueue("x", alkstore.EnqueueOpts(delay_s=3600))
    assert await store.signal(job_id, "go")
    assert await queue.claim_one("w") is None  # only a job parked on it is woken


# -- removed with the job ---------------------------------------------------------------------
async def test_the_sweep_drops_the_life_of_gone_jobs(store: alkstore.Store, qname: str) -> None:
    queue = store.queue(qname)
    gone, live = await queue.enqueue_many(["a", "b"])
    loop = asyncio.get_running_loop()
    for job_id in (gone, live):
        await store.signal(job_id, "s", 1)
    handles = {h.job.id: h for h in await queue.claim_batch("w", 2)}
    for handle in handles.values():
        await JobLife(handle, loop).step("x", lambda: 1)
        await JobLife(handle, loop)._write(0.5, None)
    await handles[gone].retry("again", delay_s=0)
    engine = store._engine
    now = time.time()
    await engine.add_attempts([(gone, qname, 1, "w", "h", now, now, "retry", "again")], 20)
    assert await queue.cancel(gone)
    await queue.sweep_expired()
    # steps and signals go at once; the attempts and progress stay readable a while
    assert await engine.steps(qname, gone) == {}
    assert await engine.get_signal(qname, gone, "s") is None
    assert [a.outcome for a in await queue.attempts(gone)] == ["retry"]
    assert await queue.progress(gone) is not None
    assert await engine.steps(qname, live) == {"x": "1"}
    assert await engine.get_signal(qname, live, "s") == "1"
    assert await queue.progress(live) is not None


async def test_the_sweep_drops_a_gone_jobs_history_once_it_is_old(
    store: alkstore.Store, qname: str
) -> None:
    queue = store.queue(qname)
    old, fresh = await queue.enqueue_many(["a", "b"])
    engine = store._engine
    long_ago = time.time() - GONE_LIFE_KEPT_S - 60
    await engine.add_attempts(
        [
            (old, qname, 1, "w", "h", long_ago, long_ago, "cancelled", "stopped"),
            (fresh, qname, 1, "w", "h", long_ago, long_ago, "retry", "first"),
            (fresh, qname, 2, "w", "h", long_ago, time.time(), "cancelled", "stopped"),
        ],
        20,
    )
    assert await queue.cancel(old) and await queue.cancel(fresh)
    await queue.sweep_expired()
    assert await queue.attempts(old) == []
    # a job's rows go together: the old first attempt stays beside the fresh second
    assert [a.outcome for a in await queue.attempts(fresh)] == ["retry", "cancelled"]


async def test_park_carries_its_signal() -> None:
    p = Park(2.5, "approval")
    assert isinstance(p, alkstore.Snooze) and (p.delay_s, p.signal) == (2.5, "approval")


# -- helpers ------------------------------------------------------------------------------------
async def _true(value: bool) -> bool:
    return value


async def _state_is(queue: alkstore.Queue, job_id: int, state: str) -> bool:
    job = await queue.get_job(job_id)
    return job is not None and job.state == state


async def _has(queue: alkstore.Queue, job_id: int, n: int) -> bool:
    return len([a for a in await queue.attempts(job_id) if a.worker_id]) >= n


async def _progress_is(queue: alkstore.Queue, job_id: int, value: float) -> bool:
    progress = await queue.progress(job_id)
    return progress is not None and progress.value == value


async def test_the_step_decorator_makes_each_call_a_step(app: alkstore.App) -> None:
    ran: list[str] = []

    @alkstore.step
    async def fetch(n: int) -> int:
        ran.append(f"fetch{n}")
        return n + 1

    @alkstore.step(name="store")
    def store_it(n: int) -> int:
        ran.append(f"store{n}")
        return n * 2

    @app.task(queue="s", name="deco", max_attempts=2, retry_base_s=0, keep_result_s=60)
    async def deco() -> list[int]:
        out = [await fetch(1), await fetch(2)]
        if j().attempts == 1:
            raise RuntimeError("again")
        return out

    @app.task(queue="s", name="deco_sync", max_attempts=2, retry_base_s=0, keep_result_s=60)
    def deco_sync() -> int:
        value = int(store_it(5))
        if j().attempts == 1:
            raise RuntimeError("again")
        return value

    assert await fetch(0) == 1 and store_it(0) == 0  # outside a job: plain calls
    async with app:
        a, b = await deco.defer(), await deco_sync.defer()
        queue = app.store.queue("s")
        async with Running(app, concurrency=2):
            assert await queue.result(a, timeout_s=30) == [2, 3]
            assert await queue.result(b, timeout_s=30) == 10
    assert sorted(ran) == ["fetch0", "fetch1", "fetch2", "store0", "store5"]


async def test_a_run_whose_claim_was_taken_is_recorded_lost_by_its_worker(
    app: alkstore.App, open_store: Any
) -> None:
    started = asyncio.Event()

    @app.task(queue="h", name="stuck", visibility_timeout_s=30)
    async def stuck() -> None:
        started.set()
        await asyncio.sleep(3600)  # never ends by itself: it holds the claim until cancelled

    async with app:
        job_id = await stuck.defer()
        other = await open_store()
        clock = Clock().install(app.store, other)
        queue = app.store.queue("h")
        async with Running(app, worker_id="w-stuck"):
            await asyncio.wait_for(started.wait(), 30)
            clock.advance(120)  # the claim lapses by the database's clock
            taken = await other.queue("h").claim_one("w-other")
            assert taken is not None and taken.job.attempts == 2
            await wait_until(lambda: _has(queue, job_id, 1), "the lost attempt's record")
        history = await queue.attempts(job_id)
    assert [(a.number, a.outcome, a.worker_id) for a in history] == [(1, "lost", "w-stuck")]
