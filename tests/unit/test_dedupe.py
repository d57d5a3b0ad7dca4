"""The keyed-enqueue steps (core/dedupe.py) against a tiny in-memory store."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from alkstore.core.dedupe import Enqueued, check_dedupe_key, keyed_enqueue, run_flow_sync
from alkstore.errors import EngineError, InvalidArgumentError


class Memory:
    """Live keys and windows, like the engines' tables; ``vanish`` drops a live key
    between the insert and the lookup (the holder was acked in between)."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.live: dict[str, int] = {}
        self.windows: dict[str, int] = {}
        self.vanish: set[str] = set()
        self.steps: list[str] = []

    def step(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        self.steps.append(name)
        keys = params.get("keys", [])
        if name == "insert":
            rows: list[tuple[Any, ...]] = []
            for key in keys:
                if key is not None and key in self.live:
                    continue
                job = next(self.ids)
                rows.append((job, key))
                if key is not None:
                    self.live[key] = job
            return rows
        if name == "live_keys":
            for key in self.vanish & set(keys):
                self.live.pop(key, None)
                self.vanish.discard(key)
            return [(k, self.live[k]) for k in keys if k in self.live]
        if name == "take_windows":
            fresh = [k for k in keys if k not in self.windows]
            for k in fresh:
                self.windows[k] = 0
            return [(k,) for k in fresh]
        if name == "window_jobs":
            return [(k, self.windows[k]) for k in keys if k in self.windows]
        if name == "set_window_jobs":
            self.windows.update(zip(keys, params["ids"], strict=True))
            return []
        raise AssertionError(name)


def run(mem: Memory, keys: list[str | None], window: float | None = None) -> list[Enqueued]:
    payloads = [b"p"] * len(keys)
    return run_flow_sync(keyed_enqueue(payloads, keys, window), mem.step)


def test_repeats_in_one_batch_are_duplicates_of_the_first() -> None:
    mem = Memory()
    got = run(mem, ["a", None, "a", "b", None])
    assert got == [(1, False), (2, False), (1, True), (3, False), (4, False)]


def test_a_live_key_answers_its_job() -> None:
    mem = Memory()
    run(mem, ["a"])
    assert run(mem, ["a", "b"]) == [(1, True), (2, False)]


def test_a_holder_that_vanishes_before_the_lookup_is_inserted_again() -> None:
    mem = Memory()
    run(mem, ["a"])
    mem.vanish = {"a"}
    assert run(mem, ["a"]) == [(2, False)]
    assert mem.steps[-3:] == ["insert", "live_keys", "insert"]


def test_a_window_holds_the_key_and_points_at_its_job() -> None:
    mem = Memory()
    assert run(mem, ["t"], 60) == [(1, False)]
    assert mem.windows == {"t": 1}
    mem.live.clear()  # the job was acked
    assert run(mem, ["t"], 60) == [(1, True)]


def test_a_key_that_never_settles_raises_instead_of_looping() -> None:
    def stuck(name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return []  # every insert conflicts and every lookup misses

    with pytest.raises(EngineError, match="kept changing hands"):
        run_flow_sync(keyed_enqueue([b"p"], ["a"], None), stuck)


@pytest.mark.parametrize("bad", ["", 1, None, "x" * 513, "a\x00", "\udc80"])
def test_bad_keys_are_refused(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="dedupe_key"):
        check_dedupe_key("dedupe_key", bad)
