"""Batch handlers (#28): a task with ``batch_size`` gets a list of calls; each item
keeps its own outcome, attempts, backoff, dead letter and dedupe key. Both engines,
an in-process worker (the SIGKILL case is in tests/acceptance/test_worker_batches.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import alkstore
from alkstore.errors import InvalidArgumentError
from alkstore.worker import BatchItem, current_job, stage, step

from .catalog import Target


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

    async def __aenter__(self) -> alkstore.worker.Worker:
        self.task = asyncio.create_task(self.worker.run())
        return self.worker

    async def __aexit__(self, *exc: object) -> None:
        self.worker.stop()
        assert self.task is not None
        await self.task


async def _state(app: alkstore.App, queue: str, job_id: int) -> str | None:
    store = await app.connect()
    job = await store.queue(queue).get_job(job_id)
    return None if job is None else str(job.state)


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_batch_handler_gets_lists_of_calls_and_every_item_is_acked(
    app: alkstore.App, kind: str
) -> None:
    seen: list[list[int]] = []

    if kind == "async":

        @app.task(queue="b", name="bulk", batch_size=10, batch_wait_s=0.05)
        async def bulk(items: list[BatchItem]) -> None:
            seen.append([item.args["n"] for item in items])

    else:

        @app.task(queue="b", name="bulk", batch_size=10, batch_wait_s=0.05)
        def bulk(items: list[BatchItem]) -> None:
            assert threading.current_thread() is not threading.main_thread()
            seen.append([item.args["n"] for item in items])

    ids = await bulk.defer_many([{"n": n} for n in range(35)])
    async with Running(app, concurrency=4) as worker:
        await wait_until(_async(lambda: worker.counts["success"] == 35), "35 acks")
    assert sorted(n for batch in seen for n in batch) == list(range(35))
    assert all(1 <= len(batch) <= 10 for batch in seen)
    assert len(seen) < 35  # gathered, not one call per job
    for job_id in ids:
        assert await _state(app, "b", job_id) is None  # acked: gone from the live table


async def test_items_of_one_batch_finish_differently(app: alkstore.App) -> None:
    runs: list[tuple[str, int]] = []

    @app.task(queue="d", name="mixed", batch_size=4, batch_wait_s=0.2, retry_base_s=0)
    async def mixed(items: list[BatchItem]) -> None:
        for item in items:
            what = item.args["what"]
            runs.append((what, item.attempts))
            if what == "fail":
                item.fail("bad address")
            elif what == "retry" and item.attempts == 1:
                item.retry("try again")
            elif what == "snooze":
                item.snooze(3600)

    ids = await mixed.defer_many(
        [{"what": "ok"}, {"what": "fail"}, {"what": "retry"}, {"what": "snooze"}]
    )
    ok, failed, retried, snoozed = ids
    async with Running(app, concurrency=2) as worker:
        await wait_until(_async(lambda: worker.counts["success"] == 2), "ok and retried acked")
        await wait_until(_async(lambda: worker.counts["snoozed"] == 1), "the snooze")
    store = await app.connect()
    queue = store.queue("d")
    dead = await queue.get_job(failed)
    assert dead is not None and dead.state == "dead" and dead.last_error == "bad address"
    later = await queue.get_job(snoozed)
    assert later is not None and later.state == "pending" and later.attempts == 0
    assert await queue.get_job(ok) is None and await queue.get_job(retried) is None
    assert ("retry", 1) in runs and ("retry", 2) in runs  # its own attempts
    assert runs.count(("ok", 1)) == 1  # the batch-mate was not run again


async def test_a_raising_batch_handler_retries_each_item_on_its_own_budget(
    app: alkstore.App,
) -> None:
    @app.task(
        queue="r", name="boom", batch_size=8, batch_wait_s=0.1, max_attempts=2, retry_base_s=0
    )
    async def boom(items: list[BatchItem]) -> None:
        for item in items:
            if item.args["keep"]:
                item.succeed()  # marked: kept even though the batch then raises
        raise ValueError("the bulk write failed")

    first = await boom.configure(dedupe_key="k-1").defer(keep=False)
    again = await boom.configure(dedupe_key="k-1").defer(keep=False)
    kept = await boom.defer(keep=True)
    assert again.duplicate and int(again) == int(first)  # dedupe keys are per item
    async with Running(app) as worker:
        await wait_until(_async(lambda: worker.counts["dead"] == 1), "the dead letter")
        await wait_until(_async(lambda: worker.counts["success"] == 1), "the kept item")
    store = await app.connect()
    job = await store.queue("r").get_job(int(first))
    assert job is not None and job.state == "dead" and job.attempts == 2
    assert job.last_error is not None and "the bulk write failed" in job.last_error
    assert await store.queue("r").get_job(int(kept)) is None


async def test_a_batch_handlers_own_cancelled_error_retries_its_items(
    app: alkstore.App,
) -> None:
    @app.task(queue="oc", name="own", batch_size=2, batch_wait_s=0.05, max_attempts=1)
    async def own(items: list[BatchItem]) -> None:
        raise asyncio.CancelledError  # the handler's own, not a stop or a revoke

    ids = await own.defer_many([{"n": 1}, {"n": 2}])
    async with Running(app) as worker:
        await wait_until(_async(lambda: worker.counts["dead"] == 2), "both at their budget")
    store = await app.connect()
    for job_id in ids:
        job = await store.queue("oc").get_job(job_id)
        assert job is not None and job.state == "dead"
        assert job.last_error is not None and "CancelledError" in job.last_error


async def test_cancelling_one_item_leaves_its_batch_mates_running(app: alkstore.App) -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    seen_cancel: list[bool] = []

    @app.task(queue="c", name="slow", batch_size=3, batch_wait_s=0.1)
    async def slow(items: list[BatchItem]) -> None:
        started.set()
        await release.wait()
        seen_cancel.extend(item.cancelled for item in items)

    ids = await slow.defer_many([{"n": 1}, {"n": 2}, {"n": 3}])
    store = await app.connect()
    async with Running(app) as worker:
        await asyncio.wait_for(started.wait(), 30)
        assert await store.queue("c").cancel(ids[1])
        await wait_until(_async(lambda: worker.counts["cancelled"] == 1), "the cancel seen")
        release.set()
        await wait_until(_async(lambda: worker.counts["success"] == 2), "the other two")
    assert seen_cancel == [False, True, False]
    for job_id in ids:
        assert await store.queue("c").get_job(job_id) is None


async def test_per_job_apis_are_refused_in_a_batch_handler(app: alkstore.App) -> None:
    refused: list[str] = []

    @step
    async def charge() -> int:
        return 1

    @app.task(queue="s", name="plain")
    async def plain() -> None: ...

    @app.task(queue="s", name="steps", batch_size=2, batch_wait_s=0.05)
    async def steps(items: list[BatchItem]) -> None:
        assert current_job() is None  # no single job
        for attempt in (charge(), _stage(plain)):
            try:
                await attempt
            except InvalidArgumentError as e:
                refused.append(str(e))

    await steps.defer()
    async with Running(app) as worker:
        await wait_until(_async(lambda: worker.counts["success"] == 1), "the batch")
    assert len(refused) == 2 and all("batch task 'steps'" in e for e in refused)


async def test_a_job_after_a_batch_item_runs_once_the_item_is_acked(app: alkstore.App) -> None:
    order: list[str] = []

    @app.task(queue="w", name="items", batch_size=5, batch_wait_s=0.05)
    async def items(batch: list[BatchItem]) -> None:
        order.extend(f"item{i.args['n']}" for i in batch)

    @app.task(queue="w", name="after")
    async def after() -> None:
        order.append("after")

    ids = await items.defer_many([{"n": 1}, {"n": 2}])
    await after.configure(after=ids).defer()
    async with Running(app) as worker:
        await wait_until(_async(lambda: worker.counts["success"] == 3), "all three")
    assert order[-1] == "after" and sorted(order[:2]) == ["item1", "item2"]


async def test_a_queue_concurrency_limit_bounds_the_items_of_a_batch(app: alkstore.App) -> None:
    sizes: list[int] = []

    @app.task(queue="lim", name="limited", batch_size=10, batch_wait_s=0.05)
    async def limited(items: list[BatchItem]) -> None:
        sizes.append(len(items))

    store = await app.connect()
    await store.queue("lim").set_limits(concurrency=3)
    await limited.defer_many([{"n": n} for n in range(9)])
    async with Running(app) as worker:
        await wait_until(_async(lambda: worker.counts["success"] == 9), "nine acks")
    assert sum(sizes) == 9 and max(sizes) <= 3  # the claim holds at most 3 processing


def test_batch_options_are_validated(app: alkstore.App) -> None:
    bad: Any
    for bad in (0, -1, 1.5, "10", True):
        with pytest.raises(InvalidArgumentError, match="batch_size"):
            app.task(queue="v", batch_size=bad)
    with pytest.raises(InvalidArgumentError, match="batch_wait_s"):
        app.task(queue="v", batch_size=5, batch_wait_s=-1)
    with pytest.raises(InvalidArgumentError, match="keeps no results"):
        app.task(queue="v", batch_size=5, keep_result_s=60)

    @app.task(queue="v", name="kw", batch_size=5)
    async def kw(items: list[BatchItem]) -> None: ...

    with pytest.raises(TypeError, match="keyword arguments only"):
        kw.payload(1)


def _async(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def run() -> bool:
        return check()

    return run


async def _stage(task: alkstore.Task[Any, Any]) -> None:
    stage(task.s())


async def test_a_batch_outliving_the_visibility_timeout_keeps_its_items(
    app: alkstore.App,
) -> None:
    calls: list[list[int]] = []

    @app.task(queue="hb", name="long", batch_size=3, batch_wait_s=0.05, visibility_timeout_s=1.2)
    async def long(items: list[BatchItem]) -> None:
        calls.append([item.attempts for item in items])
        await asyncio.sleep(3)  # past the claim's lapse: each item's heartbeat keeps it

    await long.defer_many([{"n": 1}, {"n": 2}, {"n": 3}])
    async with Running(app) as worker:
        await wait_until(_async(lambda: worker.counts["success"] == 3), "the three acks")
    assert calls == [[1, 1, 1]]  # never reclaimed, never run twice


async def test_a_graceful_stop_lets_the_running_batch_finish(app: alkstore.App) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @app.task(queue="g", name="finish", batch_size=5, batch_wait_s=0.05)
    async def finish(items: list[BatchItem]) -> None:
        started.set()
        await release.wait()  # finishes only after the stop was asked for

    ids = await finish.defer_many([{"n": n} for n in range(5)])
    worker = app.worker(handle_signals=False, poll_interval_s=0.2, grace_s=30)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 30)
    worker.stop()
    release.set()
    await task
    assert worker.counts["success"] == 5
    store = await app.connect()
    for job_id in ids:
        assert await store.queue("g").get_job(job_id) is None


async def test_a_stop_past_the_grace_gives_a_batchs_items_back(app: alkstore.App) -> None:
    started = asyncio.Event()

    @app.task(queue="x", name="stuck", batch_size=4, batch_wait_s=0.05)
    async def stuck(items: list[BatchItem]) -> None:
        started.set()
        await asyncio.sleep(3600)  # never ends by itself: the stop past the grace cancels it

    ids = await stuck.defer_many([{"n": n} for n in range(4)])
    worker = app.worker(handle_signals=False, poll_interval_s=0.2, grace_s=0.2)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 30)
    worker.stop()
    await task
    store = await app.connect()
    for job_id in ids:  # given back: pending at once, not left to lapse
        job = await store.queue("x").get_job(job_id)
        assert job is not None and job.state == "pending"
