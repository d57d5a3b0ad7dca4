"""The one claim loop (alkstore/consume.py) behind ``Queue.jobs()`` and the Worker.

A failed claim — the database locked past the busy timeout, its connections
terminated — backs off and claims again; it never ends the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from alkstore.consume import ClaimLoop, backoff_s

from .rawsql import claims_refused, fail_fast_options


async def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)  # polling a condition, not waiting out a duration


def _loops(store) -> list[ClaimLoop]:  # type: ignore[no-untyped-def]
    return list(store._loops)


def test_the_backoff_doubles_from_a_fifth_of_a_second_to_five() -> None:
    assert [backoff_s(n) for n in (1, 2, 3, 5, 6, 50)] == [0.2, 0.4, 0.8, 3.2, 5.0, 5.0]


async def test_jobs_backs_off_after_failed_claims_and_resumes(
    open_store, target, qname: str, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    producer = await open_store()
    consumer = await open_store(**fail_fast_options(target))
    job_id = await producer.queue(qname).enqueue(b"waiting")
    q = consumer.queue(qname)
    assert await q.get_job(job_id) is not None  # the consumer's connection is in use
    got: asyncio.Queue[int] = asyncio.Queue()

    async def consume() -> None:
        async for handle in q.jobs("resilient", poll_interval_s=3600):
            await got.put(handle.job.id)
            await handle.ack()

    caplog.set_level(logging.WARNING, logger="alkstore.consume")
    async with claims_refused(target, target.url):
        task = asyncio.create_task(consume())  # its first claim meets the refusing database
        await _until(lambda: any(loop.failures for loop in _loops(consumer)) or task.done())
        assert not task.done(), task  # a failed claim did not end the loop
    try:
        assert await asyncio.wait_for(got.get(), 30) == job_id
        assert "claim failed" in caplog.text
        await _until(lambda: any(loop.idle.is_set() for loop in _loops(consumer)))
        assert [loop.failures for loop in _loops(consumer)] == [0]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_idle_consumer_resumes_after_its_connections_are_refused(
    open_store, target, qname: str
) -> None:  # type: ignore[no-untyped-def]
    consumer = await open_store(**fail_fast_options(target))
    q = consumer.queue(qname)
    got: asyncio.Queue[int] = asyncio.Queue()

    async def consume() -> None:
        async for handle in q.jobs("idle", poll_interval_s=0.2):
            await got.put(handle.job.id)
            await handle.ack()

    task = asyncio.create_task(consume())
    try:
        await _until(lambda: any(loop.idle.is_set() for loop in _loops(consumer)))
        async with claims_refused(target, target.url):
            # the re-poll now claims against a refusing database, again and again
            await _until(lambda: any(loop.failures for loop in _loops(consumer)) or task.done())
            assert not task.done(), task
        producer = await open_store()
        job_id = await producer.queue(qname).enqueue(b"after")
        assert await asyncio.wait_for(got.get(), 30) == job_id
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
