"""Leaving ``queue.jobs(batch=N)`` early gives back what it claimed and never handed out:
pending again, the attempt uncounted (issue #21: each run of the README tour left 9
jobs processing until their visibility timeout, and burnt an attempt on each)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import alkstore
from alkstore import sync


async def _states(store: alkstore.Store, queue: str) -> list[tuple[str, int]]:
    return sorted((j.state, j.attempts) for j in await store.admin().list_jobs(queue))


async def _filled(store: alkstore.Store, queue: str) -> alkstore.Queue:
    q = store.queue(queue)
    await q.enqueue_many(range(12))
    return q


LEFT = [("pending", 0)] * 11  # the one handed out was acked; the rest untouched


async def test_break_out_of_jobs_releases_the_rest_of_the_batch(
    store: alkstore.Store, qname: str
) -> None:
    q = await _filled(store, qname)
    engine: Any = store._engine
    batches: list[int] = []
    release_batch = engine.release_batch

    async def spy(queue: str, items: Any) -> set[int]:
        batches.append(len(items))
        return await release_batch(queue, items)  # type: ignore[no-any-return]

    engine.release_batch = spy
    agen = q.jobs("w", batch=10)
    async for handle in agen:
        assert await handle.ack()
        break
    await agen.aclose()  # what leaving an `async with aclosing(...)` does
    assert await _states(store, qname) == LEFT
    assert batches == [9]  # the nine never handed out: one statement


async def test_a_collected_jobs_iterator_releases_the_rest_of_the_batch(
    store: alkstore.Store, qname: str
) -> None:
    q = await _filled(store, qname)
    async for handle in q.jobs("w", batch=10):  # as the README's tour: break, nothing more
        assert await handle.ack()
        break
    gc.collect()  # the finaliser schedules aclose() on the loop
    while await _states(store, qname) != LEFT:  # bounded by the pytest timeout
        await asyncio.sleep(0.01)  # polling for the finaliser's aclose, not a duration


async def test_closing_the_store_releases_what_an_open_iterator_holds(
    open_store: Any, qname: str
) -> None:
    store = await open_store()
    q = await _filled(store, qname)
    agen = q.jobs("w", batch=10)
    handle = await agen.__anext__()  # the iterator is suspended, still open
    assert await handle.ack()
    await store.close()
    store = await open_store()
    assert await _states(store, qname) == LEFT
    await agen.aclose()  # nothing left to give back, and no error on a closed store


def test_the_sync_twin_releases_on_break(target: Any, qname: str) -> None:
    with sync.connect(target.url, **target.connect_kwargs()) as store:
        q = store.queue(qname)
        q.enqueue_many(range(12))
        for handle in q.jobs("w", batch=10):
            assert handle.ack()
            break
        jobs = store.admin().list_jobs(qname)
    assert sorted((j.state, j.attempts) for j in jobs) == LEFT
