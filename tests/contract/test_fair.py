"""Fair queues on every engine: round-robin claims across partition keys (weighted,
stored in the database, enforced in the claim), and what stays as it was."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import EnqueueOpts

from .conftest import Clock


def _key(opts_key: str) -> EnqueueOpts:
    return EnqueueOpts(partition_key=opts_key)


async def _fill(q: alkstore.Queue, counts: dict[str, int]) -> dict[int, str]:
    """Enqueue ``counts[key]`` jobs per key (in the dict's order); job id -> key."""
    keys: dict[int, str] = {}
    for key, count in counts.items():
        for job_id in await q.enqueue_many([f"{key}{i}" for i in range(count)], _key(key)):
            keys[job_id] = key
    return keys


async def _claim_keys(
    q: alkstore.Queue, keys: dict[int, str], claims: int, n: int = 1
) -> list[str]:
    """The keys of the jobs ``claims`` claims of ``n`` take, in claim order (acked at once)."""
    order: list[str] = []
    for _ in range(claims):
        handles = await q.claim_batch("w", n)
        for h in handles:
            order.append(keys[h.job.id])
            assert await h.ack()
    return order


async def test_fair_claims_take_keys_round_robin_instead_of_the_backlog_order(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    keys = await _fill(q, {"a": 30, "b": 4, "c": 4})
    await q.set_fair()
    assert (await q.settings()).fair
    order = await _claim_keys(q, keys, 12)
    assert order == ["a", "b", "c"] * 4  # every key one turn per round, ties by key
    assert await _claim_keys(q, keys, 3) == ["a", "a", "a"]  # only a is left


async def test_without_fairness_the_big_key_runs_first(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    keys = await _fill(q, {"a": 30, "b": 4, "c": 4})
    assert await _claim_keys(q, keys, 30) == ["a"] * 30
    await q.set_fair()
    await q.set_fair(False)  # off again: the plain order
    assert set(await _claim_keys(q, keys, 8)) == {"b", "c"}


async def test_a_batch_claim_is_spread_across_keys(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    keys = await _fill(q, {"a": 40, "b": 10, "c": 10, "d": 10})
    await q.set_fair()
    for _ in range(3):
        batch = await _claim_keys(q, keys, 1, n=8)
        assert sorted(batch) == ["a", "a", "b", "b", "c", "c", "d", "d"]


async def test_weights_give_a_key_more_turns(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    keys = await _fill(q, {"a": 30, "b": 30})
    await q.set_fair(weights={"a": 3})
    assert await q.fair_weights() == {"a": 3.0}
    order = await _claim_keys(q, keys, 16)
    assert order.count("a") == 12 and order.count("b") == 4
    await q.set_fair(weights={})  # weights replaced: none left, every key weighs 1
    assert await q.fair_weights() == {}
    order = await _claim_keys(q, keys, 8)
    assert order.count("a") == 4 and order.count("b") == 4


async def test_priority_still_orders_jobs_within_a_key(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.set_fair()
    low = await q.enqueue("low", EnqueueOpts(partition_key="a", priority=0))
    high = await q.enqueue("high", EnqueueOpts(partition_key="a", priority=5))
    other = await q.enqueue("other", EnqueueOpts(partition_key="b", priority=-5))
    got = [h.job.id for h in await q.claim_batch("w", 1)]
    got += [h.job.id for h in await q.claim_batch("w", 1)]
    got += [h.job.id for h in await q.claim_batch("w", 1)]
    assert got == [high, other, low]


async def test_a_key_that_arrives_late_banks_no_credit(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    await q.set_fair()
    keys = await _fill(q, {"a": 40})
    assert await _claim_keys(q, keys, 20) == ["a"] * 20
    keys.update(await _fill(q, {"b": 20}))  # b starts where a is now, not at zero
    order = await _claim_keys(q, keys, 10)
    assert order.count("a") == 5 and order.count("b") == 5


async def test_an_idle_key_loses_its_turn_and_a_drained_key_is_forgotten(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    q = store.queue(qname)
    await q.set_fair()
    keys = await _fill(q, {"a": 10, "b": 1})
    b_late = await q.enqueue("b-late", EnqueueOpts(partition_key="b", delay_s=30))
    keys[b_late] = "b"
    assert await _claim_keys(q, keys, 6) == ["a", "b", "a", "a", "a", "a"]
    clock.advance(31)  # b's delayed job is due: b takes a turn again, no catching up
    order = await _claim_keys(q, keys, 3)
    assert order.count("b") == 1
    await _claim_keys(q, keys, 5)
    assert await q.claim_one("w") is None
    keys.update(await _fill(q, {"c": 2, "a": 2}))  # keys come back after draining
    assert sorted(await _claim_keys(q, keys, 4)) == ["a", "a", "c", "c"]


async def test_switching_fairness_on_sees_the_backlog_already_there(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    keys = await _fill(q, {"a": 20, "b": 3})
    unkeyed = await q.enqueue("no key")
    await q.set_fair()
    assert await _claim_keys(q, keys, 6) == ["a", "b", "a", "b", "a", "b"]
    rest = [h.job.id for h in await q.claim_batch("w", 100)]
    assert unkeyed in rest and len(rest) == 18  # a job without a key still runs


async def test_a_lapsed_claim_of_a_fair_queue_is_taken_over(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    q = store.queue(qname, alkstore.QueueOpts(visibility_timeout_s=5))
    await q.set_fair()
    job = await q.enqueue("x", EnqueueOpts(partition_key="a"))
    first = await q.claim_one("w1")
    assert first is not None and first.job.id == job
    assert await q.claim_one("w2") is None
    clock.advance(6)
    again = await q.claim_one("w2")
    assert again is not None and again.job.id == job and again.job.attempts == 2


async def test_fairness_within_limits_keeps_the_partition_limit(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    keys = await _fill(q, {"a": 10, "b": 10})
    await q.set_fair()
    await q.set_limits(partition_concurrency=2, concurrency=10)
    batch = await q.claim_batch("w", 10)
    assert sorted(keys[h.job.id] for h in batch) == ["a", "a", "b", "b"]
    settings = await q.settings()
    assert settings.fair and settings.partition_concurrency == 2


async def test_a_requeued_dead_job_of_a_fair_queue_runs_again(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname, alkstore.QueueOpts(max_attempts=1))
    await q.set_fair()
    job = await q.enqueue("x", EnqueueOpts(partition_key="a"))
    handle = await q.claim_one("w")
    assert handle is not None and await handle.fail("boom")
    assert await q.claim_one("w") is None  # the claim that found nothing dropped a's cursor
    await q.enqueue_many(["b"] * 5, EnqueueOpts(partition_key="b"))
    assert await store.admin().requeue(job)  # a's cursor is back: a gets its turn
    turns = [h.job.id for h in await q.claim_batch("w", 1) + await q.claim_batch("w", 1)]
    assert job in turns


@pytest.mark.parametrize(
    ("fair", "weights", "match"),
    [
        ("yes", None, "fair must be True or False"),
        (True, {"a": 0}, "weight of partition key 'a'"),
        (True, {"a": float("nan")}, "weight of partition key 'a'"),
        (True, {"": 1}, "partition key"),
        (True, ["a"], "weights must be a dict"),
    ],
)
async def test_bad_fair_settings_are_refused_naming_the_value(
    store: alkstore.Store, qname: str, fair: object, weights: object, match: str
) -> None:
    with pytest.raises(alkstore.InvalidArgumentError, match=match):
        await store.queue(qname).set_fair(fair, weights=weights)  # type: ignore[arg-type]


async def test_a_queue_claimed_fair_follows_a_change_of_its_settings(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    keys = await _fill(q, {"a": 10, "b": 10})
    await q.set_fair()
    assert await _claim_keys(q, keys, 2) == ["a", "b"]  # the store now claims it as fair
    await q.pause()
    assert await q.claim_one("w") is None
    await q.resume()
    await q.set_limits(partition_concurrency=1)  # fair with limits: the limit holds
    held = await q.claim_batch("w", 10)
    assert sorted(keys[h.job.id] for h in held) == ["a", "b"]
    for h in held:
        assert await h.ack()
    await q.set_limits()
    await q.set_fair(False)  # the plain order again
    assert await _claim_keys(q, keys, 3) == ["a", "a", "a"]


async def test_queue_info_and_the_queue_list_show_fairness_weights_and_aging(
    store: alkstore.Store, qname: str
) -> None:
    q, other = store.queue(qname), store.queue(qname + "x")
    await q.enqueue(b"x", EnqueueOpts(partition_key="acme"))
    await other.enqueue(b"y")
    plain = await q.info()
    assert (plain.fair, plain.weights, plain.aging_s) == (False, 0, None)
    await q.set_fair(weights={"acme": 3, "b": 0.5})
    await q.set_aging(30)
    info = await q.info()
    assert (info.fair, info.weights, info.aging_s) == (True, 2, 30.0)
    listed = {i.queue: i for i in await store.admin().queues()}
    assert listed[qname] == info
    assert (listed[qname + "x"].fair, listed[qname + "x"].aging_s) == (False, None)
