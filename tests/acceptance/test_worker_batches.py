"""Batch handlers in real worker processes (#28): a SIGKILL mid-batch loses no item:
each was acked by the killed worker or runs again in the next."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import alkstore
from tests.acceptance import batch_app

from .conftest import Target, Workers, wait_until


@pytest.fixture
async def batch_store(target: Target) -> AsyncIterator[alkstore.Store]:
    batch_app.app.url = target.url
    batch_app.app.schema = target.schema
    store = await batch_app.app.connect()
    yield store
    await batch_app.app.close()
    batch_app.app.url = None
    batch_app.app.schema = "alkstore"


async def _records(store: alkstore.Store) -> list[dict[str, Any]]:
    jobs = await store.admin().list_jobs(batch_app.RESULTS, limit=10_000)
    return [json.loads(job.payload) for job in jobs]


async def test_sigkill_mid_batch_loses_no_item(
    batch_store: alkstore.Store, target: Target, tmp_path: Path
) -> None:
    ids = await batch_app.bulk.defer_many([{"n": n} for n in range(30)])
    workers = Workers(target, tmp_path, spec="tests.acceptance.batch_app:app")
    try:
        first = workers.start("--concurrency", "4", BATCH_HANG="1")

        async def hanging() -> bool:
            return any(
                r["phase"] == "start" and r["pid"] == first.pid and r["job"] >= ids[20]
                for r in await _records(batch_store)
            )

        await wait_until(hanging, what="a batch to hang mid-run")
        first.kill()  # SIGKILL: no give-back, no ack; the items' claims must lapse
        first.wait()
        second = workers.start("--concurrency", "4")

        async def drained() -> bool:
            admin = batch_store.admin()
            return all([await admin.find_job(i) is None for i in ids])

        await wait_until(drained, timeout=60, what="every item to be acked")
    finally:
        workers.close()
    runs: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for r in await _records(batch_store):
        runs[r["job"]].append((r["phase"], r["attempt"], r["pid"]))
    for job_id in ids:
        ends = [run for run in runs[job_id] if run[0] == "end"]
        assert ends, f"job {job_id} never finished: {runs[job_id]}"
    hung = [
        i
        for i in ids
        if ("start", 1, first.pid) in runs[i]
        and not any(run[0] == "end" and run[2] == first.pid for run in runs[i])
    ]
    assert hung  # the killed batch's items ran again in the second worker
    for job_id in hung:
        assert any(run[0] == "end" and run[2] == second.pid for run in runs[job_id])
    seventh = [i for n, i in enumerate(ids) if n % 7 == 3]
    for job_id in seventh:  # retried on its own, its batch-mates acked
        assert max(run[1] for run in runs[job_id]) >= 2
