"""Job, SweepResult and Notification snapshots (core/job.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from alkstore.core.job import ROW_FIELDS, Job, Notification, SweepResult

T0 = 1_700_000_000.5


def row(**overrides: object) -> tuple[object, ...]:
    values: dict[str, object] = {
        "id": 7,
        "queue": "emails",
        "payload": b'{"a":1}',
        "state": "processing",
        "priority": 3,
        "run_at": T0,
        "created_at": T0 - 1,
        "attempts": 1,
        "max_attempts": 5,
        "visibility_timeout_s": 30,
        "retry_base_s": 1,
        "expires_at": None,
        "worker_id": "w1",
        "claim_expires_at": T0 + 30,
        "last_error": None,
        "died_at": None,
        "dedupe_key": None,
        "partition_key": None,
    }
    values.update(overrides)
    return tuple(values[name] for name in ROW_FIELDS)


def test_fields_read_from_the_row() -> None:
    job = Job(row())
    assert (job.id, job.queue, job.state, job.priority) == (7, "emails", "processing", 3)
    assert (job.attempts, job.max_attempts, job.worker_id) == (1, 5, "w1")
    assert job.visibility_timeout_s == 30.0 and type(job.visibility_timeout_s) is float
    assert job.retry_base_s == 1.0 and type(job.retry_base_s) is float
    assert job.expires_at is None and job.last_error is None and job.died_at is None
    assert job.dedupe_key is None and Job(row(dedupe_key="k")).dedupe_key == "k"
    assert Job(row()[:16]).dedupe_key is None  # a row of the v1 layout has no key
    assert job.partition_key is None and Job(row(partition_key="t")).partition_key == "t"
    assert Job(row()[:17]).partition_key is None  # a row of the older layout has no key


def test_times_are_aware_utc_datetimes_from_posix_seconds() -> None:
    job = Job(row(expires_at=T0 + 60, died_at=T0 + 2))
    for value, seconds in [
        (job.run_at, T0),
        (job.created_at, T0 - 1),
        (job.claim_expires_at, T0 + 30),
        (job.expires_at, T0 + 60),
        (job.died_at, T0 + 2),
    ]:
        assert isinstance(value, datetime)
        assert value.tzinfo is UTC
        assert value.timestamp() == seconds


def test_aware_datetimes_are_normalised_to_utc() -> None:
    plus2 = timezone(timedelta(hours=2))
    at = datetime(2030, 5, 1, 12, 0, tzinfo=plus2)
    job = Job(row(run_at=at, created_at=at.astimezone(UTC)))
    assert job.run_at.tzinfo is UTC
    assert job.run_at == at
    assert job.created_at.tzinfo is UTC


def test_payload_is_exact_bytes_and_decodes() -> None:
    job = Job(row(payload=memoryview(b'{"a":1}')))
    assert job.payload == b'{"a":1}' and type(job.payload) is bytes
    assert job.json() == {"a": 1}
    assert job.text() == '{"a":1}'


def test_job_is_immutable() -> None:
    job = Job(row())
    with pytest.raises(AttributeError):
        job.attempts = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        job._row = row(attempts=2)
    with pytest.raises(AttributeError):
        job.anything = 1  # type: ignore[attr-defined]
    assert job.attempts == 1


def test_equality_and_hash_are_by_value() -> None:
    a, b = Job(row()), Job(row())
    assert a == b and hash(a) == hash(b)
    assert a != Job(row(attempts=2))
    assert a != Job(row(payload=b"other"))
    assert a != row()
    assert len({a, b, Job(row(id=8))}) == 2


def test_as_dict_names_every_field() -> None:
    d = Job(row()).as_dict()
    assert list(d) == list(ROW_FIELDS)
    assert d["run_at"] == datetime.fromtimestamp(T0, UTC)


def test_repr_is_short_and_informative() -> None:
    text = repr(Job(row(payload=b"x" * 1000)))
    assert "id=7" in text and "emails" in text and len(text) < 200


def test_sweep_result_and_notification_are_tuples_with_names() -> None:
    assert SweepResult(2, 3) == (2, 3, 0, 0)  # results_purged and keys_purged default to 0
    assert SweepResult(expired=2, purged=3).purged == 3
    note = Notification("ch", "hello")
    assert (note.channel, note.payload) == ("ch", "hello")
    with pytest.raises(AttributeError):
        note.channel = "x"  # type: ignore[misc]


def test_times_beyond_the_datetime_range_clamp_to_its_ends() -> None:
    big = datetime.max.replace(tzinfo=UTC).timestamp()  # rounds up past year 9999
    assert Job(row(run_at=big)).run_at == datetime.max.replace(tzinfo=UTC)
    assert Job(row(run_at=-1e20)).run_at == datetime.min.replace(tzinfo=UTC)
