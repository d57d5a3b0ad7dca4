"""A job's life, engine-neutral and free of I/O: the attempt history's records and
how it is read back, progress snapshots, and the keys of durable steps, sleeps and
signal waits (docs/durable.md).

Step keys are a step's name plus its occurrence in the attempt: the first call of
``"charge"`` is ``charge``, the second ``charge#2``. A later attempt that calls
the same names in the same order finds the same keys (deterministic replay).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from alkstore.core.names import is_storable_text
from alkstore.core.options import describe
from alkstore.errors import InvalidArgumentError

__all__ = [
    "GONE_LIFE_KEPT_S",
    "ATTEMPT_OUTCOMES",
    "DEFAULT_ATTEMPT_HISTORY",
    "STEP_NAME_MAX",
    "Attempt",
    "AttemptOutcome",
    "Progress",
    "StepKeys",
    "attempt_history",
    "check_progress",
    "check_step_name",
    "progress_of",
    "wait_key",
]

AttemptOutcome = Literal["success", "retry", "dead", "lost", "interrupted", "cancelled", "snoozed"]
ATTEMPT_OUTCOMES: frozenset[str] = frozenset(
    ("success", "retry", "dead", "lost", "interrupted", "cancelled", "snoozed")
)
DEFAULT_ATTEMPT_HISTORY = 20  # attempts kept per job (the newest); Worker(attempt_history=)
# a gone job's attempts and progress stay readable this long after its newest record
# (a cancelled run, or the failures before a success), then the sweep drops them
GONE_LIFE_KEPT_S = 3600.0
STEP_NAME_MAX = 200  # characters of a step, sleep or signal name
PROGRESS_MESSAGE_MAX = 1000  # characters of a progress message


def _utc(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.fromtimestamp(float(value), UTC)


@dataclass(frozen=True)
class Attempt:
    """One finished attempt of a job. ``outcome`` is what the database did:
    ``lost`` when the outcome was refused (the claim lapsed or was taken) or the
    worker vanished (a gap in the numbers, with no worker, host or times)."""

    number: int
    outcome: AttemptOutcome
    worker_id: str | None = None
    host: str | None = None
    claimed_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (times as ISO 8601)."""
        return {
            "number": self.number,
            "outcome": self.outcome,
            "worker_id": self.worker_id,
            "host": self.host,
            "claimed_at": None if self.claimed_at is None else self.claimed_at.isoformat(),
            "finished_at": None if self.finished_at is None else self.finished_at.isoformat(),
            "error": self.error,
        }


def attempt_history(
    rows: list[tuple[Any, ...]],
    attempts: int,
    state: str | None,
    end: tuple[AttemptOutcome, Any, str | None] | None = None,
) -> list[Attempt]:
    """The attempts of a job from its stored rows ``(attempt, worker_id, host,
    claimed_at, finished_at, outcome, error, trimmed)`` in write order, with a ``lost``
    entry for each number below the current claim that has no final row (its
    worker was killed: nobody wrote it). ``attempts`` and ``state`` are the job's
    now (``state`` None: the job is gone); a processing job's current attempt is
    not over and not listed. ``end`` is how the job ended, as its dead row or kept
    result says (outcome, finished_at, error): it stands for its last attempt while
    that attempt's own row is not written yet."""
    out: list[Attempt] = []
    final: set[int] = set()
    first = 1
    for number, worker, host, claimed, finished, outcome, error, trimmed in rows:
        if trimmed:  # older rows were cut to the bound: the numbers below are not lost
            first = max(first, int(number))
        out.append(
            Attempt(int(number), outcome, worker, host, _utc(claimed), _utc(finished), error)
        )
        if outcome != "snoozed":
            final.add(int(number))
    # attempts below the live count were spent; the processing one is in progress
    spent = attempts - 1 if state == "processing" else attempts
    missing = [n for n in range(first, spent + 1) if n not in final]
    if end is not None and spent in missing:
        missing.remove(spent)
        outcome, finished, error = end
        out.append(Attempt(spent, outcome, finished_at=_utc(finished), error=error))
    if missing:
        out.extend(Attempt(n, "lost") for n in missing)
        out.sort(key=lambda a: (a.number, a.finished_at is None))
    return out


@dataclass(frozen=True)
class Progress:
    """A job's latest reported progress: a fraction (0..1) or a count, a message,
    the attempt that reported it and when."""

    value: float
    message: str | None
    attempt: int
    updated_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "message": self.message,
            "attempt": self.attempt,
            "updated_at": self.updated_at.isoformat(),
        }


def progress_of(row: tuple[Any, ...] | None) -> Progress | None:
    """The snapshot of a stored ``(attempt, value, message, updated_at)`` row."""
    if row is None:
        return None
    attempt, value, message, updated = row
    stamp = _utc(updated)
    assert stamp is not None
    return Progress(float(value), message, int(attempt), stamp)


def check_progress(value: object, message: object) -> tuple[float, str | None]:
    """Validated progress: a finite number >= 0 and an optional short text."""
    if type(value) not in (int, float) or not (0 <= value < float("inf")):  # type: ignore[operator]
        raise InvalidArgumentError(
            f"progress must be a finite number >= 0 (a fraction or a count), got {describe(value)}"
        )
    if message is not None:
        if type(message) is not str or not is_storable_text(message):
            raise InvalidArgumentError(
                f"progress message must be None or a str without NUL, got {describe(message)}"
            )
        message = message[:PROGRESS_MESSAGE_MAX]
    return float(value), message  # type: ignore[arg-type]  # int or float, checked


def check_step_name(name: object, what: str = "step name") -> str:
    """A step, sleep or signal name: a non-empty str of at most ``STEP_NAME_MAX``
    characters, without NUL and ``#`` (it separates the occurrence), not starting
    with ``@`` (the keys of sleeps and waits)."""
    if (
        type(name) is not str
        or not name
        or len(name) > STEP_NAME_MAX
        or "#" in name
        or name.startswith("@")
        or not is_storable_text(name)
    ):
        raise InvalidArgumentError(
            f"{what} must be a non-empty str of at most {STEP_NAME_MAX} characters "
            f"without '#' or NUL and not starting with '@', got {describe(name)}"
        )
    return name


def wait_key(signal: str) -> str:
    """The step key under which a wait for ``signal`` keeps its deadline."""
    return f"@wait:{signal}"


class StepKeys:
    """The keys of one attempt's steps, in call order: ``name``, ``name#2``, ..."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def next(self, name: str) -> str:
        n = self._seen.get(name, 0) + 1
        self._seen[name] = n
        return name if n == 1 else f"{name}#{n}"
