"""A per-store cap on payload and kept-result size, checked before any write
(issue #21: a 50 MB payload was accepted, and `jobs show` then took 17 s)."""

from __future__ import annotations

from typing import Any

import pytest

import alkstore
from alkstore import EnqueueOpts, PayloadTooLargeError

MIB = 1 << 20


async def _count(store: alkstore.Store, queue: str) -> int:
    return len(await store.admin().list_jobs(queue))


async def test_the_default_limit_is_one_mib_on_every_enqueue_path(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    assert store.max_payload_bytes == MIB
    await q.enqueue(b"x" * MIB)  # at the limit: accepted
    big = b"x" * (MIB + 1)
    with pytest.raises(PayloadTooLargeError) as e:
        await q.enqueue(big)
    assert (e.value.size, e.value.limit) == (MIB + 1, MIB)
    assert "1,048,577 bytes" in str(e.value) and "1,048,576 bytes" in str(e.value)
    assert isinstance(e.value, alkstore.PayloadError)
    with pytest.raises(PayloadTooLargeError):
        await q.enqueue({"text": "é" * MIB})  # counted in encoded bytes, not characters
    with pytest.raises(PayloadTooLargeError):
        await q.enqueue(big, EnqueueOpts(dedupe_key="k"))
    with pytest.raises(PayloadTooLargeError):
        await q.enqueue_many(["small", big])  # one too large: none written
    with pytest.raises(PayloadTooLargeError):
        await q.enqueue_many_unique(["small", big], dedupe_keys=["a", "b"])
    with pytest.raises(PayloadTooLargeError):
        async with store.transaction() as tx:
            await tx.queue(qname).enqueue("small")
            await tx.queue(qname).enqueue(big)
    assert await _count(store, qname) == 1  # only the one at the limit


async def test_the_limit_is_a_store_option(open_store: Any, qname: str) -> None:
    small = await open_store(max_payload_bytes=100)
    await small.queue(qname).enqueue("x" * 100)
    with pytest.raises(PayloadTooLargeError, match="101 bytes"):
        await small.queue(qname).enqueue("x" * 101)
    unlimited = await open_store(max_payload_bytes=None)
    await unlimited.queue(qname).enqueue(b"x" * (2 * MIB))
    assert await _count(unlimited, qname) == 2
    for bad in (0, -1, 1.5, "1MB", True, 2**31):
        with pytest.raises(alkstore.InvalidArgumentError, match="max_payload_bytes"):
            await open_store(max_payload_bytes=bad)


async def test_a_kept_result_past_the_limit_is_refused_and_nothing_written(
    open_store: Any, qname: str
) -> None:
    store = await open_store(max_payload_bytes=1000)
    q = store.queue(qname)
    job_id = await q.enqueue("x")
    handle = await q.claim_one("w")
    assert handle is not None
    with pytest.raises(PayloadTooLargeError, match="result of 1,002 bytes"):
        await handle.ack_result("y" * 1000, 60)  # a JSON string: 1,002 bytes
    job = await q.get_job(job_id)
    assert job is not None and job.state == "processing"  # untouched
    assert await handle.ack_result("y" * 10, 60)  # the handle is still usable
    assert await q.result(job_id, 5) == "y" * 10
