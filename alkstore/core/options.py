"""QueueOpts, EnqueueOpts and the resolution of enqueue options over a queue's stamps.

Resolution is engine-neutral but clock-free: the engine applies its own clock
(the server's ``now()`` on PostgreSQL) to the relative parts, so one clock
reading per enqueue is the engine's, never the caller's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from alkstore.core.dedupe import check_dedupe_key
from alkstore.core.display import describe
from alkstore.core.names import is_storable_text
from alkstore.errors import InvalidArgumentError

__all__ = [
    "EnqueueOpts",
    "QueueOpts",
    "Stamps",
    "check_positive",
    "check_switch",
    "describe",
    "resolve",
]

# priorities live in a 32-bit integer column on every engine
PRIORITY_MIN = -(2**31)
PRIORITY_MAX = 2**31 - 1
# a duration beyond ~100 years is a mistake, and overflows timestamp arithmetic
DURATION_MAX_S = 100 * 365 * 86400.0
PARTITION_KEY_MAX = 200
AFTER_MAX = 10_000  # parents of one job (EnqueueOpts.after)
AFTER_ID_MAX = 2**63 - 1


def _number(name: str, value: object) -> float:
    if type(value) not in (int, float):  # bool is excluded on purpose
        raise InvalidArgumentError(f"{name} must be a number, got {describe(value)}")
    try:
        f = float(value)  # type: ignore[arg-type]  # checked just above
    except OverflowError:  # an int past float's range, e.g. 10**400
        f = math.inf
    if not math.isfinite(f) or f > DURATION_MAX_S:
        raise InvalidArgumentError(
            f"{name} must be a finite number of seconds up to {DURATION_MAX_S:.0f}, "
            f"got {describe(value)}"
        )
    return f


def check_positive(name: str, value: object) -> float:
    """Return ``value`` as seconds if it is a finite number > 0."""
    f = _number(name, value)
    if f <= 0:
        raise InvalidArgumentError(f"{name} must be > 0, got {describe(value)}")
    return f


_SWITCH = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False}


def check_switch(name: str, value: object) -> bool:
    """Return an on/off option (``on``/``off``, ``true``/``false``, ``1``/``0`` or a bool)."""
    if isinstance(value, bool):
        return value
    found = _SWITCH.get(str(value).lower()) if isinstance(value, str | int) else None
    if found is None:
        raise InvalidArgumentError(f"{name} must be on or off, got {describe(value)}")
    return found


def check_non_negative(name: str, value: object) -> float:
    """Return ``value`` as seconds if it is a finite number >= 0."""
    f = _number(name, value)
    if f < 0:
        raise InvalidArgumentError(f"{name} must be >= 0, got {describe(value)}")
    return f


def check_priority(name: str, value: object) -> int:
    """Return ``value`` if it is an int within the 32-bit priority range."""
    if type(value) is not int or not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise InvalidArgumentError(
            f"{name} must be an int in [{PRIORITY_MIN}, {PRIORITY_MAX}], got {describe(value)}"
        )
    return value


def check_attempts(name: str, value: object) -> int:
    """Return ``value`` if it is an int >= 1 (and fits a 32-bit column)."""
    if type(value) is not int or not 1 <= value <= PRIORITY_MAX:
        raise InvalidArgumentError(f"{name} must be an int >= 1, got {describe(value)}")
    return value


@dataclass(frozen=True, slots=True)
class QueueOpts:
    """A queue handle's stamps, copied onto each job at enqueue."""

    visibility_timeout_s: float = 30.0
    max_attempts: int = 5
    retry_base_s: float = 1.0
    priority: int = 0
    expires_in_s: float | None = None
    dead_letter_retention_s: float | None = None

    def __post_init__(self) -> None:
        check_positive("visibility_timeout_s", self.visibility_timeout_s)
        check_attempts("max_attempts", self.max_attempts)
        check_non_negative("retry_base_s", self.retry_base_s)
        check_priority("priority", self.priority)
        if self.expires_in_s is not None:
            check_positive("expires_in_s", self.expires_in_s)
        if self.dead_letter_retention_s is not None:
            check_non_negative("dead_letter_retention_s", self.dead_letter_retention_s)


@dataclass(frozen=True, slots=True)
class EnqueueOpts:
    """Per-enqueue options; ``None`` means "use the queue's default".

    ``dedupe_key``: while a live (pending or processing) job of the queue has
    this key, another enqueue with it writes nothing and answers that job's
    id; with ``dedupe_window_s`` the key stays taken that many seconds after
    its first enqueue, whatever became of the job.

    ``debounce_key``: one *pending* job per key; an enqueue with a key a
    pending job holds replaces that job's payload (latest wins) instead of
    adding a job, and with ``debounce_s`` pushes its start out to
    ``debounce_s`` from now (the first enqueue also waits ``debounce_s``). A
    job already claimed is never changed: the next enqueue creates the next
    job. Not with ``dedupe_key``, ``delay_s`` or ``run_at`` when ``debounce_s``
    is given.

    ``after``: job ids this job waits for (docs/contract.md, "Dependencies"): it
    is stored ``blocked`` and becomes pending in the transaction of the last
    parent's ack. With ``after_policy="success"`` (default, None) a parent that dies
    dead-letters it; with ``"complete"`` it runs whatever became of them.
    """

    priority: int | None = None
    delay_s: float | None = None
    run_at: datetime | None = None
    expires_in_s: float | None = None
    max_attempts: int | None = None
    dedupe_key: str | None = None
    dedupe_window_s: float | None = None
    partition_key: str | None = None
    debounce_key: str | None = None
    debounce_s: float | None = None
    after: tuple[int, ...] | None = None
    after_policy: str | None = None

    def __post_init__(self) -> None:
        self._check_debounce()
        self._check_after()
        if self.dedupe_key is not None:
            check_dedupe_key("dedupe_key", self.dedupe_key)
        if self.dedupe_window_s is not None:
            check_positive("dedupe_window_s", self.dedupe_window_s)
            if self.dedupe_key is None:
                raise InvalidArgumentError(
                    f"dedupe_window_s={self.dedupe_window_s!r} needs a dedupe_key"
                )
        if self.partition_key is not None and (
            type(self.partition_key) is not str
            or not self.partition_key
            or len(self.partition_key) > PARTITION_KEY_MAX
            or not is_storable_text(self.partition_key)
        ):
            raise InvalidArgumentError(
                f"partition_key must be a non-empty str of at most {PARTITION_KEY_MAX} "
                f"characters of valid UTF-8 without NUL, got {self.partition_key!r}"
            )
        if self.priority is not None:
            check_priority("priority", self.priority)
        if self.delay_s is not None:
            check_non_negative("delay_s", self.delay_s)
        if self.run_at is not None:
            if not isinstance(self.run_at, datetime):
                raise InvalidArgumentError(
                    f"run_at must be a datetime, got {describe(self.run_at)}"
                )
            if self.run_at.tzinfo is None or self.run_at.utcoffset() is None:
                raise InvalidArgumentError(
                    f"run_at must be timezone-aware, got naive {self.run_at.isoformat()} "
                    "(add a zone, e.g. 2030-01-01T09:00+00:00)"
                )
        if self.expires_in_s is not None:
            check_positive("expires_in_s", self.expires_in_s)
        if self.max_attempts is not None:
            check_attempts("max_attempts", self.max_attempts)

    def _check_after(self) -> None:
        if self.after_policy not in (None, "success", "complete"):
            raise InvalidArgumentError(
                f"after_policy must be 'success' or 'complete', got {self.after_policy!r}"
            )
        if self.after is None:
            return
        after = self.after
        if isinstance(after, (str, bytes)) or not hasattr(after, "__iter__"):
            raise InvalidArgumentError(
                f"after must be a sequence of job ids, got {describe(after)}"
            )
        ids: dict[int, None] = {}  # deduplicated, in order
        for item in after:
            if type(item) is bool or not isinstance(item, int) or not 1 <= item <= AFTER_ID_MAX:
                raise InvalidArgumentError(f"after: {item!r} is not a job id (a positive int)")
            ids[int(item)] = None
        if len(ids) > AFTER_MAX:
            raise InvalidArgumentError(f"after: {len(ids)} parents, at most {AFTER_MAX}")
        if self.dedupe_key is not None or self.debounce_key is not None:
            raise InvalidArgumentError("after cannot be combined with dedupe_key or debounce_key")
        object.__setattr__(self, "after", tuple(ids))

    def _check_debounce(self) -> None:
        if self.debounce_key is not None:
            check_dedupe_key("debounce_key", self.debounce_key)
            if self.dedupe_key is not None:
                raise InvalidArgumentError(
                    f"give dedupe_key or debounce_key, not both (got {self.dedupe_key!r} "
                    f"and {self.debounce_key!r})"
                )
        if self.debounce_s is not None:
            check_positive("debounce_s", self.debounce_s)
            if self.debounce_key is None:
                raise InvalidArgumentError(f"debounce_s={self.debounce_s!r} needs a debounce_key")
            if self.delay_s is not None or self.run_at is not None:
                raise InvalidArgumentError(
                    "debounce_s sets when the job runs: give it without delay_s or run_at"
                )


class Stamps(NamedTuple):
    """What an engine writes on each enqueued row, all but the clock resolved.

    The engine computes ``run_at = run_at if given else now + delay_s`` and
    ``expires_at = now + expires_in_s`` with one reading of its own clock.
    """

    priority: int
    delay_s: float
    run_at: datetime | None
    expires_in_s: float | None
    max_attempts: int
    visibility_timeout_s: float
    retry_base_s: float
    partition_key: str | None = None


def resolve(queue: QueueOpts, opts: EnqueueOpts | None) -> Stamps:
    """Resolve enqueue options over a queue's stamps (delay wins over run_at)."""
    if opts is None:
        return Stamps(
            queue.priority,
            0.0,
            None,
            queue.expires_in_s,
            queue.max_attempts,
            float(queue.visibility_timeout_s),
            float(queue.retry_base_s),
        )
    if not isinstance(opts, EnqueueOpts):
        raise InvalidArgumentError(f"opts must be an EnqueueOpts, got {describe(opts)}")
    if opts.delay_s is not None:
        delay, run_at = float(opts.delay_s), None
    else:
        delay, run_at = 0.0, opts.run_at
    return Stamps(
        queue.priority if opts.priority is None else opts.priority,
        delay,
        run_at,
        queue.expires_in_s if opts.expires_in_s is None else opts.expires_in_s,
        queue.max_attempts if opts.max_attempts is None else opts.max_attempts,
        float(queue.visibility_timeout_s),
        float(queue.retry_base_s),
        opts.partition_key,
    )
