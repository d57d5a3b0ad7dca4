"""QueueOpts / EnqueueOpts validation and resolution over a queue's stamps (core/options.py)."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alkstore.core.options import EnqueueOpts, QueueOpts, Stamps, resolve
from alkstore.errors import InvalidArgumentError

AWARE = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_queue_opts_defaults_are_the_contracts() -> None:
    opts = QueueOpts()
    assert opts.visibility_timeout_s == 30
    assert opts.max_attempts == 5
    assert opts.retry_base_s == 1
    assert opts.priority == 0
    assert opts.expires_in_s is None
    assert opts.dead_letter_retention_s is None


def test_queue_opts_are_immutable() -> None:
    opts = QueueOpts()
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.max_attempts = 2  # type: ignore[misc]


def test_enqueue_opts_are_immutable_and_default_to_none() -> None:
    opts = EnqueueOpts()
    assert dataclasses.astuple(opts) == (None,) * 12
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.priority = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "field, value",
    [
        ("visibility_timeout_s", 0),
        ("visibility_timeout_s", -1),
        ("visibility_timeout_s", math.nan),
        ("visibility_timeout_s", math.inf),
        ("visibility_timeout_s", "30"),
        ("visibility_timeout_s", None),
        ("visibility_timeout_s", True),
        ("max_attempts", 0),
        ("max_attempts", -3),
        ("max_attempts", 1.5),
        ("max_attempts", True),
        ("max_attempts", 2**31),
        ("retry_base_s", -0.5),
        ("retry_base_s", math.nan),
        ("priority", 1.0),
        ("priority", 2**31),
        ("priority", -(2**31) - 1),
        ("priority", None),
        ("expires_in_s", 0),
        ("expires_in_s", -1),
        ("expires_in_s", math.nan),
        ("dead_letter_retention_s", -1),
        ("dead_letter_retention_s", math.inf),
    ],
)
def test_bad_queue_opts_are_rejected_naming_the_value(field: str, value: object) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        QueueOpts(**{field: value})  # type: ignore[arg-type]
    assert field in str(e.value)
    assert repr(value) in str(e.value)


@pytest.mark.parametrize(
    "field, value",
    [
        ("priority", 1.5),
        ("priority", 2**31),
        ("priority", "1"),
        ("delay_s", -1),
        ("delay_s", math.nan),
        ("delay_s", math.inf),
        ("run_at", "2030-01-01T00:00:00Z"),
        ("run_at", 1700000000),
        ("run_at", datetime(2030, 1, 1)),
        ("expires_in_s", 0),
        ("expires_in_s", -2),
        ("max_attempts", 0),
        ("max_attempts", False),
    ],
)
def test_bad_enqueue_opts_are_rejected_naming_the_value(field: str, value: object) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        EnqueueOpts(**{field: value})  # type: ignore[arg-type]
    assert field in str(e.value)


def test_naive_run_at_is_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="timezone-aware") as e:
        EnqueueOpts(run_at=datetime(2030, 1, 1, 12, 0))
    # the value as a user writes it, not Python's repr (issue #21)
    assert "2030-01-01T12:00:00" in str(e.value)
    assert "datetime.datetime" not in str(e.value)


def test_boundary_values_are_accepted() -> None:
    QueueOpts(visibility_timeout_s=0.001, max_attempts=1, retry_base_s=0, priority=-(2**31))
    QueueOpts(priority=2**31 - 1, expires_in_s=0.01, dead_letter_retention_s=0)
    EnqueueOpts(delay_s=0, expires_in_s=0.001, max_attempts=1, run_at=AWARE)


def test_resolution_without_opts_copies_the_queue_stamps() -> None:
    q = QueueOpts(
        visibility_timeout_s=7,
        max_attempts=3,
        retry_base_s=2,
        priority=4,
        expires_in_s=60,
        dead_letter_retention_s=5,
    )
    stamps = resolve(q, None)
    assert stamps == Stamps(4, 0.0, None, 60, 3, 7.0, 2.0)
    assert resolve(q, EnqueueOpts()) == stamps


def test_delay_wins_over_run_at() -> None:
    stamps = resolve(QueueOpts(), EnqueueOpts(delay_s=5, run_at=AWARE))
    assert stamps.delay_s == 5
    assert stamps.run_at is None


def test_run_at_is_used_when_no_delay() -> None:
    stamps = resolve(QueueOpts(), EnqueueOpts(run_at=AWARE))
    assert stamps.run_at == AWARE
    assert stamps.delay_s == 0


def test_run_at_in_another_zone_keeps_its_instant() -> None:
    other = AWARE.astimezone(timezone(timedelta(hours=-7)))
    stamps = resolve(QueueOpts(), EnqueueOpts(run_at=other))
    assert stamps.run_at is not None and stamps.run_at.timestamp() == AWARE.timestamp()


def test_expiry_is_relative_and_opts_win_over_the_queue_default() -> None:
    assert resolve(QueueOpts(expires_in_s=60), EnqueueOpts(expires_in_s=5)).expires_in_s == 5
    assert resolve(QueueOpts(expires_in_s=60), EnqueueOpts()).expires_in_s == 60
    assert resolve(QueueOpts(), EnqueueOpts()).expires_in_s is None


def test_priority_from_opts_else_queue_default() -> None:
    assert resolve(QueueOpts(priority=3), EnqueueOpts(priority=-9)).priority == -9
    assert resolve(QueueOpts(priority=3), EnqueueOpts(priority=0)).priority == 0
    assert resolve(QueueOpts(priority=3), EnqueueOpts()).priority == 3


def test_max_attempts_is_the_one_per_job_override() -> None:
    q = QueueOpts(visibility_timeout_s=9, max_attempts=5, retry_base_s=3)
    stamps = resolve(q, EnqueueOpts(max_attempts=1))
    assert stamps.max_attempts == 1
    # the other stamps come from the queue, whatever the enqueue opts say
    assert (stamps.visibility_timeout_s, stamps.retry_base_s) == (9.0, 3.0)
    assert set(dataclasses.fields(EnqueueOpts)[i].name for i in range(5)) == {
        "priority",
        "delay_s",
        "run_at",
        "expires_in_s",
        "max_attempts",
    }


def test_resolve_rejects_something_that_is_not_enqueue_opts() -> None:
    with pytest.raises(InvalidArgumentError):
        resolve(QueueOpts(), {"delay_s": 1})  # type: ignore[arg-type]


@given(
    priority=st.none() | st.integers(-(2**31), 2**31 - 1),
    delay=st.none() | st.floats(0, 1e6),
    run_at=st.none() | st.datetimes(timezones=st.just(UTC)),
    expires=st.none() | st.floats(0.001, 1e6),
    attempts=st.none() | st.integers(1, 1000),
)
def test_resolution_follows_the_rules(
    priority: int | None,
    delay: float | None,
    run_at: datetime | None,
    expires: float | None,
    attempts: int | None,
) -> None:
    q = QueueOpts(priority=1, max_attempts=2, expires_in_s=30)
    s = resolve(q, EnqueueOpts(priority, delay, run_at, expires, attempts))
    assert s.priority == (1 if priority is None else priority)
    if delay is not None:
        assert (s.delay_s, s.run_at) == (delay, None)
    else:
        assert (s.delay_s, s.run_at) == (0, run_at)
    assert s.expires_in_s == (30 if expires is None else expires)
    assert s.max_attempts == (2 if attempts is None else attempts)
