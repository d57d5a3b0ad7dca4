"""Producers outside a long-lived event loop: blocking defer from threads, and
repeated ``asyncio.run`` calls that neither hang nor leak file descriptors."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import alkstore


def _open_fds() -> int:
    gc.collect()  # a socket psycopg dropped mid-connect is closed by its collection
    return len(os.listdir("/proc/self/fd"))


def _app(target: Any) -> tuple[alkstore.App, alkstore.Task[[int], None]]:
    app = alkstore.App(target.url, **target.connect_kwargs())

    @app.task(queue="produced", name="produced.record", max_attempts=7)
    async def record(n: int) -> None: ...

    return app, record


async def _drain(target: Any) -> list[alkstore.Job]:
    async with await alkstore.connect(target.url, **target.connect_kwargs()) as store:
        handles = await store.queue("produced").claim_batch("w", 1000)
        return [h.job for h in handles]


def test_defer_sync_needs_no_event_loop_and_works_from_threads(target: Any) -> None:
    app, record = _app(target)
    try:
        with ThreadPoolExecutor(4) as pool:
            ids = list(pool.map(lambda n: record.defer_sync(n), range(20)))
        ids.append(record.configure(priority=3).defer_sync(20))
    finally:
        app.close_sync()
    jobs = asyncio.run(_drain(target))
    assert sorted(j.id for j in jobs) == sorted(ids)
    assert {j.max_attempts for j in jobs} == {7}  # the task's own stamps
    assert sorted(j.json()["args"]["n"] for j in jobs) == list(range(21))


def test_repeated_asyncio_run_of_defer_neither_hangs_nor_leaks_fds(
    target: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A run can end while the pool still connects in the background: psycopg's pool
    # logs "error connecting" with the exception as an argument, and pytest keeps
    # every record, so the exception's frames would hold that socket open for the
    # whole test (a CI run counted 12 such records and 12 descriptors more). Not
    # created at all, the records hold nothing: the count is then alkstore's own.
    caplog.set_level(logging.ERROR, logger="psycopg.pool")
    _, record = _app(target)
    asyncio.run(record.defer(0))  # warm up imports and lazily made module state
    before = _open_fds()
    for n in range(1, 31):
        asyncio.run(record.defer(n))
    assert _open_fds() < before + 10  # 30 runs: not one descriptor (or more) per run
    assert len(asyncio.run(_drain(target))) == 31


async def test_plain_defers_reuse_one_queue_handle_per_store_and_follow_a_new_store(
    target: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, record = _app(target)
    made: list[str] = []
    real = alkstore.Store.queue

    def counted(self: alkstore.Store, name: str, opts: Any = None) -> Any:
        made.append(name)
        return real(self, name, opts)

    monkeypatch.setattr(alkstore.Store, "queue", counted)
    first = await app.connect()
    for n in range(5):
        await record.defer(n)
    assert made == ["produced"]  # validated and resolved once, not per call
    await app.close()
    with pytest.raises(alkstore.StoreClosedError):
        await record._queue_in(first).enqueue(b"{}")  # a kept handle still checks its store
    second = await app.connect()
    assert second is not first
    await record.defer(5)
    assert made == ["produced", "produced"]
    await app.close()
    jobs = await _drain(target)
    assert sorted(j.json()["args"]["n"] for j in jobs) == list(range(6))
    assert {j.max_attempts for j in jobs} == {7}
