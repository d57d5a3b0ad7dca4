"""Fair claiming's arithmetic (core/fair.py): finish tags, head limits, cursor moves."""

from __future__ import annotations

from typing import Any

from alkstore.core.fair import Cursor, advance, fair_claim, head_limits, plan
from alkstore.core.steps import Rows, run_steps_sync


def test_plan_orders_heads_by_finish_tag_with_ties_in_cursor_order() -> None:
    cursors = [Cursor("a", 0.0, 1.0), Cursor("b", 0.0, 2.0), Cursor("c", 5.0, 1.0)]
    heads = [("a", 1, True), ("a", 2, True), ("b", 3, True), ("b", 4, True), ("c", 5, True)]
    fair = plan(cursors, heads)
    # tags: a 1, 2; b 0.5, 1; c 6
    assert [job for job, _ in fair.order] == [3, 1, 4, 2, 5]
    assert fair.idle == [] and fair.pruned == []


def test_keys_without_due_jobs_are_idle_or_pruned() -> None:
    cursors = [Cursor("a", 1.0, 1.0), Cursor("b", 0.0, 1.0), Cursor("c", 0.0, 1.0)]
    fair = plan(cursors, [("a", 7, True), ("b", None, True), ("c", None, False)])
    assert fair.idle == ["b"] and fair.pruned == ["c"]
    keys, vtimes = advance(cursors, fair, [7])
    # a served once; b had nothing due: it moves to the claim's virtual time, banking nothing
    assert dict(zip(keys, vtimes, strict=True)) == {"a": 2.0, "b": 2.0}


def test_only_claimed_jobs_advance_a_key() -> None:
    cursors = [Cursor("a", 0.0, 4.0)]
    fair = plan(cursors, [("a", 1, True), ("a", 2, True), ("a", 3, True)])
    assert advance(cursors, fair, [1, 2]) == (["a"], [0.5])


def test_head_limits_are_each_keys_share_of_the_smallest_finish_tags() -> None:
    cursors = [Cursor("a", 0, 1.0), Cursor("b", 0, 1.0), Cursor("c", 0, 8.0)]
    # n + FAIR_SPARE (2) = 12 slots: c's tags 1/8 .. 7/8, then 1.0 for a, b, c (cursor
    # order), then c's 9/8 and 10/8
    assert head_limits(cursors, 10) == [1, 1, 10]
    assert head_limits([Cursor("a", 0, 1.0)], 1) == [1]  # never more than the claim


def test_keys_beyond_the_claims_turns_are_not_read() -> None:
    cursors = [Cursor(f"k{i}", i * 0.05, 1.0) for i in range(18)]  # n + FAIR_SLACK read
    limits = head_limits(cursors, 10)
    assert limits == [1] * 12 + [0] * 6  # 12 turns: one each for the first 12 keys
    steps = _Fake({f"k{i}": [i * 10 + 1, i * 10 + 2] for i in range(18)}, unkeyed=[])
    steps.vtime = {c.key: c.vtime for c in cursors}
    got = run_steps_sync(fair_claim(10, None), steps.step)
    assert [row[0] for row in got] == [i * 10 + 1 for i in range(10)]
    assert steps.read == [f"k{i}" for i in range(12)]


class _Fake:
    """Steps of a fair claim against lists: key -> pending ids; plain order for the rest."""

    def __init__(self, jobs: dict[str, list[int]], unkeyed: list[int]) -> None:
        self.jobs = jobs
        self.unkeyed = unkeyed
        self.vtime = dict.fromkeys(jobs, 0.0)
        self.steps: list[str] = []
        self.read: list[str] = []  # the keys fair_heads was asked for

    def step(self, name: str, params: dict[str, Any]) -> Rows:
        self.steps.append(name)
        if name == "fair_cursors_wait":
            return []
        if name == "fair_cursors":
            ordered = sorted(self.vtime, key=lambda k: (self.vtime[k], k))
            return [(k, self.vtime[k], 1.0) for k in ordered[: params["window"]]]
        if name == "fair_heads":
            self.read += params["keys"]
            rows: Rows = []
            for key, lim in zip(params["keys"], params["limits"], strict=True):
                ids = self.jobs[key][:lim]
                rows += [(key, i, True) for i in ids] or [(key, None, False)]
            return rows
        if name == "claim_ids":
            for key in self.jobs:
                self.jobs[key] = [i for i in self.jobs[key] if i not in params["ids"]]
            return [(i,) for i in params["ids"]]
        if name == "fair_update":
            self.vtime.update(zip(params["keys"], params["vtimes"], strict=True))
            for key in params["pruned"]:
                del self.vtime[key]
            return []
        if name == "claim":
            taken, self.unkeyed = self.unkeyed[: params["n"]], self.unkeyed[params["n"] :]
            return [(i,) for i in taken]
        raise AssertionError(name)


def test_the_plain_order_fills_what_the_keys_cannot_give() -> None:
    fake = _Fake({"a": [1, 2], "b": [3]}, unkeyed=[9, 10])
    got = run_steps_sync(fair_claim(5, None), fake.step)
    assert [row[0] for row in got] == [1, 3, 2, 9, 10]
    assert fake.steps == ["fair_cursors", "fair_heads", "claim_ids", "fair_update", "claim"]
    run_steps_sync(fair_claim(1, None), fake.step)
    assert fake.vtime == {}  # both keys found empty: their cursors dropped
