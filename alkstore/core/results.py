"""Kept results: the outcome snapshot of a finished job and the encoding of its value.

A task registered with ``keep_result_s`` has its return value stored as JSON
text by the same fenced transaction that acks the job; a dead job's outcome is
its dead-letter row. Engines return outcome rows in the layout of
``OUTCOME_FIELDS``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal, NamedTuple

from alkstore.core.job import _utc
from alkstore.errors import PayloadError

__all__ = ["OUTCOME_FIELDS", "RESULTS_CHANNEL", "JobOutcome", "Outcome", "encode_result"]

# The store's own channel: "<job id>" is sent on it when a kept result is written.
RESULTS_CHANNEL = "_alk_results"

Outcome = Literal["success", "dead", "pending", "processing"]
OUTCOME_FIELDS = ("id", "queue", "outcome", "value", "error", "attempts", "finished_at")

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def encode_result(value: object) -> str:
    """``value`` as compact JSON text; ``PayloadError`` naming the value if it is not JSON."""
    try:
        text = _dumps(value)
    except (TypeError, ValueError, RecursionError) as e:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise PayloadError(
            f"return value {shown} of type {type(value).__name__} is not JSON-serialisable: {e}"
        ) from e
    if "\x00" in text:
        raise PayloadError("return value must not contain NUL characters")
    try:
        text.encode()
    except UnicodeEncodeError as e:
        raise PayloadError(f"return value is not valid UTF-8: {e}") from e
    return text


class JobOutcome(NamedTuple):
    """What became of a job: ``success`` with its value, ``dead`` with its last error,
    or still ``pending`` / ``processing``."""

    id: int
    queue: str
    outcome: Outcome
    value_json: str | None
    error: str | None
    attempts: int
    finished_at_raw: Any

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> JobOutcome:
        return cls(int(row[0]), row[1], row[2], row[3], row[4], int(row[5]), row[6])

    @property
    def value(self) -> Any:
        """The kept return value, decoded (``None`` unless ``outcome == "success"``)."""
        return None if self.value_json is None else json.loads(self.value_json)

    @property
    def finished_at(self) -> datetime | None:
        """When the job succeeded or died (UTC); ``None`` while it is live."""
        return _utc(self.finished_at_raw)
