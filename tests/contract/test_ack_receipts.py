"""Ack receipts: a retried ack batch learns which of its claims an earlier attempt
acked (docs/contract.md, "Ack receipts"); a row that is merely gone proves nothing."""

from __future__ import annotations

import alkstore
from alkstore import QueueOpts

from .conftest import Clock

SHORT = 5.0


async def test_a_retry_of_a_committed_batch_answers_for_the_first_attempt(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    await q.enqueue_many([{"n": i} for i in range(3)])
    handles = await q.claim_batch("w", 3)
    assert await store._ack_receipted(handles, "w", "t1") == [True] * 3
    for handle in handles:
        handle._consumed = False  # as after a reply lost on the way back
    # the retry deletes nothing, yet each claim is proven acked by the first attempt
    assert await store._ack_receipted(handles, "w", "t1") == [True] * 3
    # a new batch token: the same rows gone prove nothing for it
    for handle in handles:
        handle._consumed = False
    assert await store._ack_receipted(handles, "w", "t2") == [False] * 3


async def test_a_gone_row_acked_by_another_claim_is_not_ours(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    """The first attempt never committed; the claim lapsed, another worker reclaimed
    and acked the job: the retry must answer False for it, not True."""
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT))
    await q.enqueue_many([{"n": i} for i in range(2)])
    mine = await q.claim_batch("w", 2)
    clock.advance(SHORT + 1)
    theirs = await q.claim_batch("other", 1)  # one of the two, reclaimed
    assert await store._ack_receipted(theirs, "other", "x") == [True]
    clock.advance(-(SHORT + 1))  # back inside our claims' deadline: only the fence decides
    answers = await store._ack_receipted(mine, "w", "t1")
    taken = theirs[0].job.id
    assert answers == [h.job.id != taken for h in mine]


async def test_a_partly_refused_batch_keeps_its_refusals_across_attempts(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname, QueueOpts(visibility_timeout_s=SHORT))
    await q.enqueue_many([{"n": i} for i in range(3)])
    stale = await q.claim_batch("w", 3)
    clock.advance(SHORT + 1)
    fresh = await q.claim_batch("other", 1)  # attempt 2 of one job: ours is refused
    clock.advance(-(SHORT + 1))
    first = await store._ack_receipted(stale, "w", "t1")
    taken = fresh[0].job.id
    assert first == [h.job.id != taken for h in stale]
    assert await store._ack_receipted(fresh, "other", "y") == [True]
    for handle in stale:
        handle._consumed = False
    assert await store._ack_receipted(stale, "w", "t1") == first


async def test_receipts_are_dropped_by_owner_and_by_age(
    store: alkstore.Store, clock: Clock, qname: str
) -> None:
    q = store.queue(qname)
    await q.enqueue_many([{"n": i} for i in range(2)])
    a, b = await q.claim_batch("w", 2)
    assert await store._ack_receipted([a], "w1", "t") == [True]
    assert await store._ack_receipted([b], "w2", "t") == [True]
    await store._drop_ack_receipts("w1", 3600)
    a._consumed = b._consumed = False
    assert await store._ack_receipted([a], "w1", "t") == [False]  # w1's receipt is gone
    clock.advance(7200)
    await store._drop_ack_receipts("nobody", 3600)  # w2's is old: gone too
    assert await store._ack_receipted([b], "w2", "t") == [False]
