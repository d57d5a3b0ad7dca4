"""The job filter language: one parser and one value for the API, the CLI and the dashboard.

A filter is a list of terms, all of which must hold (AND); a term that names
several values (``queue:a,b``) holds if any does (OR)::

    queue:emails,sms  task:send_email  state:dead,delayed  worker:w-1
    error:timeout                 last_error contains "timeout" (case-insensitive)
    args.to=a@example.com         JSON path from the payload's "args" equals a scalar
    payload.user.id=7             JSON path from the payload's root equals a scalar
    args.tags~vip                 contains: a substring of a string, an element of an array
    created>-1h  created<2026-12-03T18:00Z  run_at>...  died>...

Values after ``=`` / ``~`` are JSON if they parse as a JSON scalar (``7``,
``true``, ``null``, ``"7"``), else text. Times are ISO-8601 (UTC if no zone) or
relative to now (``-15m``, ``-2h``, ``-7d``), resolved once at parse time, so a
stored filter (a bulk action's) means the same rows whenever it runs.

This module is I/O-free: it parses and validates into a :class:`JobFilter`;
each engine compiles that value to its own SQL with bound parameters. The
searchable states live in :data:`SEARCH_STATES` and nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from alkstore.core.names import check_name
from alkstore.core.options import describe
from alkstore.errors import InvalidArgumentError, InvalidNameError

__all__ = [
    "DEAD_STATES",
    "LIVE_STATES",
    "SEARCH_STATES",
    "TIME_FIELDS",
    "ArgTerm",
    "JobFilter",
    "Scalar",
    "TimeRange",
    "parse_filter",
]

# The states a search can ask for, the one list (a new state is added here and
# given a condition in each engine's compiler; tests/unit/test_filters.py checks
# that every engine maps every live state). "pending" is due now, "delayed" waits
# for its run_at; both are the live row state 'pending'. "blocked" waits for its
# parents (docs/workflows.md).
LIVE_STATES: tuple[str, ...] = ("pending", "delayed", "processing", "blocked")
DEAD_STATES: tuple[str, ...] = ("dead",)
SEARCH_STATES: tuple[str, ...] = LIVE_STATES + DEAD_STATES

# time-range fields and what they read: created_at, run_at, died_at (dead rows only)
TIME_FIELDS: tuple[str, ...] = ("created", "run_at", "died")

Scalar = str | int | float | bool | None

_MAX_TERMS = 32
_MAX_TEXT = 1000
_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
_TERM = re.compile(r"^([a-z_][a-z0-9_.\-]*?)(:|=|~|>|<)(.*)$", re.DOTALL)
_AGO = re.compile(r"^-(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class ArgTerm:
    """A JSON path (keys from the payload's root) that equals or contains a scalar."""

    path: tuple[str, ...]
    op: Literal["eq", "contains"]
    value: Scalar

    def __post_init__(self) -> None:
        _check_arg(self)

    def text(self) -> str:
        """The term as the language writes it (``payload.`` form)."""
        sign = "=" if self.op == "eq" else "~"
        value = self.value
        shown = value if isinstance(value, str) and _plain(value) else json.dumps(value)
        return f"payload.{'.'.join(self.path)}{sign}{shown}"


@dataclass(frozen=True)
class TimeRange:
    """``field`` (one of :data:`TIME_FIELDS`) after ``since`` and/or before ``until``
    (POSIX seconds, both exclusive)."""

    field: str
    since: float | None = None
    until: float | None = None

    def __post_init__(self) -> None:
        _check_range(self)


@dataclass(frozen=True)
class JobFilter:
    """Which jobs: every non-empty part must hold. Build with :func:`parse_filter` or
    directly (``JobFilter(queues=("emails",), states=("dead",))``); validated on creation."""

    queues: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    states: tuple[str, ...] = ()  # empty: every state
    args: tuple[ArgTerm, ...] = ()
    error: str | None = None
    worker: str | None = None
    times: tuple[TimeRange, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("queues", "tasks", "states", "args", "times"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                raise InvalidArgumentError(f"{name} must be a tuple, got {describe(value)}")
        for queue in self.queues:
            _check_queue(queue)
        for task in self.tasks:
            if not isinstance(task, str) or not task or len(task) > 200 or "," in task:
                raise InvalidArgumentError(f"invalid task name {describe(task)}")
        for state in self.states:
            if state not in SEARCH_STATES:
                raise InvalidArgumentError(
                    f"invalid state {describe(state)}: use one of {', '.join(SEARCH_STATES)}"
                )
        for term in self.args:
            _check_arg(term)
        for text, what in ((self.error, "error"), (self.worker, "worker")):
            if text is not None and (not isinstance(text, str) or not text or len(text) > 500):
                raise InvalidArgumentError(f"invalid {what} text {describe(text)}")
        for rng in self.times:
            _check_range(rng)

    # -- what the engines ask ----------------------------------------------------
    def live_states(self) -> tuple[str, ...]:
        """The live states asked for (all of them if no state is named); none if only
        dead rows can match (a ``died`` range)."""
        if any(r.field == "died" for r in self.times):
            return ()
        return tuple(s for s in LIVE_STATES if not self.states or s in self.states)

    def wants_dead(self) -> bool:
        """Whether dead rows can match."""
        return not self.states or any(s in DEAD_STATES for s in self.states)

    def narrowed(self, states: tuple[str, ...]) -> JobFilter | None:
        """This filter limited to ``states`` (a bulk action's reach); ``None`` if no
        state is left (nothing can match)."""
        own = self.states or SEARCH_STATES
        kept = tuple(s for s in SEARCH_STATES if s in own and s in states)
        return dataclasses.replace(self, states=kept) if kept else None

    def text(self) -> str:
        """The filter in the language, absolute times: ``parse_filter(f.text()) == f``."""
        parts: list[str] = []
        if self.queues:
            parts.append("queue:" + ",".join(self.queues))
        if self.tasks:
            parts.append(shlex.quote("task:" + ",".join(self.tasks)))
        if self.states:
            parts.append("state:" + ",".join(self.states))
        parts += [shlex.quote(a.text()) for a in self.args]
        if self.error is not None:
            parts.append(shlex.quote("error:" + self.error))
        if self.worker is not None:
            parts.append(shlex.quote("worker:" + self.worker))
        for rng in self.times:
            if rng.since is not None:
                parts.append(f"{rng.field}>{_iso(rng.since)}")
            if rng.until is not None:
                parts.append(f"{rng.field}<{_iso(rng.until)}")
        return " ".join(parts)


def _plain(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return bool(text) and not any(c.isspace() or c in "'\"" for c in text)
    return False  # would read back as JSON


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _check_queue(queue: object) -> None:
    try:
        check_name(queue)
    except InvalidNameError as e:
        raise InvalidArgumentError(f"invalid queue in filter: {e}") from None


def _check_arg(term: object) -> None:
    if not isinstance(term, ArgTerm):
        raise InvalidArgumentError(f"args must hold ArgTerm values, got {describe(term)}")
    if not term.path or len(term.path) > 8:
        raise InvalidArgumentError(f"invalid JSON path {describe(term.path)}: 1 to 8 keys")
    for key in term.path:
        if not isinstance(key, str) or not _KEY.match(key):
            raise InvalidArgumentError(
                f"invalid JSON path key {describe(key)}: letters, digits, _ and - only"
            )
    if term.op not in ("eq", "contains"):
        raise InvalidArgumentError(f"invalid argument operator {describe(term.op)}")
    value = term.value
    if not (value is None or isinstance(value, str | int | float | bool)):
        raise InvalidArgumentError(
            f"an argument value must be a JSON scalar (text, number, true, false, null), "
            f"got {describe(value)}"
        )
    if isinstance(value, float) and value != value:
        raise InvalidArgumentError("an argument value cannot be NaN")


def _check_range(rng: object) -> None:
    if not isinstance(rng, TimeRange):
        raise InvalidArgumentError(f"times must hold TimeRange values, got {describe(rng)}")
    if rng.field not in TIME_FIELDS:
        raise InvalidArgumentError(
            f"invalid time field {describe(rng.field)}: use one of {', '.join(TIME_FIELDS)}"
        )
    for bound in (rng.since, rng.until):
        if bound is not None and (
            isinstance(bound, bool) or not isinstance(bound, int | float) or bound != bound
        ):
            raise InvalidArgumentError(f"invalid time bound {describe(bound)}")
    if rng.since is None and rng.until is None:
        raise InvalidArgumentError(f"time range on {rng.field} has no bound")


# -- parsing -----------------------------------------------------------------------
def _scalar(text: str) -> Scalar:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise InvalidArgumentError(
        f"an argument value must be a JSON scalar, got {describe(text)} (objects and arrays "
        "cannot be compared the same way on both engines)"
    )


def _time(text: str, now: float) -> float:
    ago = _AGO.match(text)
    if ago:
        return now - float(ago.group(1)) * _UNITS[ago.group(2)]
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgumentError(
            f"invalid time {describe(text)}: use ISO-8601 (2026-12-03T18:00Z) or -15m, -2h, -7d"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _split_terms(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:
        raise InvalidArgumentError(f"invalid filter {describe(text)}: {e}") from None


def parse_filter(text: str | list[str] | tuple[str, ...], now: float) -> JobFilter:
    """Parse the filter language (a string, or the terms already split, as a shell
    gives them) into a validated :class:`JobFilter`; ``now`` (POSIX seconds)
    resolves relative times. ``InvalidArgumentError`` names the bad term.

    >>> parse_filter("queue:emails state:dead error:timeout", now=time.time())
    """
    if isinstance(text, str):
        if len(text) > _MAX_TEXT:
            raise InvalidArgumentError(f"filter too long: {len(text)} characters (max {_MAX_TEXT})")
        terms = _split_terms(text)
    elif isinstance(text, list | tuple) and all(isinstance(t, str) for t in text):
        terms = list(text)
    else:
        raise InvalidArgumentError(f"a filter must be text, got {describe(text)}")
    if len(terms) > _MAX_TERMS:
        raise InvalidArgumentError(f"too many filter terms: {len(terms)} (max {_MAX_TERMS})")
    queues: list[str] = []
    tasks: list[str] = []
    states: list[str] = []
    args: list[ArgTerm] = []
    error: str | None = None
    worker: str | None = None
    ranges: dict[str, list[float | None]] = {}
    for term in terms:
        m = _TERM.match(term)
        if m is None:
            raise InvalidArgumentError(
                f"invalid filter term {describe(term)}: expected key:value, path=value, "
                "path~value or time>when"
            )
        key, sign, value = m.groups()
        if key.startswith(("args.", "payload.")) and sign in "=~":
            root, _, rest = key.partition(".")
            path = tuple(rest.split("."))
            if root == "args":
                path = ("args", *path)
            op: Literal["eq", "contains"] = "eq" if sign == "=" else "contains"
            try:
                args.append(ArgTerm(path, op, _scalar(value)))
            except InvalidArgumentError as e:
                raise InvalidArgumentError(f"invalid filter term {describe(term)}: {e}") from None
            continue
        if key in TIME_FIELDS and sign in "<>":
            bounds = ranges.setdefault(key, [None, None])
            bounds[0 if sign == ">" else 1] = _time(value, now)
            continue
        if sign != ":" or not value:
            raise InvalidArgumentError(f"invalid filter term {describe(term)}")
        if key == "queue":
            queues += value.split(",")
        elif key == "task":
            tasks += value.split(",")
        elif key == "state":
            states += value.split(",")
        elif key == "error":
            error = value
        elif key == "worker":
            worker = value
        else:
            raise InvalidArgumentError(
                f"unknown filter key {describe(key)}: use queue, task, state, worker, error, "
                f"args.PATH, payload.PATH or {', '.join(TIME_FIELDS)}"
            )
    return JobFilter(
        queues=tuple(dict.fromkeys(queues)),
        tasks=tuple(dict.fromkeys(tasks)),
        states=tuple(s for s in SEARCH_STATES if s in states) + _unknown(states),
        args=tuple(args),
        error=error,
        worker=worker,
        times=tuple(TimeRange(f, *ranges[f]) for f in TIME_FIELDS if f in ranges),
    )


def _unknown(states: list[str]) -> tuple[str, ...]:
    # kept so JobFilter's validation names the bad state
    return tuple(s for s in states if s not in SEARCH_STATES)[:1]
