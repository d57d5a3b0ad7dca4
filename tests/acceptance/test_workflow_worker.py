"""Workflows run by real worker processes: a SIGKILL mid-chain loses nothing, and no
step runs after a dead parent (docs/contract.md, "Dependencies")."""

from __future__ import annotations

from typing import Any

import alkstore
from alkstore.workflows import chain
from tests.acceptance import apps
from tests.acceptance.conftest import Workers, results, wait_until


async def _gone(store: alkstore.Store, job_id: int) -> bool:
    return await store.admin().find_job(job_id) is None


async def _keys(store: alkstore.Store, key: str) -> list[dict[str, Any]]:
    return [r for r in await results(store) if r["key"] == key]


async def test_a_worker_killed_mid_chain_loses_nothing(
    app_store: alkstore.Store, workers: Workers
) -> None:
    run = await chain(
        apps.echo.s("c1"), apps.slow.s(key="c2", seconds=1.0), apps.echo.s("c3")
    ).defer(app_store)
    first = workers.start()

    async def second_started() -> bool:
        return bool(await _keys(app_store, "c2"))

    await wait_until(second_started, what="the chain's second step to start")
    first.kill()  # SIGKILL mid-step: its claim must lapse, the step run again
    first.wait()
    assert await _keys(app_store, "c3") == []  # not before its parent finished
    workers.start()

    async def last_ran() -> bool:
        return bool(await _keys(app_store, "c3"))

    await wait_until(last_ran, what="the chain's last step to run")
    for job_id in run.ids:  # each acked (the worker's batched acks released the next)
        await wait_until(lambda i=job_id: _gone(app_store, i), what=f"job {job_id} acked")
    seen = [(r["key"], r.get("phase"), r["attempt"]) for r in await results(app_store)]
    assert seen == [
        ("c1", None, 1),
        ("c2", "start", 1),
        ("c2", "start", 2),
        ("c2", "end", 2),
        ("c3", None, 1),
    ]


async def test_no_step_runs_after_a_dead_parent(
    app_store: alkstore.Store, workers: Workers
) -> None:
    run = await chain(
        apps.echo.s("d1"), apps.fails_hard.s("d2"), apps.echo.s("d3"), apps.echo.s("d4")
    ).defer(app_store)
    workers.start()
    d3, d4 = run.ids[2], run.ids[3]

    async def dead(job_id: int) -> bool:
        job = await app_store.admin().find_job(job_id)
        return job is not None and job.state == "dead"

    await wait_until(lambda: dead(d4), what="the last step to be dead-lettered")
    assert [r["key"] for r in await results(app_store)] == ["d1", "d2"]
    job = await app_store.admin().find_job(d3)
    assert (
        job is not None and job.last_error == f"dependency {run.ids[1]} died: d2: no point retrying"
    )


async def test_a_task_stages_follow_ups_written_by_the_workers_batched_ack(
    app_store: alkstore.Store, workers: Workers
) -> None:
    job_id = await apps.stages_next.defer("s")
    workers.start()

    async def last_ran() -> bool:
        return bool(await _keys(app_store, "s-last"))

    await wait_until(last_ran, what="the staged chain to run")
    assert [r["key"] for r in await results(app_store)] == ["s", "s-next", "s-last"]
    assert await _gone(app_store, job_id)
