"""The FastAPI lifespan recipe (docs/frameworks.md) through FastAPI's TestClient, on
every engine: the store opens and closes with the app, a worker runs alongside."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

import alkstore
from tests.conftest import Target


def _service(target: Target, *, with_worker: bool) -> tuple[FastAPI, alkstore.App, list[Any]]:
    jobs = alkstore.App(target.url, **target.connect_kwargs())
    opened: list[Any] = []

    @jobs.task(queue="emails", keep_result_s=600)
    async def send_welcome(user: str) -> str:
        return f"welcome, {user}"

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        opened.append(await jobs.connect())
        worker = jobs.worker(handle_signals=False, poll_interval_s=0.2) if with_worker else None
        running = asyncio.create_task(worker.run()) if worker is not None else None
        try:
            yield
        finally:
            if worker is not None and running is not None:
                worker.stop()
                assert await running == 0
            await jobs.close()

    api = FastAPI(lifespan=lifespan)

    @api.post("/signup/{user}")
    async def signup(user: str) -> dict[str, int]:
        return {"job": await send_welcome.defer(user)}

    @api.get("/jobs/{job_id}")
    async def job_result(job_id: int) -> dict[str, str]:
        return {"result": await jobs.store.queue("emails").result(job_id, timeout_s=30)}

    return api, jobs, opened


def test_the_store_opens_and_closes_with_the_app_and_its_worker_runs_jobs(
    target: Target,
) -> None:
    api, _, opened = _service(target, with_worker=True)
    with TestClient(api) as client:
        ids = [client.post(f"/signup/u{i}").json()["job"] for i in range(3)]
        for i, job_id in enumerate(ids):
            assert client.get(f"/jobs/{job_id}").json() == {"result": f"welcome, u{i}"}
        (store,) = opened
        assert not store.closed
    assert store.closed  # shut down with the app


async def test_without_a_worker_the_jobs_wait_in_the_store(target: Target) -> None:
    api, _, opened = _service(target, with_worker=False)
    with TestClient(api) as client:
        job_id = client.post("/signup/ada").json()["job"]
    assert opened[0].closed
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        job = await store.queue("emails").get_job(job_id)
        assert job is not None and job.state == "pending"
