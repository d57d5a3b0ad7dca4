"""The equal-jitter retry curve (core/backoff.py), statistically."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from alkstore.core.backoff import BACKOFF_CAP_S, backoff_delay_s, backoff_range_s

DRAWS = 2000


def expected_range(attempt: int, base: float) -> tuple[int, int]:
    e = min(base * 2 ** min(attempt - 1, 30), 3600)
    return math.ceil(e / 2), math.ceil(e)


@pytest.mark.parametrize("base", [0.25, 1, 1.5, 3, 7])
@pytest.mark.parametrize("attempt", [1, 2, 3, 5, 8, 12, 13, 20])
def test_draws_are_integers_within_the_inclusive_range(attempt: int, base: float) -> None:
    low, high = expected_range(attempt, base)
    assert backoff_range_s(attempt, base) == (low, high)
    rng = random.Random(attempt * 1000 + int(base * 100))
    draws = [backoff_delay_s(attempt, base, rng.randint) for _ in range(DRAWS)]
    assert all(type(d) is int for d in draws)
    assert all(low <= d <= high for d in draws)
    assert max(draws) <= BACKOFF_CAP_S == 3600
    if high - low <= 20:  # every value of a small range shows up
        assert set(draws) == set(range(low, high + 1))


def test_draws_are_roughly_uniform() -> None:
    rng = random.Random(42)
    low, high = backoff_range_s(4, 1)  # e = 8: [4, 8], five values
    counts = Counter(backoff_delay_s(4, 1, rng.randint) for _ in range(10 * DRAWS))
    assert sorted(counts) == list(range(low, high + 1))
    expected = 10 * DRAWS / (high - low + 1)
    # chi-square with 4 degrees of freedom; 18.47 is the 0.1% critical value
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 18.47


def test_mean_sits_in_the_middle_of_the_range() -> None:
    rng = random.Random(7)
    low, high = backoff_range_s(10, 1)  # e = 512: [256, 512]
    draws = [backoff_delay_s(10, 1, rng.randint) for _ in range(DRAWS)]
    mean = sum(draws) / len(draws)
    assert abs(mean - (low + high) / 2) < (high - low) * 0.05


@pytest.mark.parametrize("attempt", [13, 31, 64, 1000, 10**6, 10**18])
def test_huge_attempts_are_capped_at_an_hour(attempt: int) -> None:
    assert backoff_range_s(attempt, 1) == (1800, 3600)
    rng = random.Random(attempt % 997)
    draws = [backoff_delay_s(attempt, 1, rng.randint) for _ in range(DRAWS)]
    assert all(1800 <= d <= 3600 for d in draws)


def test_exponent_is_clamped_at_30() -> None:
    # with a tiny base the cap is not reached, so the clamp shows: 2**30 at most
    base = 1e-9
    e30 = base * 2**30
    assert backoff_range_s(31, base) == (math.ceil(e30 / 2), math.ceil(e30))
    assert backoff_range_s(10**9, base) == backoff_range_s(31, base)
    assert backoff_range_s(30, base) == (math.ceil(base * 2**29 / 2), math.ceil(base * 2**29))


def test_range_doubles_until_the_cap() -> None:
    highs = [backoff_range_s(k, 1)[1] for k in range(1, 15)]
    assert highs == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3600, 3600]


def test_fractional_results_round_up() -> None:
    assert backoff_range_s(1, 0.3) == (1, 1)  # e = 0.3: [ceil(0.15), ceil(0.3)]
    assert backoff_range_s(2, 1.5) == (2, 3)  # e = 3: [ceil(1.5), 3]
    assert backoff_range_s(1, 5) == (3, 5)


def test_zero_base_means_no_delay() -> None:
    assert backoff_delay_s(3, 0) == 0


def test_randomness_is_passed_in() -> None:
    calls = []

    def fake(a: int, b: int) -> int:
        calls.append((a, b))
        return b

    assert backoff_delay_s(3, 1, fake) == 4
    assert calls == [(2, 4)]


def test_default_randomness_stays_in_range() -> None:
    assert all(8 <= backoff_delay_s(5, 1) <= 16 for _ in range(DRAWS))
