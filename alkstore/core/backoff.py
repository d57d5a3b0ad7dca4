"""The equal-jitter retry curve (docs/contract.md, "Backoff"), a pure function."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

__all__ = ["BACKOFF_CAP_S", "backoff_delay_s", "backoff_range_s"]

BACKOFF_CAP_S = 3600
_EXPONENT_CLAMP = 30


def backoff_range_s(attempt: int, retry_base_s: float) -> tuple[int, int]:
    """The inclusive integer range ``[ceil(e/2), ceil(e)]`` for the attempt just made."""
    k = max(attempt, 1)
    e = min(retry_base_s * 2 ** min(k - 1, _EXPONENT_CLAMP), BACKOFF_CAP_S)
    return math.ceil(e / 2), math.ceil(e)


def backoff_delay_s(
    attempt: int,
    retry_base_s: float,
    randint: Callable[[int, int], int] = random.randint,
) -> int:
    """Seconds to wait before the next attempt; ``randint(a, b)`` draws inclusively."""
    low, high = backoff_range_s(attempt, retry_base_s)
    return randint(low, high)
