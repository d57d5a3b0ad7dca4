"""Immutable snapshots handed back by the store: Job, SweepResult, Notification.

``Job`` wraps the engine's row tuple and decodes fields on access. A frozen
dataclass would cost a few microseconds per row in ``__init__`` (16 guarded
``object.__setattr__`` calls plus datetime conversion); on the batch claim path
that is most of the per-job budget, so the snapshot keeps the row and converts
lazily. It is still immutable, hashable and compares by value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, Literal, NamedTuple

__all__ = [
    "ERROR_EXPIRED",
    "ERROR_FAILED",
    "ERROR_MAX_ATTEMPTS",
    "ROW_FIELDS",
    "claim_order",
    "Job",
    "JobState",
    "Notification",
    "Row",
    "SweepResult",
]

JobState = Literal["pending", "processing", "blocked", "dead"]


# The last_error a dead-letter move records when the caller gave none: decided
# here, passed to the engine as parameters (no engine spells them).
ERROR_MAX_ATTEMPTS = "max attempts exceeded"  # a retry or a lapsed claim with no attempts left
ERROR_EXPIRED = "expired"  # swept past its expires_at
ERROR_FAILED = "failed"  # JobHandle.fail() without a message

# The canonical row layout every engine returns, in this order. Time columns
# are POSIX seconds (float) or aware datetimes; Job normalises both to UTC.
# Rows of an older, shorter layout (16 columns: no dedupe_key; 17: no
# partition_key) still make a Job, the missing keys read as None.
ROW_FIELDS = (
    "id",
    "queue",
    "payload",
    "state",
    "priority",
    "run_at",
    "created_at",
    "attempts",
    "max_attempts",
    "visibility_timeout_s",
    "retry_base_s",
    "expires_at",
    "worker_id",
    "claim_expires_at",
    "last_error",
    "died_at",
    "dedupe_key",
    "partition_key",
)
Row = tuple[Any, ...]


def claim_order(row: Row) -> tuple[int, Any, int]:
    """The claim order of a row (priority DESC, run_at, id): the store sorts claims by it."""
    return (-row[4], row[5], row[0])


def _utc(value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is UTC else value.astimezone(UTC)
    try:
        return datetime.fromtimestamp(value, UTC)  # type: ignore[arg-type]  # float seconds
    except (OverflowError, ValueError, OSError):
        # datetime.max as float seconds rounds up past year 9999: clamp to the ends
        return (datetime.max if value > 0 else datetime.min).replace(tzinfo=UTC)  # type: ignore[operator]


def _time(index: int) -> Any:
    get = itemgetter(index)
    return property(lambda self: _utc(get(self._row)))


class Job:
    """A snapshot of one job row (live or dead) at the moment it was read."""

    __slots__ = ("_row",)
    _row: Row

    def __init__(self, row: Row) -> None:
        _set_row(self, row)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Job is immutable; cannot set {name!r}")

    id: int = property(lambda self: self._row[0])  # type: ignore[assignment]
    queue: str = property(lambda self: self._row[1])  # type: ignore[assignment]
    state: JobState = property(lambda self: self._row[3])  # type: ignore[assignment]
    priority: int = property(lambda self: self._row[4])  # type: ignore[assignment]
    run_at: datetime = _time(5)
    created_at: datetime = _time(6)
    attempts: int = property(lambda self: self._row[7])  # type: ignore[assignment]
    max_attempts: int = property(lambda self: self._row[8])  # type: ignore[assignment]
    visibility_timeout_s: float = property(  # type: ignore[assignment]
        lambda self: float(self._row[9])
    )
    retry_base_s: float = property(lambda self: float(self._row[10]))  # type: ignore[assignment]
    expires_at: datetime | None = _time(11)
    worker_id: str | None = property(lambda self: self._row[12])  # type: ignore[assignment]
    claim_expires_at: datetime | None = _time(13)
    last_error: str | None = property(lambda self: self._row[14])  # type: ignore[assignment]
    died_at: datetime | None = _time(15)
    dedupe_key: str | None = property(  # type: ignore[assignment]
        lambda self: self._row[16] if len(self._row) > 16 else None
    )
    # the tenant of a fair queue, the key of a per-partition limit (EnqueueOpts)
    partition_key: str | None = property(  # type: ignore[assignment]
        lambda self: self._row[17] if len(self._row) > 17 else None
    )

    @property
    def payload(self) -> bytes:
        """The exact stored bytes."""
        data = self._row[2]
        return data if type(data) is bytes else bytes(data)

    def json(self) -> Any:
        """The payload decoded as JSON."""
        return json.loads(self.payload)

    def text(self) -> str:
        """The payload decoded as UTF-8."""
        return self.payload.decode()

    def as_dict(self) -> dict[str, Any]:
        """Every field by name, times as UTC datetimes."""
        return {name: getattr(self, name) for name in ROW_FIELDS}

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in ROW_FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Job(id={self.id}, queue={self.queue!r}, state={self.state!r}, "
            f"attempts={self.attempts}/{self.max_attempts}, priority={self.priority}, "
            f"payload={self.payload[:40]!r})"
        )


# the slot's own setter (Job's __setattr__ refuses): a claimed row is wrapped on the
# per-job hot path, and this skips object.__setattr__'s lookup of the slot
_set_row: Callable[[Job, Row], None] = Job.__dict__["_row"].__set__


class SweepResult(NamedTuple):
    """What ``sweep_expired`` did: rows moved to dead, dead rows purged, and kept
    results and dedupe windows purged after their time."""

    expired: int
    purged: int
    results_purged: int = 0
    keys_purged: int = 0


class Notification(NamedTuple):
    """One delivered notification."""

    channel: str
    payload: str
