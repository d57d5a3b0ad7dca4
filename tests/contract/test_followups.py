"""Follow-ups staged by a running attempt: written with its fenced ack, or not at all."""

from __future__ import annotations

import alkstore
from alkstore import QueueOpts


async def _payloads(store: alkstore.Store, queue: str) -> list[str]:
    out = []
    while (h := await store.queue(queue).claim_one("check")) is not None:
        out.append(h.job.text())
        assert await h.ack()
    return out


async def test_staged_follow_ups_are_written_by_the_ack(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.enqueue("parent")
    handle = await q.claim_one("w")
    assert handle is not None
    handle.stage(qname + "f", "one")
    handle.stage(qname + "f", "two")
    assert await _payloads(store, qname + "f") == []  # nothing before the ack
    assert await handle.ack()
    assert await _payloads(store, qname + "f") == ["one", "two"]


async def test_a_refused_ack_writes_none_of_them(store: alkstore.Store, qname: str, clock) -> None:  # type: ignore[no-untyped-def]
    q = store.queue(qname, QueueOpts(visibility_timeout_s=5))
    await q.enqueue("parent")
    first = await q.claim_one("w1")
    assert first is not None
    first.stage(qname + "f", "from the first attempt")
    clock.advance(6)  # the claim lapses; another worker takes the job over
    second = await q.claim_one("w2")
    assert second is not None and second.job.id == first.job.id
    assert not await first.ack()  # the lost claim: refused ...
    assert await _payloads(store, qname + "f") == []  # ... and nothing written
    second.stage(qname + "f", "from the second attempt")
    assert await second.ack_result({"ok": True}, keep_s=60)  # with a kept result too
    assert await _payloads(store, qname + "f") == ["from the second attempt"]
    assert await q.result(second.job.id, timeout_s=5) == {"ok": True}


async def test_a_retry_drops_what_the_attempt_staged(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.enqueue("parent")
    handle = await q.claim_one("w")
    assert handle is not None
    handle.stage(qname + "f", "never")
    assert await handle.retry("again", delay_s=0)
    again = await q.claim_one("w")
    assert again is not None and await again.ack()
    assert await _payloads(store, qname + "f") == []


async def test_the_workers_batched_ack_writes_the_follow_ups_of_what_it_acked(
    store: alkstore.Store,
    qname: str,
    clock,  # type: ignore[no-untyped-def]
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=5))
    await q.enqueue_many(["a", "b"])
    stale, live = await q.claim_batch("w1", 2)
    clock.advance(3)
    assert await live.heartbeat()  # live's claim is renewed, stale's will lapse
    clock.advance(3)
    taken = await q.claim_one("w2")
    assert taken is not None and taken.job.id == stale.job.id
    stale.stage(qname + "f", "from the lost claim")
    live.stage(qname + "f", "from the live claim")
    got = await store._ack_receipted([stale, live], "w1", "token-1")
    assert got == [False, True]
    assert await _payloads(store, qname + "f") == ["from the live claim"]
