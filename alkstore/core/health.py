"""``alkstore doctor``'s decisions: a verdict and a fix per fact (I/O-free).

An engine gathers a :class:`HealthFacts` snapshot (``Engine.health_facts``:
table statistics, what holds back PostgreSQL's xmin horizon, claims past their
deadline, the schema version, SQLite's WAL, and what its role could not see);
``Admin.health`` adds the registered workers and this host's clock offset.
:func:`diagnose` turns the snapshot into findings under :class:`Thresholds`;
one finding with verdict :data:`ACTION` makes the doctor exit 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

from alkstore.core.display import describe
from alkstore.errors import InvalidArgumentError

__all__ = [
    "ACTION",
    "OK",
    "UNKNOWN",
    "VERDICTS",
    "Finding",
    "Health",
    "HealthFacts",
    "OverdueClaims",
    "TableHealth",
    "Thresholds",
    "WorkerSeen",
    "XminHolder",
    "clock_offset",
    "diagnose",
    "first_line",
    "needs_action",
]

OK = "ok"
ACTION = "action"  # something needs doing: the doctor exits 1
UNKNOWN = "unknown"  # the store's role could not see it (the fix says what grant shows it)
VERDICTS = (OK, ACTION, UNKNOWN)
_QUERY_CHARS = 120


@dataclass(frozen=True, slots=True)
class TableHealth:
    """One alkstore table's row statistics (PostgreSQL ``pg_stat_user_tables``)."""

    table: str
    live_rows: int
    dead_rows: int
    vacuum_ago_s: float | None  # last manual VACUUM, None: never (since stats reset)
    autovacuum_ago_s: float | None


@dataclass(frozen=True, slots=True)
class XminHolder:
    """Something holding back the xmin horizon: a session, a prepared transaction or a
    replication slot (``kind``), with its transaction's age in xids and seconds."""

    kind: str  # "session", "prepared" or "slot"
    pid: int | None
    name: str  # the session's role, the prepared transaction's gid, the slot's name
    state: str | None
    xid_age: int
    age_s: float | None
    query: str | None  # the first line of the session's current or last query


@dataclass(frozen=True, slots=True)
class OverdueClaims:
    """Claims of one queue still ``processing`` past their deadline."""

    queue: str
    jobs: int
    overdue_s: float  # how long ago the oldest of them lapsed


@dataclass(frozen=True, slots=True)
class WorkerSeen:
    """A registered worker's last heartbeat."""

    id: str
    host: str
    pid: int
    seen_ago_s: float


@dataclass(frozen=True, slots=True)
class HealthFacts:
    """What one look at the store found; empty tuples where the engine has no such thing."""

    engine: str
    schema_version: int
    expected_version: int
    db_now: float | None = None  # the database's clock (POSIX s); None: it is this host's
    tables: tuple[TableHealth, ...] = ()
    xmin_holders: tuple[XminHolder, ...] = ()  # oldest first
    overdue: tuple[OverdueClaims, ...] = ()
    wal_bytes: int | None = None  # SQLite: the -wal file's size
    checkpoint_lag_bytes: int | None = None  # SQLite: WAL frames not yet copied back
    blind: tuple[tuple[str, str], ...] = ()  # (what could not be seen, the grant that shows it)
    workers: tuple[WorkerSeen, ...] = ()
    clock_offset_s: float | None = None  # database clock minus this host's


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Where each fact starts to need action (the ``alkstore doctor`` options)."""

    dead_rows: int = 10_000  # ten times alk_jobs' autovacuum threshold (schema.sql)
    xmin_age_s: float = 300.0  # any transaction holding the horizon this long
    idle_xact_s: float = 60.0  # an idle-in-transaction session holding it this long
    claim_overdue_s: float = 60.0  # a lapsed claim no worker took over for this long
    silent_s: float = 30.0  # six missed beats at the default 5 s presence interval
    clock_skew_s: float = 2.0
    checkpoint_lag_bytes: int = 64 * 2**20

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value < 0:
                raise InvalidArgumentError(
                    f"threshold {f.name} must be a number >= 0, got {describe(value)}"
                )


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's verdict on one subject, what was seen, and what to do."""

    check: str
    subject: str
    verdict: str
    detail: str
    fix: str


@dataclass(frozen=True, slots=True)
class Health:
    """The facts of one look at the store and the findings on them."""

    facts: HealthFacts
    findings: tuple[Finding, ...]

    @property
    def needs_action(self) -> bool:
        """Whether any finding needs action (the doctor's exit 1)."""
        return needs_action(self.findings)


def first_line(query: str | None) -> str | None:
    """A query's first non-blank line, cut to a screen's width."""
    if query is None:
        return None
    for line in query.splitlines():
        if line.strip():
            line = " ".join(line.split())
            return line if len(line) <= _QUERY_CHARS else line[: _QUERY_CHARS - 1] + "…"
    return ""


def clock_offset(sent: float, received: float, db_now: float) -> float:
    """The database clock minus this host's, read between ``sent`` and ``received``
    (this host's clock) as the midpoint of the round trip."""
    return db_now - (sent + received) / 2


def needs_action(findings: Sequence[Finding]) -> bool:
    """Whether any finding needs action (the doctor's exit 1)."""
    return any(f.verdict == ACTION for f in findings)


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    return f"{_span(seconds)} ago"


def _span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 120:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n} {unit}"
        n //= 1024
    return f"{n} GiB"


def _migration(facts: HealthFacts) -> Finding:
    have, want = facts.schema_version, facts.expected_version
    detail = f"schema version {have}, this alkstore's is {want}"
    if have == want:
        return Finding("migration", "schema", OK, detail, "")
    if have < want:
        fix = "run `alkstore migrate` as a role that may create tables"
    else:
        fix = "upgrade alkstore on this host (the schema is newer)"
    return Finding("migration", "schema", ACTION, detail, fix)


def _tables(facts: HealthFacts, limits: Thresholds) -> list[Finding]:
    found = []
    for t in facts.tables:
        detail = (
            f"{t.dead_rows} dead / {t.live_rows} live rows; vacuum {_ago(t.vacuum_ago_s)}, "
            f"autovacuum {_ago(t.autovacuum_ago_s)}"
        )
        if t.dead_rows < limits.dead_rows:
            found.append(Finding("dead rows", t.table, OK, detail, ""))
            continue
        fix = (
            f"VACUUM {t.table} (as its owner); if the dead rows stay, a transaction holds "
            "the xmin horizon back (see the xmin finding) and must end first"
        )
        found.append(Finding("dead rows", t.table, ACTION, detail, fix))
    return found


def _holder_fix(h: XminHolder) -> str:
    if h.kind == "prepared":
        return f"COMMIT PREPARED or ROLLBACK PREPARED '{h.name}'"
    if h.kind == "slot":
        return f"consume or drop the replication slot: SELECT pg_drop_replication_slot('{h.name}')"
    fix = f"end it in its application, or SELECT pg_terminate_backend({h.pid})"
    if h.state is not None and h.state.startswith("idle in transaction"):
        fix += "; set idle_in_transaction_session_timeout so it cannot recur"
    return fix


def _xmin(facts: HealthFacts, limits: Thresholds) -> list[Finding]:
    if facts.engine != "postgres":
        return []
    found = []
    for i, h in enumerate(facts.xmin_holders):
        subject = f"pid {h.pid}" if h.kind == "session" else f"{h.kind} {h.name}"
        age = "" if h.age_s is None else f", open {_span(h.age_s)}"
        detail = f"{h.kind} holds the xmin horizon {h.xid_age} transactions back{age}"
        if h.kind == "session":
            detail += f"; role {h.name}, state {h.state or '?'}, query: {h.query or '?'}"
        if h.kind == "session" and h.state is None and h.age_s is None:
            # another role's session, seen without pg_read_all_stats: xmin and pid only
            detail = (
                f"a session of role {h.name} holds the xmin horizon {h.xid_age} transactions "
                "back; its state, age and query are hidden from this role"
            )
            fix = f"look as a role with pg_read_all_stats, or SELECT pg_terminate_backend({h.pid})"
            found.append(Finding("xmin horizon", subject, UNKNOWN, detail, fix))
            continue
        idle = h.state is not None and h.state.startswith("idle in transaction")
        limit = limits.idle_xact_s if idle else limits.xmin_age_s
        # a slot or a prepared transaction has no start time: it needs action at once
        if h.age_s is None or h.age_s >= limit:
            found.append(Finding("xmin horizon", subject, ACTION, detail, _holder_fix(h)))
        elif i == 0:  # the oldest is always shown
            found.append(Finding("xmin horizon", subject, OK, detail, ""))
    if not facts.xmin_holders:
        found.append(Finding("xmin horizon", "database", OK, "no transaction holds it back", ""))
    return found


def _overdue(facts: HealthFacts, limits: Thresholds) -> list[Finding]:
    found = []
    for c in facts.overdue:
        detail = f"{c.jobs} claim(s) past their deadline, the oldest by {_span(c.overdue_s)}"
        if c.overdue_s < limits.claim_overdue_s:
            found.append(Finding("claims past deadline", c.queue, OK, detail, ""))
            continue
        fix = (
            f"no worker is claiming from {c.queue!r} (the next claim takes lapsed ones "
            "over): start or resume a worker for it, or check that the queue is not paused"
        )
        found.append(Finding("claims past deadline", c.queue, ACTION, detail, fix))
    if not facts.overdue:
        found.append(Finding("claims past deadline", "all queues", OK, "none", ""))
    return found


def _workers(facts: HealthFacts, limits: Thresholds) -> list[Finding]:
    found = []
    beating = 0
    for w in facts.workers:
        if w.seen_ago_s < limits.silent_s:
            beating += 1
            continue
        detail = f"worker {w.id} on {w.host} (pid {w.pid}) last beat {_ago(w.seen_ago_s)}"
        fix = (
            f"check pid {w.pid} on {w.host}: a hung or killed worker's claims lapse at their "
            "deadline and are taken over; its row is purged after an hour"
        )
        found.append(Finding("silent workers", w.id, ACTION, detail, fix))
    found.insert(0, Finding("silent workers", "registry", OK, f"{beating} beating", ""))
    return found


def _clock(facts: HealthFacts, limits: Thresholds) -> list[Finding]:
    offset = facts.clock_offset_s
    if offset is None:
        return []
    detail = f"the database clock is {_span(offset)} {'ahead of' if offset >= 0 else 'behind'}"
    detail += " this host's"
    if abs(offset) < limits.clock_skew_s:
        return [Finding("clock skew", "this host", OK, detail, "")]
    fix = (
        "sync this host's clock (chrony/NTP): delays, expiries and schedules are "
        "the database's time, while the worker's deadlines and backoff are this host's"
    )
    return [Finding("clock skew", "this host", ACTION, detail, fix)]


def _wal(facts: HealthFacts, limits: Thresholds) -> list[Finding]:
    if facts.wal_bytes is None:
        return []
    lag = facts.checkpoint_lag_bytes
    detail = f"WAL file {_size(facts.wal_bytes)}"
    detail += "; checkpoint lag unknown" if lag is None else f", {_size(lag)} not checkpointed"
    if lag is None or lag < limits.checkpoint_lag_bytes:
        return [Finding("wal", "write-ahead log", OK, detail, "")]
    fix = (
        "a long reader keeps checkpoints from finishing: end it, then run "
        "PRAGMA wal_checkpoint(TRUNCATE) on the store file"
    )
    return [Finding("wal", "write-ahead log", ACTION, detail, fix)]


def _blind(facts: HealthFacts) -> list[Finding]:
    return [
        Finding("visibility", what, UNKNOWN, "not visible to this role", fix)
        for what, fix in facts.blind
    ]


def diagnose(facts: HealthFacts, limits: Thresholds | None = None) -> list[Finding]:
    """Every finding of ``facts`` under ``limits`` (default :class:`Thresholds`), in the
    doctor's order."""
    limits = limits or Thresholds()
    return [
        _migration(facts),
        *_xmin(facts, limits),
        *_tables(facts, limits),
        *_overdue(facts, limits),
        *_workers(facts, limits),
        *_clock(facts, limits),
        *_wal(facts, limits),
        *_blind(facts),
    ]
