"""core.health: verdicts and fixes from facts alone (no database)."""

from __future__ import annotations

import struct
import sys

import pytest

from alkstore.core.health import (
    ACTION,
    OK,
    UNKNOWN,
    HealthFacts,
    OverdueClaims,
    TableHealth,
    Thresholds,
    WorkerSeen,
    XminHolder,
    clock_offset,
    diagnose,
    first_line,
    needs_action,
)
from alkstore.engines.sqlite.health import checkpoint_lag
from alkstore.errors import InvalidArgumentError


def _pg(**kw: object) -> HealthFacts:
    return HealthFacts(engine="postgres", schema_version=6, expected_version=6, **kw)  # type: ignore[arg-type]


def _verdicts(facts: HealthFacts, limits: Thresholds | None = None) -> dict[tuple[str, str], str]:
    return {(f.check, f.subject): f.verdict for f in diagnose(facts, limits)}


def test_a_healthy_snapshot_needs_nothing() -> None:
    found = diagnose(_pg(tables=(TableHealth("alk_jobs", 10, 5, None, 3.0),)))
    assert not needs_action(found)
    assert {f.verdict for f in found} == {OK}


def test_dead_rows_past_the_threshold_need_a_vacuum() -> None:
    facts = _pg(tables=(TableHealth("alk_jobs", 10, 20_000, None, 7200.0),))
    (finding,) = [f for f in diagnose(facts) if f.check == "dead rows"]
    assert finding.verdict == ACTION and "VACUUM alk_jobs" in finding.fix
    assert "autovacuum 2.0h ago" in finding.detail
    assert _verdicts(facts, Thresholds(dead_rows=20_001))[("dead rows", "alk_jobs")] == OK


def test_an_idle_in_transaction_holder_has_the_stricter_limit() -> None:
    idle = XminHolder("session", 42, "app", "idle in transaction", 900, 90.0, "SELECT 1")
    active = XminHolder("session", 43, "app", "active", 800, 90.0, "SELECT 2")
    found = {f.subject: f for f in diagnose(_pg(xmin_holders=(idle, active)))}
    assert found["pid 42"].verdict == ACTION
    assert "pg_terminate_backend(42)" in found["pid 42"].fix
    assert "idle_in_transaction_session_timeout" in found["pid 42"].fix
    assert "pid 43" not in found  # under xmin_age_s, and not the oldest
    assert _verdicts(_pg(xmin_holders=(active,)))[("xmin horizon", "pid 43")] == OK


def test_a_prepared_transaction_or_slot_needs_action_at_once() -> None:
    slot = XminHolder("slot", None, "standby1", None, 5, None, None)
    found = diagnose(_pg(xmin_holders=(slot,)))
    (f,) = [f for f in found if f.check == "xmin horizon"]
    assert f.verdict == ACTION and "pg_drop_replication_slot('standby1')" in f.fix


def test_a_hidden_session_is_unknown_and_the_blind_spot_names_the_grant() -> None:
    hidden = XminHolder("session", 7, "other", None, 100, None, None)
    facts = _pg(xmin_holders=(hidden,), blind=(("other roles' sessions", "GRANT x"),))
    found = diagnose(facts)
    assert not needs_action(found)
    assert [f.subject for f in found if f.verdict == UNKNOWN] == ["pid 7", "other roles' sessions"]


def test_overdue_claims_silent_workers_and_clock_skew() -> None:
    facts = _pg(
        overdue=(OverdueClaims("mail", 3, 120.0), OverdueClaims("sms", 1, 5.0)),
        workers=(WorkerSeen("w1", "h", 1, 1.0), WorkerSeen("w2", "h", 2, 45.0)),
        clock_offset_s=-3.0,
    )
    v = _verdicts(facts)
    assert v[("claims past deadline", "mail")] == ACTION
    assert v[("claims past deadline", "sms")] == OK
    assert v[("silent workers", "w2")] == ACTION and ("silent workers", "w1") not in v
    assert v[("clock skew", "this host")] == ACTION
    assert _verdicts(facts, Thresholds(clock_skew_s=5))[("clock skew", "this host")] == OK


def test_migration_state() -> None:
    behind = HealthFacts(engine="sqlite", schema_version=5, expected_version=6)
    (f,) = [f for f in diagnose(behind) if f.check == "migration"]
    assert f.verdict == ACTION and "alkstore migrate" in f.fix


def test_sqlite_checkpoint_lag_from_the_wal_index() -> None:
    order = "<" if sys.byteorder == "little" else ">"
    header = struct.pack(f"{order}IIIBBHI", 3007000, 0, 1, 1, 0, 4096, 250) + bytes(28)
    shm = header * 2 + struct.pack(f"{order}I", 50) + bytes(100)
    assert checkpoint_lag(shm) == 200 * (4096 + 24)
    wal = HealthFacts("sqlite", 6, 6, wal_bytes=10**8, checkpoint_lag_bytes=checkpoint_lag(shm))
    assert _verdicts(wal)[("wal", "write-ahead log")] == OK
    assert (
        _verdicts(wal, Thresholds(checkpoint_lag_bytes=1000))[("wal", "write-ahead log")] == ACTION
    )
    assert checkpoint_lag(b"short") is None


def test_helpers_and_bad_thresholds() -> None:
    assert first_line("\n  SELECT  a,\n b") == "SELECT a,"
    assert first_line("x" * 500) is not None and len(first_line("x" * 500) or "") == 120
    assert clock_offset(10.0, 12.0, 14.0) == 3.0
    with pytest.raises(InvalidArgumentError, match="xmin_age_s"):
        Thresholds(xmin_age_s=-1)
    with pytest.raises(InvalidArgumentError, match="dead_rows"):
        Thresholds(dead_rows=True)
