"""Per-call task options reach what the queue API offers: a partition key (fair queues,
per-key limits) and debounce, through ``task.configure(...)`` on every engine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import alkstore
from alkstore.errors import InvalidArgumentError

from .catalog import Target


@pytest.fixture
async def app(target: Target) -> AsyncIterator[alkstore.App]:
    app = alkstore.App(target.url, schema=target.schema)
    async with app:
        yield app


async def test_a_fair_queue_of_tasks_runs_a_late_tenant_before_the_big_backlog(
    app: alkstore.App,
) -> None:
    ran: list[str] = []
    done = asyncio.Event()

    @app.task(queue="tenants", name="tenant.work")
    async def work(tenant: str, n: int) -> None:
        ran.append(tenant)
        if len(ran) == 24:
            done.set()

    store = await app.connect()
    await store.queue("tenants").set_fair()
    await work.configure(partition_key="a").defer_many([{"tenant": "a", "n": n} for n in range(20)])
    for n in range(2):
        await work.configure(partition_key="b").defer(tenant="b", n=n)
    await work.configure(partition_key="c").defer(tenant="c", n=0)
    await work.configure(partition_key="c").defer(tenant="c", n=1)
    worker = app.worker(concurrency=1, prefetch=1, handle_signals=False, poll_interval_s=0.2)
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(done.wait(), 30)
    finally:
        worker.stop()
        await running
    # round-robin over the keys: b's and c's jobs within the first six, not after a's 20
    assert sorted(ran[:6]) == ["a", "a", "b", "b", "c", "c"], ran
    stored = await store.queue("tenants").claim_one("w")
    assert stored is None  # all 24 ran


async def test_a_partition_limit_holds_a_task_key_to_its_share(app: alkstore.App) -> None:
    @app.task(queue="keyed", name="keyed.work")
    async def work(n: int) -> None: ...

    store = await app.connect()
    await store.queue("keyed").set_limits(partition_concurrency=1)
    first = await work.configure(partition_key="customer-42").defer(1)
    await work.configure(partition_key="customer-42").defer(2)
    other = await work.configure(partition_key="customer-7").defer(3)
    batch = await store.queue("keyed").claim_batch("w", 10)
    assert sorted(h.job.id for h in batch) == sorted([int(first), int(other)])


async def test_debounced_defers_keep_one_pending_job_with_the_latest_arguments(
    app: alkstore.App,
) -> None:
    @app.task(queue="typing", name="typing.save")
    async def save(text: str) -> None: ...

    first = await save.configure(debounce_key="doc-7").defer("h")
    second = await save.configure(debounce_key="doc-7").defer("he")
    third = await save.configure(debounce_key="doc-7").defer("hey")
    assert int(first) == int(second) == int(third)
    assert (first.duplicate, second.duplicate, third.duplicate) == (False, True, True)
    store = await app.connect()
    batch = await store.queue("typing").claim_batch("w", 10)
    assert [h.job.id for h in batch] == [int(first)]
    assert b'"hey"' in batch[0].job.payload


async def test_bad_task_options_are_refused_naming_the_value(app: alkstore.App) -> None:
    @app.task(queue="opts", name="opts.work")
    async def work(n: int) -> None: ...

    with pytest.raises(InvalidArgumentError, match="partition_key"):
        work.configure(partition_key="")
    with pytest.raises(InvalidArgumentError, match="doc-1"):
        await work.configure(debounce_key="doc-1").defer_many([{"n": 1}, {"n": 2}])
    store = await app.connect()
    assert await store.queue("opts").claim_one("w") is None  # nothing was written
