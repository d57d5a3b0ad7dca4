"""The claim order of a fair queue is the one ``core.fair`` states, on every engine.

A reference store in memory answers ``core.fair.fair_claim``'s steps (the rule,
run as written); each engine's claims must take exactly the batches it takes on
the same scenario. SQLite runs those steps; PostgreSQL's one-statement claim
(``fair_claim`` in queries.sql) must implement the same order, so the two
engines agree with each other by agreeing with it.
"""

from __future__ import annotations

from typing import Any

import alkstore
from alkstore import EnqueueOpts
from alkstore.core.fair import fair_claim
from alkstore.core.steps import Rows, run_steps_sync

from .conftest import Clock

WEIGHTS = {"a": 3.0, "b": 0.5, "c": 1.5}


class Reference:
    """Jobs, key cursors and weights in memory, answering ``fair_claim``'s steps."""

    def __init__(self, weights: dict[str, float] = WEIGHTS) -> None:
        self.weights = weights
        self.jobs: dict[int, tuple[str | None, int]] = {}  # id -> (key, priority)
        self.running: set[int] = set()
        self.cursors: dict[str, float] = {}

    def enqueue(self, ids: list[int], key: str | None, priority: int) -> None:
        for job_id in ids:
            self.jobs[job_id] = (key, priority)
        if key is not None and key not in self.cursors:
            self.cursors[key] = min(self.cursors.values(), default=0.0)

    def _due(self, key: Any = ...) -> list[int]:
        ids = [i for i, (k, _) in self.jobs.items() if i not in self.running]
        ids = [i for i in ids if key is ... or self.jobs[i][0] == key]
        return sorted(ids, key=lambda i: (-self.jobs[i][1], i))

    def _take(self, ids: list[int]) -> Rows:
        self.running.update(ids)
        return [(i,) for i in ids]

    def step(self, name: str, params: dict[str, Any]) -> Rows:
        if name in ("fair_cursors", "fair_cursors_wait"):
            order = sorted(self.cursors.items(), key=lambda kv: (kv[1], kv[0]))
            return [(k, v, self.weights.get(k, 1.0)) for k, v in order[: params["window"]]]
        if name == "fair_heads":
            rows: Rows = []
            for key, limit in zip(params["keys"], params["limits"], strict=True):
                heads = self._due(key)[:limit]
                live = any(k == key for k, _ in self.jobs.values())
                rows += [(key, i, True) for i in heads] or [(key, None, live)]
            return rows
        if name == "claim_ids":
            return self._take(list(params["ids"]))
        if name == "claim":
            return self._take(self._due()[: params["n"]])
        if name == "fair_update":
            self.cursors.update(zip(params["keys"], params["vtimes"], strict=True))
            for key in params["pruned"]:
                del self.cursors[key]
            return []
        raise AssertionError(f"unexpected step {name}")

    def claim(self, n: int) -> list[int]:
        return sorted(int(row[0]) for row in run_steps_sync(fair_claim(n, None), self.step))

    def ack(self, ids: list[int]) -> None:
        for job_id in ids:
            del self.jobs[job_id]
            self.running.discard(job_id)


async def test_fair_claims_take_the_batches_core_fair_states(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    q = store.queue(qname)
    ref = Reference()

    async def enqueue(key: str | None, count: int, priority: int = 0) -> None:
        opts = EnqueueOpts(partition_key=key, priority=priority)
        ref.enqueue(await q.enqueue_many([f"{key}"] * count, opts), key, priority)

    await enqueue("a", 20)
    await enqueue("a", 10, priority=2)
    await enqueue("b", 25)
    await enqueue("c", 8, priority=1)
    await enqueue("c", 4)
    await enqueue("d", 2)
    await enqueue(None, 3, priority=5)  # what the plain order takes first
    await q.set_fair(weights=WEIGHTS)
    held: list[int] = []  # d's jobs stay running: d becomes an idle key, then a drained one
    for turn, n in enumerate([1, 3, 7, 2, 5, 1, 4, 6, 9, 3, 8, 20, 20, 20]):
        if turn == 5:
            await enqueue("e", 6, priority=1)  # a late key starts at the smallest vtime
        if turn == 7:
            await enqueue("d", 4)  # d was idle: it comes back with no credit banked
        if turn == 12:
            ref.ack(held)
            assert await q.ack_batch(held) == len(held)
            held = []
        handles = await q.claim_batch("w", n)
        got = sorted(h.job.id for h in handles)
        assert got == ref.claim(n), f"claim {turn} of {n}"
        acked = [i for i in got if ref.jobs[i][0] != "d" or turn >= 12]
        held += [i for i in got if i not in acked]
        ref.ack(acked)
        if acked:
            assert await q.ack_batch(acked) == len(acked)
    assert not ref.jobs and await q.claim_one("w") is None


async def test_fair_claims_over_many_weighted_keys_take_the_batches_core_fair_states(
    store: alkstore.Store, qname: str, clock: Clock
) -> None:
    """More keys than a claim reads (so a claim probes only the keys of its smallest
    finish tags), weighted unevenly, some drained early: the same batches as the rule."""
    weights = {f"k{i:02}": (0.5, 1.0, 2.0, 3.0, 0.25, 1.5)[i % 6] for i in range(30)}
    q = store.queue(qname)
    ref = Reference(weights)
    for i in range(30):
        key = f"k{i:02}"
        for priority, count in ((0, 2 + i % 5), (1, i % 3)):
            if count:
                opts = EnqueueOpts(partition_key=key, priority=priority)
                ids = await q.enqueue_many([key] * count, opts)
                ref.enqueue(ids, key, priority)
    await q.set_fair(weights=weights)
    for turn, n in enumerate([1, 12, 3, 20, 7, 1, 15, 9, 30, 4, 25, 40, 40]):
        handles = await q.claim_batch("w", n)
        got = sorted(h.job.id for h in handles)
        assert got == ref.claim(n), f"claim {turn} of {n}"
        ref.ack(got)
        if got:
            assert await q.ack_batch(got) == len(got)
    assert not ref.jobs and await q.claim_one("w") is None
