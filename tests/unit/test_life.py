"""core/life.py: how the attempt history is read back, step keys, and validation."""

from __future__ import annotations

import math

import pytest

from alkstore.core.life import (
    StepKeys,
    attempt_history,
    check_progress,
    check_step_name,
    progress_of,
    wait_key,
)
from alkstore.errors import InvalidArgumentError


def row(n: int, outcome: str, trimmed: bool = False) -> tuple[object, ...]:
    return (n, "w", "h", 1.0, 2.0, outcome, None, trimmed)


def outcomes(history: list) -> list[tuple[int, str]]:  # type: ignore[type-arg]
    return [(a.number, a.outcome) for a in history]


def test_a_missing_number_below_the_spent_attempts_is_lost() -> None:
    rows = [row(1, "retry"), row(3, "retry")]
    assert outcomes(attempt_history(rows, 4, "pending")) == [
        (1, "retry"),
        (2, "lost"),
        (3, "retry"),
        (4, "lost"),
    ]


def test_the_running_attempt_is_not_over_and_snoozes_do_not_spend() -> None:
    rows = [row(1, "snoozed"), row(1, "snoozed"), row(1, "retry")]
    assert outcomes(attempt_history(rows, 2, "processing")) == [
        (1, "snoozed"),
        (1, "snoozed"),
        (1, "retry"),
    ]


def test_rows_cut_to_the_bound_are_not_lost() -> None:
    rows = [row(5, "retry", trimmed=True), row(6, "retry")]
    assert outcomes(attempt_history(rows, 7, "pending")) == [
        (5, "retry"),
        (6, "retry"),
        (7, "lost"),
    ]


def test_the_end_stands_for_the_last_attempt_until_its_row_is_written() -> None:
    history = attempt_history([row(1, "retry")], 2, "dead", ("dead", 3.0, "boom"))
    assert outcomes(history) == [(1, "retry"), (2, "dead")]
    assert history[-1].error == "boom" and history[-1].worker_id is None
    written = attempt_history([row(1, "retry"), row(2, "dead")], 2, "dead", ("dead", 3.0, "x"))
    assert outcomes(written) == [(1, "retry"), (2, "dead")]
    assert attempt_history([], 0, None) == []


def test_step_keys_count_occurrences_per_name() -> None:
    keys = StepKeys()
    assert [keys.next(n) for n in ("a", "b", "a", "a", "b")] == ["a", "b", "a#2", "a#3", "b#2"]
    assert wait_key("approval") == "@wait:approval"


@pytest.mark.parametrize("bad", ["", "a#b", "@x", "x" * 201, "nul\x00", 3, None])
def test_step_names_are_checked(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="step name"):
        check_step_name(bad)


def test_progress_is_checked_and_read_back() -> None:
    assert check_progress(1, "m" * 2000) == (1.0, "m" * 1000)
    for bad in (-0.1, math.inf, math.nan, "1", True, None):
        with pytest.raises(InvalidArgumentError, match="progress must be"):
            check_progress(bad, None)
    with pytest.raises(InvalidArgumentError, match="message"):
        check_progress(0.5, 7)
    p = progress_of((2, 0.25, "q", 1_700_000_000.0))
    assert p is not None and (p.value, p.message, p.attempt) == (0.25, "q", 2)
    assert p.as_dict()["updated_at"].startswith("2023-11-14")
    assert progress_of(None) is None
