"""The PostgreSQL engine's options: parsed from the URL query and ``connect()`` keywords.

alkstore's own options are taken out of the URL before the rest goes to libpq;
a URL query key that is neither alkstore's nor a libpq keyword, and any unknown
``connect()`` keyword, raises :class:`InvalidArgumentError` naming it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from psycopg import pq

from alkstore.core.options import DURATION_MAX_S, check_switch, describe
from alkstore.errors import InvalidArgumentError

__all__ = ["CONNECTION_DEFAULTS", "OPTION_NAMES", "PgSettings", "parse_settings"]

_INT_MAX = 2**31 - 1
WAKE_MODES = ("coalesce", "on", "off")

# option name -> what it means (README "Configuration", docs/postgres.md)
OPTION_NAMES = {
    "pool_min": "connections the pool keeps open (default 1)",
    "pool_max": "connections the pool may open (default 10)",
    "pool_timeout_s": "how long an operation waits for a pool connection (default 30)",
    "wake": "enqueue wakes: coalesce (default), on (one per enqueue, awaited) or off",
    "wake_coalesce_ms": "at most one wake per queue per this many ms (default 2)",
    "listen": "on (default) or off: poll-only mode, for PgBouncer transaction pooling",
    "prepare": "on (default) or off: no server-side prepared statements (PgBouncer)",
    "migrate": "on (default): connect() creates or upgrades the schema; off: it only checks it",
    "handoff": "on (default): an enqueue may hand its job to an idle worker; off: never",
}


# libpq parameters set unless the URL (or, for connect_timeout, PGCONNECT_TIMEOUT) sets
# them (docs/postgres.md, "Connection defaults"). Without them a cut network leaves a
# statement waiting for the kernel's retransmissions (~15 min) and an idle connection
# dead forever: with them a dead peer fails the connection in about 10 s.
CONNECTION_DEFAULTS = {
    "connect_timeout": "5",  # seconds for a connection attempt
    "keepalives": "1",
    "keepalives_idle": "5",  # an idle connection is probed after 5 s of silence,
    "keepalives_interval": "2",  # every 2 s,
    "keepalives_count": "3",  # and dropped after 3 unanswered probes (~11 s)
    "tcp_user_timeout": "10000",  # ms: data unacknowledged this long drops the connection
}
_DEFAULT_FROM_ENV = {"connect_timeout": "PGCONNECT_TIMEOUT"}


def _with_defaults(libpq: list[tuple[str, str]], keywords: frozenset[str]) -> None:
    given = {key for key, _ in libpq}
    for key, value in CONNECTION_DEFAULTS.items():
        env = _DEFAULT_FROM_ENV.get(key)
        if key in given or key not in keywords or (env is not None and os.environ.get(env)):
            continue
        libpq.append((key, value))


@dataclass(frozen=True, slots=True)
class PgSettings:
    """Everything the engine needs besides the schema."""

    conninfo: str
    pool_min: int = 1
    pool_max: int = 10
    pool_timeout_s: float = 30.0
    wake: str = "coalesce"
    wake_coalesce_s: float = 0.002
    listen: bool = True
    prepare: bool = True
    migrate: bool = True
    handoff: bool = True


def _libpq_keywords() -> frozenset[str]:
    return frozenset(opt.keyword.decode() for opt in pq.Conninfo.get_defaults())


def _int(key: str, value: object, minimum: int) -> int:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{key} must be an int, got {describe(value)}")
    try:
        number = value if isinstance(value, int) else int(str(value))
    except ValueError:
        raise InvalidArgumentError(f"{key} must be an int, got {describe(value)}") from None
    if not minimum <= number <= _INT_MAX:
        raise InvalidArgumentError(
            f"{key} must be an int in [{minimum}, {_INT_MAX}], got {describe(value)}"
        )
    return number


def _float(key: str, value: object, minimum: float) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]  # validated by the except below
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{key} must be a number, got {describe(value)}") from None
    if isinstance(value, bool) or not minimum <= number <= DURATION_MAX_S:
        raise InvalidArgumentError(
            f"{key} must be a finite number in [{minimum}, {DURATION_MAX_S:.0f}], "
            f"got {describe(value)}"
        )
    return number


def parse_settings(url: str, options: dict[str, Any]) -> PgSettings:
    """Split ``url`` into libpq's conninfo and alkstore's options (keywords win)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours: dict[str, Any] = {}
    libpq: list[tuple[str, str]] = []
    keywords = _libpq_keywords()
    unknown = []
    for key, value in query:
        if key in OPTION_NAMES:
            ours[key] = value
        elif key in keywords:
            libpq.append((key, value))
        else:
            unknown.append(key)
    unknown += [key for key in options if key not in OPTION_NAMES]
    if unknown:
        raise InvalidArgumentError(
            f"unknown PostgreSQL option(s) {sorted(set(unknown))}: alkstore's are "
            f"{sorted(OPTION_NAMES)}, and the URL may carry libpq parameters"
        )
    ours.update(options)
    _with_defaults(libpq, keywords)
    # percent-encoded (a space as %20): libpq reads a '+' in a URI as a plus sign, so
    # urlencode's default would turn `options=-c%20x%3Dy` into `-c+x=y`
    conninfo = urlunsplit(parts._replace(query=urlencode(libpq, quote_via=quote)))

    wake = str(ours.get("wake", "coalesce")).lower()
    if wake not in WAKE_MODES:
        raise InvalidArgumentError(
            f"wake must be one of {', '.join(WAKE_MODES)}, got {describe(wake)}"
        )
    pool_min = _int("pool_min", ours.get("pool_min", 1), 0)
    pool_max = _int("pool_max", ours.get("pool_max", max(10, pool_min)), 1)
    if pool_max < pool_min:
        raise InvalidArgumentError(f"pool_max ({pool_max}) must be >= pool_min ({pool_min})")
    return PgSettings(
        conninfo=conninfo,
        pool_min=pool_min,
        pool_max=pool_max,
        pool_timeout_s=_float("pool_timeout_s", ours.get("pool_timeout_s", 30.0), 0.001),
        wake=wake,
        wake_coalesce_s=_float("wake_coalesce_ms", ours.get("wake_coalesce_ms", 2.0), 0.0) / 1000,
        listen=check_switch("listen", ours.get("listen", "on")),
        prepare=check_switch("prepare", ours.get("prepare", "on")),
        migrate=check_switch("migrate", ours.get("migrate", "on")),
        handoff=check_switch("handoff", ours.get("handoff", "on")),
    )
