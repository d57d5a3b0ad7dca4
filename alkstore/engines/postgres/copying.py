"""Row conversion for the store copy: ``core.tables``' neutral kinds to PostgreSQL's types.

Times are POSIX seconds in the neutral rows and ``timestamptz`` here; the
conversion goes through whole microseconds (``core.tables.micros``), exactly
what the column keeps, so a value read back compares equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from alkstore.core.tables import Kind, micros

__all__ = ["from_stored", "to_stored"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_stored(kinds: Sequence[Kind], row: Sequence[Any]) -> list[Any]:
    """A neutral row (or key) as query parameters."""
    return [
        _EPOCH + timedelta(microseconds=micros(v)) if k == "time" and v is not None else v
        for k, v in zip(kinds, row, strict=False)
    ]


def from_stored(kinds: Sequence[Kind], row: Sequence[Any]) -> tuple[Any, ...]:
    """A fetched row in the neutral form."""
    return tuple(
        ((v - _EPOCH) // _MICROSECOND) / 1_000_000 if k == "time" and v is not None else v
        for k, v in zip(kinds, row, strict=True)
    )
