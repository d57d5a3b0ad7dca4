"""core/flow.py: rate parsing, admission, the rate limiter's state, partition picks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alkstore.core.flow import QueueSettings, Rate, admit, charge, parse_rate, pick_partitions
from alkstore.errors import InvalidArgumentError


def _settings(**kw: object) -> QueueSettings:
    base: dict[str, object] = {
        "queue": "q",
        "paused": False,
        "concurrency": None,
        "partition_concurrency": None,
        "rate_count": None,
        "rate_period_s": None,
        "burst": None,
        "tat": None,
    }
    base.update(kw)
    return QueueSettings(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("100/s", Rate(100, 1.0)),
        ("10/m", Rate(10, 60.0)),
        ("5/30s", Rate(5, 30.0)),
        (" 1000 / h ", Rate(1000, 3600.0)),
        ("2/d", Rate(2, 86400.0)),
        ("3/0.5s", Rate(3, 0.5)),
    ],
)
def test_rates_parse(text: str, rate: Rate) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["", "fast", "0/s", "10", "10/", "10/y", "-1/s", "1/0s", 5])
def test_bad_rates_name_the_value(text: object) -> None:
    with pytest.raises(InvalidArgumentError, match="rate"):
        parse_rate(text)


def test_rate_renders_back() -> None:
    assert [str(parse_rate(t)) for t in ("100/s", "10/m", "5/30s")] == ["100/s", "10/m", "5/30s"]


def test_paused_admits_nothing_and_concurrency_counts_running() -> None:
    assert admit(_settings(paused=True), 0.0, 0, 10).n == 0
    assert admit(_settings(concurrency=3), 0.0, 1, 10).n == 2
    assert admit(_settings(concurrency=3), 0.0, 5, 10).n == 0
    assert admit(_settings(), 0.0, 99, 10).n == 10


def test_a_burst_then_one_per_interval() -> None:
    s = _settings(rate_count=10, rate_period_s=1.0, burst=3)
    first = admit(s, 100.0, 0, 10)
    assert first == (3, True)
    tat, wait = charge(s, 100.0, 3)
    assert tat == pytest.approx(100.3) and wait == pytest.approx(0.1)
    s = s._replace(tat=tat)
    assert admit(s, 100.05, 0, 10).n == 0
    assert admit(s, 100.1, 0, 10).n == 1


@given(
    st.integers(1, 60),
    st.lists(st.floats(0.0, 0.05), min_size=1, max_size=300),
    st.integers(1, 8),
)
def test_with_burst_one_no_window_of_a_period_holds_more_than_the_rate(
    rate: int, gaps: list[float], asked: int
) -> None:
    s = _settings(rate_count=rate, rate_period_s=1.0)
    now, claims = 0.0, []
    for gap in gaps:
        now += gap
        k = admit(s, now, 0, asked).n
        claims += [now] * k
        s = s._replace(tat=charge(s, now, k)[0])
    for i, start in enumerate(claims):
        assert sum(1 for t in claims[i:] if t < start + 1.0 - 1e-9) <= rate


def test_partition_picks_keep_claim_order_and_skip_full_partitions() -> None:
    candidates = [(1, "a"), (2, "a"), (3, None), (4, "b"), (5, "a"), (6, "b")]
    assert pick_partitions(candidates, {"a": 1}, 2, 10) == [1, 3, 4, 6]
    assert pick_partitions(candidates, {}, 1, 2) == [1, 3]
