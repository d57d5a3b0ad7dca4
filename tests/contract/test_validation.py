"""Validation: valid inputs round-trip exactly; invalid ones raise and write nothing."""

from __future__ import annotations

import json
import math
import string
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import alkstore
from alkstore import (
    EnqueueOpts,
    InvalidArgumentError,
    InvalidNameError,
    PayloadError,
    QueueOpts,
)

from .rawsql import count_rows

FIXTURE_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

NAME_CHARS = string.ascii_letters + string.digits + "_.:-"
names = st.builds(
    lambda first, rest: first + rest,
    st.sampled_from(NAME_CHARS.replace("_", "")),
    st.text(alphabet=NAME_CHARS, max_size=62),
)
storable_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | storable_text,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(storable_text, children, max_size=5)
    ),
    max_leaves=15,
)
payloads = st.one_of(
    st.binary(max_size=2000),
    storable_text,
    json_values.filter(lambda v: not isinstance(v, str)),
)


def stored_bytes(payload: object) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode()
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


@FIXTURE_SETTINGS
@given(
    name=names,
    payload=payloads,
    priority=st.integers(-(2**31), 2**31 - 1),
    max_attempts=st.integers(1, 2**31 - 1),
    visibility=st.floats(0.001, 1e6),
    base=st.floats(0, 1e5),
    worker=storable_text.filter(bool),
)
async def test_valid_inputs_round_trip_exactly(
    store: alkstore.Store,
    name: str,
    payload: object,
    priority: int,
    max_attempts: int,
    visibility: float,
    base: float,
    worker: str,
) -> None:
    q = store.queue(name, QueueOpts(visibility_timeout_s=visibility, retry_base_s=base))
    job_id = await q.enqueue(payload, EnqueueOpts(priority=priority, max_attempts=max_attempts))
    job = await q.get_job(job_id)
    assert job is not None
    assert job.queue == name
    assert job.payload == stored_bytes(payload)
    if not isinstance(payload, bytes | str):
        assert job.json() == payload
    assert (job.priority, job.max_attempts) == (priority, max_attempts)
    assert job.visibility_timeout_s == visibility and job.retry_base_s == base
    handle = await q.claim_one(worker)
    assert handle is not None and handle.job.id == job_id
    assert handle.job.worker_id == worker and handle.job.payload == job.payload
    assert await q.cancel(job_id)


@FIXTURE_SETTINGS
@given(
    delay=st.floats(0, 1e7),
    expires=st.floats(0.001, 1e7),
    run_at=st.datetimes(
        min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ),
)
async def test_times_round_trip(
    store: alkstore.Store, qname: str, delay: float, expires: float, run_at: datetime
) -> None:
    q = store.queue(qname)
    delayed = await q.get_job(
        await q.enqueue(b"", EnqueueOpts(delay_s=delay, expires_in_s=expires))
    )
    assert delayed is not None and delayed.expires_at is not None
    tolerance = 1e-3 + 1e-9 * max(delay, expires)  # floats of POSIX seconds
    got = (delayed.run_at - delayed.created_at).total_seconds()
    assert math.isclose(got, delay, abs_tol=tolerance)
    got = (delayed.expires_at - delayed.created_at).total_seconds()
    assert math.isclose(got, expires, abs_tol=tolerance)
    at = await q.get_job(await q.enqueue(b"", EnqueueOpts(run_at=run_at)))
    assert at is not None and abs((at.run_at - run_at).total_seconds()) < 1e-5


@FIXTURE_SETTINGS
@given(
    bad=st.one_of(
        st.just(""),
        st.text(alphabet=NAME_CHARS, min_size=64, max_size=80),
        st.text(alphabet=NAME_CHARS, max_size=10).map(lambda s: "_" + s),
        st.text(min_size=1, max_size=10).filter(lambda s: any(c not in NAME_CHARS for c in s)),
    )
)
async def test_invalid_queue_names_raise_before_any_io(
    store: alkstore.Store,
    target,
    bad: str,  # type: ignore[no-untyped-def]
) -> None:
    before = await count_rows(store, target)
    with pytest.raises(InvalidNameError) as e:
        store.queue(bad)
    assert repr(bad)[:30] in str(e.value)
    async with store.transaction() as tx:
        with pytest.raises(InvalidNameError):
            tx.queue(bad)
    assert await count_rows(store, target) == before


class Unencodable:
    pass


BAD_PAYLOADS = [
    Unencodable(),
    {1, 2},
    math.nan,
    [math.inf],
    {"bytes": b"inside json"},
    "\ud800 lone surrogate",
    ["\udcff"],
    (lambda: None),
]


@pytest.mark.parametrize("payload", BAD_PAYLOADS, ids=lambda p: type(p).__name__)
async def test_unencodable_payloads_raise_and_write_nothing(
    store: alkstore.Store,
    target,
    qname: str,
    payload: object,  # type: ignore[no-untyped-def]
) -> None:
    before = await count_rows(store, target)
    q = store.queue(qname)
    with pytest.raises(PayloadError):
        await q.enqueue(payload)
    with pytest.raises(PayloadError):
        await q.enqueue_many([b"fine", payload, b"fine too"])
    with pytest.raises(PayloadError):
        async with store.transaction() as tx:
            await tx.queue(qname).enqueue(payload)
    assert await count_rows(store, target) == before


@pytest.mark.parametrize("payloads", [b"abc", "abc", {"a": 1}, 5, None])
async def test_enqueue_many_wants_a_list(
    store: alkstore.Store,
    target,
    qname: str,
    payloads: object,  # type: ignore[no-untyped-def]
) -> None:
    before = await count_rows(store, target)
    with pytest.raises((InvalidArgumentError, TypeError)):
        await store.queue(qname).enqueue_many(payloads)  # type: ignore[arg-type]
    assert await count_rows(store, target) == before


@pytest.mark.parametrize(
    "opts",
    [
        lambda: QueueOpts(visibility_timeout_s=0),
        lambda: QueueOpts(visibility_timeout_s=math.nan),
        lambda: QueueOpts(max_attempts=0),
        lambda: QueueOpts(retry_base_s=-1),
        lambda: QueueOpts(expires_in_s=0),
        lambda: QueueOpts(dead_letter_retention_s=-1),
        lambda: QueueOpts(priority=2**31),
        lambda: EnqueueOpts(run_at=datetime(2030, 1, 1)),
        lambda: EnqueueOpts(delay_s=-1),
        lambda: EnqueueOpts(expires_in_s=0),
        lambda: EnqueueOpts(max_attempts=0),
        lambda: EnqueueOpts(priority=1.5),  # type: ignore[arg-type]
    ],
)
async def test_invalid_options_raise_on_construction(opts: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        opts()


@pytest.mark.parametrize("opts", [{"max_attempts": 2}, "QueueOpts", 5])
async def test_queue_opts_must_be_queue_opts(
    store: alkstore.Store, qname: str, opts: object
) -> None:
    with pytest.raises(InvalidArgumentError):
        store.queue(qname, opts)  # type: ignore[arg-type]


@pytest.mark.parametrize("opts", [{"delay_s": 2}, QueueOpts(), 5])
async def test_enqueue_opts_must_be_enqueue_opts(
    store: alkstore.Store,
    target,
    qname: str,
    opts: object,  # type: ignore[no-untyped-def]
) -> None:
    before = await count_rows(store, target)
    with pytest.raises(InvalidArgumentError):
        await store.queue(qname).enqueue(b"", opts)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        await store.queue(qname).enqueue_many([b""], opts)  # type: ignore[arg-type]
    assert await count_rows(store, target) == before


@FIXTURE_SETTINGS
@given(
    worker=st.one_of(
        st.just(""),
        st.text(min_size=1, max_size=5).map(lambda s: s + "\x00"),
        st.just("\ud800"),
        st.integers(),
        st.none(),
    )
)
async def test_invalid_worker_ids_raise_and_claim_nothing(
    store: alkstore.Store, qname: str, worker: object
) -> None:
    q = store.queue(qname)
    job_id = await q.enqueue(b"")
    with pytest.raises(InvalidArgumentError) as e:
        await q.claim_one(worker)  # type: ignore[arg-type]
    assert repr(worker)[:20] in str(e.value)
    job = await q.get_job(job_id)
    assert job is not None and job.state == "pending" and job.attempts == 0
    assert await q.cancel(job_id)


async def test_far_future_run_at_round_trips(store: alkstore.Store, qname: str) -> None:
    q = store.queue(qname)
    at = datetime.now(UTC) + timedelta(days=365 * 50)
    job = await q.get_job(await q.enqueue(b"", EnqueueOpts(run_at=at)))
    assert job is not None and abs((job.run_at - at).total_seconds()) < 1e-5


@pytest.mark.parametrize(
    "at", [datetime.max.replace(tzinfo=UTC), datetime(1, 1, 2, tzinfo=UTC)], ids=["max", "min"]
)
async def test_extreme_run_at_can_be_read_back(
    store: alkstore.Store, qname: str, at: datetime
) -> None:
    q = store.queue(qname)
    job = await q.get_job(await q.enqueue(b"", EnqueueOpts(run_at=at)))
    assert job is not None and abs((job.run_at - at).total_seconds()) < 1e-3


@pytest.mark.parametrize("schema", ["Bad", "a-b", "1abc", "", 'x"; drop'])
async def test_connect_rejects_a_bad_schema_name(target, schema: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidNameError):
        await alkstore.connect(target.url, schema=schema)


@pytest.mark.parametrize("url", ["mysql://x/y", "sqlite://host/x.db", "sqlite://", "nope", ""])
async def test_connect_rejects_a_bad_url(url: str) -> None:
    with pytest.raises(InvalidArgumentError):
        await alkstore.connect(url)
