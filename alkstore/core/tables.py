"""The tables a store copy moves (``alkstore copy``), in an engine-neutral row form.

Each engine reads and writes these rows with the columns in the order given
here, converting only its storage types: times are POSIX seconds (float),
flags are ``bool``, payloads ``bytes``. ``canonical`` then makes rows of both
engines comparable (times to whole microseconds, PostgreSQL's resolution), and
``Digest`` sums up a table's canonical rows in key order.

Not copied: ``alk_workers`` (the source's live workers, refused by the copy) and
PostgreSQL's ``alk_handoff`` (their hand-off slots),
``alk_ack_receipts`` (proofs of the live workers' ack batches), ``alk_bulk_actions``
(the source's bulk-action audit and cursors) and SQLite's ``alk_notes`` and
``alk_deps_woken`` (wake-ups, meaningless once delivered).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["COPIED_TABLES", "Kind", "Table", "Digest", "canonical", "micros", "table"]

Kind = Literal["int", "float", "time", "text", "bytes", "bool"]


@dataclass(frozen=True)
class Table:
    """One copied table: its columns (name, kind) and the leading ``key`` columns."""

    name: str
    columns: tuple[tuple[str, Kind], ...]
    key: int  # the first ``key`` columns are the primary key, and the copy's order

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def kinds(self) -> tuple[Kind, ...]:
        return tuple(kind for _, kind in self.columns)

    def key_of(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        return row[: self.key]

    @property
    def start(self) -> tuple[Any, ...]:
        """A key before every row's: the copy reads each table from here on."""
        return tuple(_BEFORE_ALL[kind] for _, kind in self.columns[: self.key])


# Below every key value (queue names and schedule names are never empty); the
# time is 0001-01-01 UTC, the earliest instant both engines can hold.
_BEFORE_ALL: dict[str, Any] = {"int": -(2**63), "text": "", "time": -62135596800.0}


_JOB_COLUMNS: tuple[tuple[str, Kind], ...] = (
    ("id", "int"),
    ("queue", "text"),
    ("payload", "bytes"),
    ("state", "text"),
    ("priority", "int"),
    ("run_at", "time"),
    ("created_at", "time"),
    ("attempts", "int"),
    ("max_attempts", "int"),
    ("visibility_timeout_s", "float"),
    ("retry_base_s", "float"),
    ("expires_at", "time"),
    ("worker_id", "text"),
    ("claim_expires_at", "time"),
    ("last_error", "text"),
    ("dedupe_key", "text"),
    ("partition_key", "text"),
    ("debounce_key", "text"),
    ("promoted_at", "time"),
    ("waiting", "int"),
    ("deps", "int"),
)

_DEAD_COLUMNS: tuple[tuple[str, Kind], ...] = (
    *(
        c
        for c in _JOB_COLUMNS
        if c[0]
        not in (
            "state",
            "dedupe_key",
            "partition_key",
            "debounce_key",
            "promoted_at",
            "waiting",
            "deps",
        )
    ),
    ("died_at", "time"),
    ("dedupe_key", "text"),
    ("partition_key", "text"),
)

# In copy order: settings first, so a queue's limits are in place before its jobs.
COPIED_TABLES: tuple[Table, ...] = (
    Table(
        "alk_queues",
        (
            ("queue", "text"),
            ("paused", "bool"),
            ("concurrency", "int"),
            ("partition_concurrency", "int"),
            ("rate_count", "int"),
            ("rate_period_s", "float"),
            ("burst", "int"),
            ("tat", "float"),
            ("fair", "bool"),
            ("aging_s", "float"),
        ),
        1,
    ),
    Table("alk_jobs", _JOB_COLUMNS, 1),
    Table("alk_dead", _DEAD_COLUMNS, 1),
    Table(
        "alk_results",
        (
            ("id", "int"),
            ("queue", "text"),
            ("outcome", "text"),
            ("value", "text"),
            ("attempts", "int"),
            ("finished_at", "time"),
            ("expires_at", "time"),
        ),
        1,
    ),
    Table(
        "alk_dedupe",
        (("queue", "text"), ("dedupe_key", "text"), ("job_id", "int"), ("expires_at", "time")),
        2,
    ),
    Table(
        "alk_schedules",
        (("name", "text"), ("last_tick", "float"), ("last_job", "int"), ("updated_at", "time")),
        1,
    ),
    Table(
        "alk_outcomes",
        (("queue", "text"), ("minute", "time"), ("outcome", "text"), ("count", "int")),
        3,
    ),
    Table(
        "alk_fair",
        (("queue", "text"), ("partition_key", "text"), ("vtime", "float")),
        2,
    ),
    Table(
        "alk_fair_weights",
        (("queue", "text"), ("partition_key", "text"), ("weight", "float")),
        2,
    ),
    # a job's life (schema v9)
    Table(
        "alk_attempts",
        (
            ("id", "int"),
            ("job_id", "int"),
            ("queue", "text"),
            ("attempt", "int"),
            ("worker_id", "text"),
            ("host", "text"),
            ("claimed_at", "time"),
            ("finished_at", "time"),
            ("outcome", "text"),
            ("error", "text"),
            ("trimmed", "bool"),
        ),
        1,
    ),
    Table(
        "alk_progress",
        (
            ("job_id", "int"),
            ("queue", "text"),
            ("attempt", "int"),
            ("value", "float"),
            ("message", "text"),
            ("updated_at", "time"),
        ),
        1,
    ),
    Table(
        "alk_steps",
        (
            ("job_id", "int"),
            ("name", "text"),
            ("queue", "text"),
            ("value", "text"),
            ("attempt", "int"),
            ("done_at", "time"),
        ),
        2,
    ),
    Table(
        "alk_signals",
        (
            ("job_id", "int"),
            ("name", "text"),
            ("queue", "text"),
            ("payload", "text"),
            ("sent_at", "time"),
        ),
        2,
    ),
    Table(
        "alk_deps",
        (("parent", "int"), ("child", "int"), ("policy", "text"), ("killed", "bool")),
        2,
    ),
)

_BY_NAME = {t.name: t for t in COPIED_TABLES}


def table(name: str) -> Table:
    """The copied table called ``name`` (KeyError if it is not one)."""
    return _BY_NAME[name]


def micros(seconds: float) -> int:
    """POSIX seconds as whole microseconds (the resolution both engines keep), rounded
    as ``datetime.fromtimestamp`` rounds them: the fraction alone, half to even."""
    fraction, whole = math.modf(seconds)
    return int(whole) * 1_000_000 + round(fraction * 1_000_000)


def _value(kind: Kind, value: Any) -> Any:
    if value is None:
        return None
    if kind == "time":
        return micros(float(value))
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "bool":
        return bool(value)
    if kind == "bytes":
        return bytes(value)
    return str(value)


def canonical(spec: Table, row: tuple[Any, ...]) -> tuple[Any, ...]:
    """``row`` with every value in one type per kind, equal across engines."""
    return tuple(_value(kind, value) for kind, value in zip(spec.kinds(), row, strict=True))


class Digest:
    """Row count and SHA-256 of canonical rows fed in key order."""

    def __init__(self) -> None:
        import hashlib  # here: the engines import this module, a worker never digests

        self.rows = 0
        self._sha = hashlib.sha256()

    def add(self, row: tuple[Any, ...]) -> None:
        self.rows += 1
        self._sha.update(repr(row).encode("utf-8"))
        self._sha.update(b"\n")

    def hexdigest(self) -> str:
        return self._sha.hexdigest()[:16]
