"""Jobs a worker cannot interpret (docs/worker.md, "Unknown tasks"): given back unrun,
their attempt uncounted, for a worker that knows them; dead-lettered only after one
worker kept giving them back for ``unknown_task_max_age_s``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import alkstore
from tests.conftest import Target


def _apps(target: Target) -> tuple[alkstore.App, alkstore.App]:
    return alkstore.App(target.url, schema=target.schema), alkstore.App(
        target.url, schema=target.schema
    )


async def test_an_old_worker_gives_a_new_task_back_and_a_new_worker_runs_it_first_try(
    target: Target, caplog: Any
) -> None:
    old, new = _apps(target)
    ran: list[int] = []

    @old.task(queue="d", name="known")
    async def known_old() -> None:
        pass

    @new.task(queue="d", name="known")
    async def known_new() -> None:
        pass

    @new.task(queue="d", name="fresh")
    async def fresh() -> None:
        job = alkstore.current_job()
        assert job is not None
        ran.append(job.attempts)
        if len(ran) == 2:
            new_worker.stop()

    async with old, new:
        ids = await fresh.defer_many([{}, {}])
        old_worker = old.worker(["d"], handle_signals=False, worker_id="old-1")
        caplog.set_level(logging.WARNING, "alkstore.worker")
        old_run = asyncio.create_task(old_worker.run())
        while old_worker.counts["unknown"] < 2:  # met both, gave them back
            await asyncio.sleep(0.05)
        for job_id in ids:
            job = await old.store.queue("d").get_job(job_id)
            assert job is not None and (job.state, job.attempts, job.last_error) == (
                "pending",
                0,
                None,
            )
        warnings = [
            r.getMessage() for r in caplog.records if "does not know task" in r.getMessage()
        ]
        assert len(warnings) == 1  # rate-limited: once per task and minute
        assert "'fresh'" in warnings[0] and "old-1" in warnings[0]
        old_worker.stop()
        assert await old_run == 0
        new_worker = new.worker(["d"], handle_signals=False)
        assert await new_worker.run() == 0
        assert ran == [1, 1]  # no attempt was spent by the old worker
        assert old_worker.counts["dead"] == 0 and old_worker.counts["retry"] == 0


async def test_a_job_given_back_past_the_max_age_is_dead_lettered_naming_the_task(
    target: Target,
) -> None:
    app, _ = _apps(target)

    @app.task(queue="e", name="known")
    async def known() -> None:
        pass

    async with app:
        queue = app.store.queue("e")
        typo = await queue.enqueue({"task": "knwon", "args": {}})
        raw = await queue.enqueue(b"not a task call")
        worker = app.worker(["e"], handle_signals=False, unknown_task_max_age_s=0)
        run = asyncio.create_task(worker.run())
        admin = app.store.admin()
        while worker.counts["dead"] < 2:
            await asyncio.sleep(0.05)
        worker.stop()
        assert await run == 0
        dead_typo, dead_raw = await admin.find_job(typo), await admin.find_job(raw)
        assert dead_typo is not None and dead_typo.state == "dead"
        assert (dead_typo.last_error or "").startswith("unknown task 'knwon'")
        assert dead_raw is not None and dead_raw.state == "dead"
        assert "not a task call" in (dead_raw.last_error or "")


async def test_a_payload_that_is_no_task_call_is_given_back_not_dead_lettered(
    target: Target,
) -> None:
    app, _ = _apps(target)

    @app.task(queue="f", name="known")
    async def known() -> None:
        pass

    async with app:
        raw = await app.store.queue("f").enqueue(b"not a task call")
        worker = app.worker(["f"], handle_signals=False)
        run = asyncio.create_task(worker.run())
        while worker.counts["unknown"] < 1:
            await asyncio.sleep(0.05)
        worker.stop()
        assert await run == 0
        job = await app.store.queue("f").get_job(raw)
        assert job is not None and (job.state, job.attempts, job.last_error) == ("pending", 0, None)
