"""Bad input that used to escape the error family: each raises the typed error
naming the value, writes nothing, and only ``AlkstoreError`` ever escapes."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import alkstore
from alkstore import (
    AlkstoreError,
    EnqueueOpts,
    InvalidArgumentError,
    PayloadError,
    QueueOpts,
)

from .rawsql import count_rows

HUGE = 10**400


class RaisingRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr refuses")


@pytest.mark.parametrize(
    "payload",
    [{"n": 10**5000}, 10**5000, RaisingRepr(), [RaisingRepr()]],
    ids=["dict-huge-int", "huge-int", "raising-repr", "list-raising-repr"],
)
async def test_unshowable_payloads_raise_payload_error_and_write_nothing(
    store: alkstore.Store, target: Any, qname: str, payload: object
) -> None:
    q = store.queue(qname)
    with pytest.raises(PayloadError, match="payload"):
        await q.enqueue(payload)
    with pytest.raises(PayloadError):
        await q.enqueue_many([b"ok", payload])
    assert await count_rows(store, target) == (0, 0)


@pytest.mark.parametrize("value", [123, None, 1.5, object()])
async def test_enqueue_many_and_ack_batch_of_a_non_list_name_it(
    store: alkstore.Store, target: Any, qname: str, value: object
) -> None:
    q = store.queue(qname)
    with pytest.raises(InvalidArgumentError, match="enqueue_many takes a list"):
        await q.enqueue_many(value)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="ack_batch takes a list"):
        await q.ack_batch(value)  # type: ignore[arg-type]
    assert await count_rows(store, target) == (0, 0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: QueueOpts(visibility_timeout_s=HUGE),
        lambda: QueueOpts(retry_base_s=HUGE),
        lambda: QueueOpts(expires_in_s=HUGE),
        lambda: QueueOpts(dead_letter_retention_s=HUGE),
        lambda: EnqueueOpts(delay_s=HUGE),
        lambda: EnqueueOpts(expires_in_s=HUGE),
        lambda: alkstore.App().task(timeout_s=HUGE),
        lambda: alkstore.App().task(retry_base_s=HUGE),
        lambda: alkstore.App().worker(["q"], grace_s=HUGE),
        lambda: alkstore.App().worker(["q"], poll_interval_s=HUGE),
        lambda: alkstore.App().worker(["q"], sweep_interval_s=HUGE),
        lambda: alkstore.App().worker(["q"], dead_letter_retention_s=HUGE),
    ],
)
def test_a_duration_past_floats_range_is_an_invalid_argument(make: Callable[[], object]) -> None:
    with pytest.raises(InvalidArgumentError, match="must be a finite number"):
        make()


async def test_handle_durations_past_floats_range_are_invalid_arguments(
    store: alkstore.Store, qname: str
) -> None:
    q = store.queue(qname)
    await q.enqueue(b"")
    handle = await q.claim_one("w")
    assert handle is not None
    with pytest.raises(InvalidArgumentError, match="delay_s"):
        await handle.retry(delay_s=HUGE)
    with pytest.raises(InvalidArgumentError, match="extend_s"):
        await handle.heartbeat(extend_s=HUGE)
    with pytest.raises(InvalidArgumentError, match="poll_interval_s"):
        await q.jobs("w", poll_interval_s=HUGE).__anext__()
    assert not handle.consumed
    assert await handle.ack()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("wake_poll_ms", -1),
        ("wake_poll_ms", "abc"),
        ("wake_poll_ms", HUGE),
        ("busy_timeout_s", HUGE),
    ],
)
async def test_sqlite_option_errors_name_the_option_the_user_passed(
    tmp_path: Any, option: str, value: object
) -> None:
    with pytest.raises(InvalidArgumentError, match=f"^{option} "):
        await alkstore.connect(f"sqlite:///{tmp_path}/o.db", **{option: value})
    assert not (tmp_path / "o.db").exists()


@pytest.mark.parametrize("option", ["pool_timeout_s", "wake_coalesce_ms", "pool_max"])
async def test_postgres_option_errors_name_the_option(pg_url: str, option: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"^{option} "):
        await alkstore.connect(pg_url, schema="never_made", **{option: HUGE})


async def test_a_nul_in_a_sqlite_url_is_an_invalid_argument(tmp_path: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="invalid SQLite URL"):
        await alkstore.connect(f"sqlite:///{tmp_path}/a\x00b.db")


# -- only AlkstoreError escapes any public entry ------------------------------------

anything: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.just(HUGE),
    st.just(10**5000),
    st.floats(),
    st.text(),
    st.binary(),
    st.builds(RaisingRepr),
    st.builds(object),
    st.lists(st.integers() | st.text(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers() | st.just(10**5000), max_size=2),
)

Entry = Callable[[alkstore.Store, str, Any], Awaitable[object]]


async def _claimed(store: alkstore.Store, qname: str) -> alkstore.JobHandle:
    q = store.queue(qname)
    await q.enqueue(b"")
    handle = await q.claim_one("w")
    assert handle is not None
    return handle


async def _sync_ctor(fn: Callable[[], object]) -> object:
    return fn()


ENTRIES: dict[str, Entry] = {
    "store.queue": lambda s, q, v: _sync_ctor(lambda: s.queue(v)),
    "store.queue opts": lambda s, q, v: _sync_ctor(lambda: s.queue(q, v)),
    "QueueOpts": lambda s, q, v: _sync_ctor(lambda: QueueOpts(visibility_timeout_s=v)),
    "QueueOpts max_attempts": lambda s, q, v: _sync_ctor(lambda: QueueOpts(max_attempts=v)),
    "QueueOpts priority": lambda s, q, v: _sync_ctor(lambda: QueueOpts(priority=v)),
    "EnqueueOpts delay": lambda s, q, v: _sync_ctor(lambda: EnqueueOpts(delay_s=v)),
    "EnqueueOpts run_at": lambda s, q, v: _sync_ctor(lambda: EnqueueOpts(run_at=v)),
    "enqueue": lambda s, q, v: s.queue(q).enqueue(v),
    "enqueue opts": lambda s, q, v: s.queue(q).enqueue(b"", v),
    "enqueue_many": lambda s, q, v: s.queue(q).enqueue_many(v),
    "enqueue_many item": lambda s, q, v: s.queue(q).enqueue_many([v]),
    "claim_one": lambda s, q, v: s.queue(q).claim_one(v),
    "claim_batch": lambda s, q, v: s.queue(q).claim_batch("w", v),
    "ack_batch": lambda s, q, v: s.queue(q).ack_batch(v),
    "ack_batch item": lambda s, q, v: s.queue(q).ack_batch([v]),
    "cancel": lambda s, q, v: s.queue(q).cancel(v),
    "get_job": lambda s, q, v: s.queue(q).get_job(v),
    "jobs batch": lambda s, q, v: _first_of_jobs(s, q, batch=v),
    "jobs poll": lambda s, q, v: _first_of_jobs(s, q, poll_interval_s=v),
    "notify channel": lambda s, q, v: s.notify(v),
    "notify payload": lambda s, q, v: s.notify(q, v),
    "wake": lambda s, q, v: s.wake(v),
    "listen": lambda s, q, v: _sync_ctor(lambda: s.listen(v)),
    "retry error": lambda s, q, v: _handle_op(s, q, lambda h: h.retry(v)),
    "retry delay": lambda s, q, v: _handle_op(s, q, lambda h: h.retry(delay_s=v)),
    "fail": lambda s, q, v: _handle_op(s, q, lambda h: h.fail(v)),
    "heartbeat": lambda s, q, v: _handle_op(s, q, lambda h: h.heartbeat(v)),
    "tx.queue": lambda s, q, v: _in_tx(s, lambda tx: _sync_ctor(lambda: tx.queue(v))),
    "tx.execute": lambda s, q, v: _in_tx(s, lambda tx: tx.execute(v)),
    "tx.notify": lambda s, q, v: _in_tx(s, lambda tx: tx.notify(q, v)),
    "admin.list_jobs": lambda s, q, v: s.admin().list_jobs(q, v),
    "admin.find_job": lambda s, q, v: s.admin().find_job(v),
    "admin.requeue": lambda s, q, v: s.admin().requeue(v),
    "App": lambda s, q, v: _sync_ctor(lambda: alkstore.App(schema=v)),
    "App.task": lambda s, q, v: _sync_ctor(lambda: alkstore.App().task(queue=v)),
    "App.worker": lambda s, q, v: _sync_ctor(lambda: alkstore.App().worker([q], concurrency=v)),
}


async def _handle_op(
    store: alkstore.Store, qname: str, op: Callable[[alkstore.JobHandle], Awaitable[object]]
) -> object:
    return await op(await _claimed(store, qname))


async def _first_of_jobs(store: alkstore.Store, qname: str, **options: Any) -> object:
    """The first handle of ``queue.jobs(...)``: a job is waiting, so valid options return."""
    q = store.queue(qname)
    await q.enqueue(b"")
    agen = q.jobs("w", **options)
    try:
        return await agen.__anext__()
    finally:
        await agen.aclose()


async def _in_tx(
    store: alkstore.Store, op: Callable[[alkstore.Transaction], Awaitable[object]]
) -> object:
    async with store.transaction() as tx:
        return await op(tx)


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=anything)
async def test_only_alkstore_errors_escape_a_public_entry(
    store: alkstore.Store, qname: str, entry: str, value: Any
) -> None:
    with contextlib.suppress(AlkstoreError):
        await ENTRIES[entry](store, qname, value)
