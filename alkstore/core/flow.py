"""Flow control decided once for both engines: pause, concurrency and rate limits.

A queue's settings row (``alk_queues``) holds whether it is paused, its
limits and the rate limiter's state. An engine reads (and on PostgreSQL
locks) the row inside its claim transaction, then asks :func:`admit` how many
jobs it may claim, :func:`pick_partitions` which candidates respect a
per-partition limit, and :func:`charge` the limiter's next state.

The rate limit is a GCRA (a token bucket kept as one timestamp, ``tat``, the
"theoretical arrival time"): ``rate`` claims per ``period_s`` are spaced
``period_s / rate`` apart, and up to ``burst`` may come at once. With the
default burst of 1 no window of ``period_s`` seconds holds more than ``rate``
claims; with a burst ``b`` at most ``rate + b - 1``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from alkstore.errors import InvalidArgumentError

__all__ = [
    "CANCEL_NOTE",
    "CANDIDATE_WINDOW",
    "RECLAIMED_NOTE",
    "Admission",
    "Claimed",
    "QueueSettings",
    "Rate",
    "admit",
    "charge",
    "check_limit",
    "parse_rate",
    "pick_partitions",
]

LIMIT_MAX = 2**31 - 1
# Notes on a queue's channel telling a worker that a job it runs is no longer its:
# ``cancel:<id>`` (queue.cancel) and ``reclaimed:<id>:<attempts>`` (a lapsed claim
# taken over by the claim of that attempt; the engine's claim sends it).
CANCEL_NOTE = "cancel:"
RECLAIMED_NOTE = "reclaimed:"
# A partition-limited claim looks at this many candidates beyond the ones it
# asks for; jobs further back wait for the next claim.
CANDIDATE_WINDOW = 1000
_EPSILON = 1e-9  # float slack when counting whole claims
_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*(?:\.\d+)?)\s*([a-z]+)\s*$")


class Rate(NamedTuple):
    """``n`` claims per ``period_s`` seconds."""

    n: int
    period_s: float

    def __str__(self) -> str:
        for unit, seconds in (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0)):
            if self.period_s == seconds:
                return f"{self.n}/{unit}"
        return f"{self.n}/{self.period_s:g}s"


def parse_rate(text: object) -> Rate:
    """``"100/s"``, ``"10/m"``, ``"5/30s"``, ``"1000/h"`` → :class:`Rate`."""
    match = _RATE.match(text) if isinstance(text, str) else None
    unit = match.group(3) if match else ""
    if match is None or unit not in _UNITS:
        raise InvalidArgumentError(
            f"invalid rate {text!r}: use COUNT/UNIT (UNIT s, m, h or d, optionally with a "
            "number, e.g. 100/s, 10/m, 5/30s)"
        )
    count = check_limit("rate", int(match.group(1)))
    multiple = float(match.group(2)) if match.group(2) else 1.0
    period = multiple * _UNITS[unit]
    if not math.isfinite(period) or period <= 0:
        raise InvalidArgumentError(f"invalid rate {text!r}: the period must be > 0")
    return Rate(count, period)


def check_limit(name: str, value: object) -> int:
    """An int in [1, 2**31 - 1] (a limit of 0 would stop the queue: that is pause)."""
    if type(value) is not int or not 1 <= value <= LIMIT_MAX:
        raise InvalidArgumentError(f"{name} must be an int in [1, {LIMIT_MAX}], got {value!r}")
    return value


class QueueSettings(NamedTuple):
    """One ``alk_queues`` row; times are POSIX seconds on every engine."""

    queue: str
    paused: bool
    concurrency: int | None
    partition_concurrency: int | None
    rate_count: int | None
    rate_period_s: float | None
    burst: int | None
    tat: float | None
    fair: bool = False  # claims round-robin across partition keys (core/fair.py)
    aging_s: float | None = None  # a due job gains a priority level per aging_s waited

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> QueueSettings:
        """From a settings row: the eight limit columns, then ``fair`` and ``aging_s``."""
        q, paused, conc, pconc, count, period, burst, tat, fair, aging = row[:10]
        return cls(
            q,
            bool(paused),
            conc,
            pconc,
            count,
            None if period is None else float(period),
            burst,
            None if tat is None else float(tat),
            bool(fair),
            None if aging is None else float(aging),
        )

    @property
    def rate(self) -> Rate | None:
        if self.rate_count is None or self.rate_period_s is None:
            return None
        return Rate(self.rate_count, self.rate_period_s)

    @property
    def limited(self) -> bool:
        """Whether a claim must take the gated (locked, counted) path."""
        return (
            self.concurrency is not None
            or self.partition_concurrency is not None
            or self.rate_count is not None
        )


class Claimed(NamedTuple):
    """What an engine's claim returns: the rows, whether the queue is limited (its
    freed slots must wake the consumers) and seconds until the rate limit lets the
    next claim through (``None``: not held back by the rate)."""

    rows: list[Any]
    limited: bool = False
    hold_s: float | None = None


class Admission(NamedTuple):
    """How many jobs a claim may take, and until when the rate limit holds it back."""

    n: int
    rate_capped: bool  # the rate limit, not the request or a concurrency limit, set ``n``


def _interval(settings: QueueSettings) -> float:
    assert settings.rate_count is not None and settings.rate_period_s is not None
    return settings.rate_period_s / settings.rate_count


def admit(settings: QueueSettings, now: float, running: int, n: int) -> Admission:
    """Jobs a claim of up to ``n`` may take now, with ``running`` unexpired claims."""
    if settings.paused:
        return Admission(0, False)
    if settings.concurrency is not None:
        n = min(n, max(settings.concurrency - running, 0))
    if settings.rate_count is None or n == 0:
        return Admission(n, False)
    interval = _interval(settings)
    burst = settings.burst or 1
    tat = max(settings.tat or now, now)
    allowed = max(math.floor(burst - (tat - now) / interval + _EPSILON), 0)
    if allowed < n:
        return Admission(allowed, True)
    return Admission(n, False)


def charge(settings: QueueSettings, now: float, claimed: int) -> tuple[float | None, float | None]:
    """The limiter's new ``tat`` after ``claimed`` claims, and seconds until the next one
    is allowed (``None`` without a rate limit)."""
    if settings.rate_count is None:
        return settings.tat, None
    interval = _interval(settings)
    tat = max(settings.tat or now, now) + claimed * interval
    burst = settings.burst or 1
    return tat, max(tat - (burst - 1) * interval - now, 0.0)


def pick_partitions(
    candidates: Iterable[tuple[int, str | None]],
    running: Mapping[str, int],
    limit: int,
    n: int,
) -> list[int]:
    """Ids of the first ``n`` candidates (in claim order) whose partition has room.

    Jobs without a partition key are limited only by the queue's own limits.
    """
    taken: dict[str, int] = dict(running)
    chosen: list[int] = []
    for job_id, key in candidates:
        if len(chosen) >= n:
            break
        if key is not None:
            if taken.get(key, 0) >= limit:
                continue
            taken[key] = taken.get(key, 0) + 1
        chosen.append(job_id)
    return chosen
