"""The limited claim (core/limited_claim.py) against a tiny in-memory queue."""

from __future__ import annotations

import asyncio
from typing import Any

from alkstore.core.flow import CANDIDATE_WINDOW, Claimed
from alkstore.core.limited_claim import limited_claim
from alkstore.core.steps import Rows, run_steps, run_steps_sync

NOW = 1000.0


class Queue:
    """One queue's settings row, pending jobs ``(id, partition_key)`` and running claims."""

    def __init__(self, settings: dict[str, Any] | None = None, jobs: int = 10) -> None:
        self.settings = settings
        self.pending: list[tuple[int, str | None]] = [(i, None) for i in range(1, jobs + 1)]
        self.running: list[str | None] = []
        self.tat: float | None = None if settings is None else settings.get("tat")
        self.steps: list[tuple[str, dict[str, Any]]] = []

    def row(self) -> tuple[Any, ...]:
        s = self.settings or {}
        return (
            "q",
            s.get("paused", False),
            s.get("concurrency"),
            s.get("partition_concurrency"),
            s.get("rate_count"),
            s.get("rate_period_s"),
            s.get("burst"),
            self.tat,
            s.get("fair", False),
            s.get("aging_s"),
            NOW,
        )

    def take(self, ids: list[int]) -> Rows:
        taken = [job for job in self.pending if job[0] in ids]
        self.pending = [job for job in self.pending if job[0] not in ids]
        self.running.extend(key for _, key in taken)
        return [(job_id,) for job_id, _ in taken]

    def step(self, name: str, params: dict[str, Any]) -> Rows:
        self.steps.append((name, params))
        if name == "settings":
            return [] if self.settings is None else [self.row()]
        if name == "count_running":
            return [(len(self.running),)]
        if name == "claim":
            return self.take([job_id for job_id, _ in self.pending[: params["n"]]])
        if name == "claim_candidates":
            return list(self.pending[: params["window"]])
        if name == "running_partitions":
            keys = {k for k in self.running if k is not None}
            return [(k, self.running.count(k)) for k in sorted(keys)]
        if name == "claim_ids":
            return self.take(params["ids"])
        if name == "set_tat":
            self.tat = params["tat"]
            return []
        raise AssertionError(name)

    def names(self) -> list[str]:
        return [name for name, _ in self.steps]


def claim(queue: Queue, n: int) -> Claimed:
    return run_steps_sync(limited_claim(n), queue.step)


def ids(claimed: Claimed) -> list[int]:
    return [row[0] for row in claimed.rows]


def test_a_queue_without_settings_is_one_plain_claim() -> None:
    queue = Queue()
    got = claim(queue, 3)
    assert ids(got) == [1, 2, 3] and not got.limited and got.hold_s is None
    assert queue.steps == [("settings", {}), ("claim", {"n": 3})]


def test_settings_without_limits_claim_plainly_and_report_unlimited() -> None:
    queue = Queue({})
    got = claim(queue, 2)
    assert ids(got) == [1, 2] and not got.limited
    assert queue.names() == ["settings", "claim"]


def test_a_paused_queue_claims_nothing_and_says_whether_it_is_limited() -> None:
    plain = Queue({"paused": True})
    assert claim(plain, 5) == Claimed([], False)
    assert plain.names() == ["settings"]
    limited = Queue({"paused": True, "concurrency": 3})
    assert claim(limited, 5) == Claimed([], True)
    assert limited.names() == ["settings"]


def test_concurrency_claims_only_the_free_slots() -> None:
    queue = Queue({"concurrency": 5})
    queue.running = [None, None, None]
    got = claim(queue, 10)
    assert ids(got) == [1, 2] and got.limited and got.hold_s is None
    assert queue.steps == [("settings", {}), ("count_running", {}), ("claim", {"n": 2})]


def test_a_full_queue_claims_nothing_and_writes_nothing() -> None:
    queue = Queue({"concurrency": 2})
    queue.running = [None, None]
    assert claim(queue, 4) == Claimed([], True, None)
    assert queue.names() == ["settings", "count_running"]


def test_partition_limit_skips_busy_partitions_in_claim_order() -> None:
    queue = Queue({"partition_concurrency": 1}, jobs=0)
    queue.pending = [(1, "a"), (2, "a"), (3, "b"), (4, None), (5, "c")]
    queue.running = ["b"]
    got = claim(queue, 3)
    assert ids(got) == [1, 4, 5] and got.limited
    assert queue.names() == ["settings", "claim_candidates", "running_partitions", "claim_ids"]
    assert queue.steps[1][1] == {"window": 3 + CANDIDATE_WINDOW}
    assert queue.steps[3][1] == {"ids": [1, 4, 5]}


def test_partition_limit_within_concurrency_asks_for_the_admitted_number() -> None:
    queue = Queue({"concurrency": 2, "partition_concurrency": 5})
    got = claim(queue, 10)
    assert ids(got) == [1, 2]
    assert queue.steps[2] == ("claim_candidates", {"window": 2 + CANDIDATE_WINDOW})


def test_no_candidate_with_room_claims_nothing() -> None:
    queue = Queue({"partition_concurrency": 1}, jobs=0)
    queue.pending = [(1, "a"), (2, "a")]
    queue.running = ["a"]
    assert claim(queue, 2) == Claimed([], True, None)
    assert "claim_ids" not in queue.names()


def test_the_rate_caps_a_claim_and_says_when_the_next_is_allowed() -> None:
    queue = Queue({"rate_count": 2, "rate_period_s": 1.0})
    got = claim(queue, 5)
    assert ids(got) == [1]  # burst 1: one claim now, the next 0.5 s later
    assert got.hold_s == 0.5
    assert queue.steps[-1] == ("set_tat", {"tat": NOW + 0.5})
    assert queue.tat == NOW + 0.5
    again = claim(queue, 5)
    assert again == Claimed([], True, 0.5)  # none admitted: no claim, tat untouched
    assert queue.names()[-1] == "settings" and queue.tat == NOW + 0.5


def test_a_claim_within_the_rate_is_not_held_back_but_spends_it() -> None:
    queue = Queue({"rate_count": 10, "rate_period_s": 1.0, "burst": 5})
    got = claim(queue, 3)
    assert ids(got) == [1, 2, 3] and got.hold_s is None
    assert queue.tat == NOW + 0.3


def test_the_async_driver_runs_the_same_flow() -> None:
    queue = Queue({"concurrency": 1})

    async def step(name: str, params: dict[str, Any]) -> Rows:
        return queue.step(name, params)

    got = asyncio.run(run_steps(limited_claim(3), step))
    assert ids(got) == [1] and got.limited
