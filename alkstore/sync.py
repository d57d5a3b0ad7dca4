"""The blocking facade: the same operations as the async API, for scripts and sync apps.

Each sync store drives its async twin on a private event-loop thread
(``sync_runner``); every method here is one blocking hop to that loop, so the
queue logic exists once. The admin twin is in ``sync_admin``.

>>> from alkstore import sync
>>> with sync.connect("sqlite:///jobs.db") as store:
...     store.queue("emails").enqueue({"to": "a@example.com"})
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from alkstore import job_handle as _job_handle
from alkstore import queue as _queue
from alkstore import store as _store
from alkstore import subscription as _subscription
from alkstore import transaction as _transaction
from alkstore.admin import QueueInfo
from alkstore.connect import connect as _aconnect
from alkstore.core.dedupe import Enqueued
from alkstore.core.flow import QueueSettings, Rate
from alkstore.core.job import Job, Notification, Row, SweepResult
from alkstore.core.life import Attempt, Progress
from alkstore.core.options import EnqueueOpts, QueueOpts
from alkstore.core.payload import DEFAULT_MAX_PAYLOAD_BYTES
from alkstore.core.results import JobOutcome
from alkstore.queue import prepare_outbox
from alkstore.sync_admin import Admin
from alkstore.sync_runner import Runner

__all__ = [
    "Admin",
    "JobHandle",
    "Queue",
    "Store",
    "Subscription",
    "Transaction",
    "TxQueue",
    "connect",
]


def connect(
    url: str | None = None,
    *,
    schema: str = "alkstore",
    max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
    **options: Any,
) -> Store:
    """Open a store (blocking); the same arguments as :func:`alkstore.connect`."""
    runner = Runner()
    try:
        limit = max_payload_bytes
        astore = runner.run(_aconnect(url, schema=schema, max_payload_bytes=limit, **options))
    except BaseException:
        runner.stop()
        raise
    return Store(astore, runner)


class Store:
    """The blocking twin of :class:`alkstore.Store`."""

    def __init__(self, astore: _store.Store, runner: Runner) -> None:
        self._async = astore
        self._runner = runner
        self.url = astore.url
        self.max_payload_bytes = astore.max_payload_bytes

    @property
    def engine_name(self) -> str:
        return self._async.engine_name

    @property
    def closed(self) -> bool:
        return self._async.closed

    @property
    def listens(self) -> bool:
        """Whether notifications are delivered (``False``: a poll-only store)."""
        return self._async.listens

    def queue(self, name: str, opts: QueueOpts | None = None) -> Queue:
        """A handle for queue ``name`` (no I/O)."""
        return Queue(self._async.queue(name, opts), self._runner)

    def ack_many(self, handles: Sequence[JobHandle]) -> list[bool]:
        return self._runner.run(
            self._async.ack_many([h._async if isinstance(h, JobHandle) else h for h in handles])
        )

    def transaction(self) -> Transaction:
        """``with store.transaction() as tx:`` commits on exit, rolls back on error."""
        return Transaction(self._async.transaction(), self._runner)

    def notify(self, channel: str, payload: str = "") -> None:
        self._runner.run(self._async.notify(channel, payload))

    def wake(self, queue: str) -> None:
        """Wake ``queue``'s consumers (after committing jobs added with ``enqueue_on``)."""
        self._runner.run(self._async.wake(queue))

    def signal(self, job_id: int, name: str, payload: object = None) -> bool:
        """Send signal ``name`` to job ``job_id`` (see ``alkstore.Store.signal``)."""
        return self._runner.run(self._async.signal(job_id, name, payload))

    def listen(self, *channels: str) -> Subscription:
        return Subscription(self._async.listen(*channels), self._runner)

    def admin(self) -> Admin:
        """Listing, counts and dead-letter requeue (the twin of ``alkstore.Store.admin``)."""
        return Admin(self._async.admin(), self._runner)

    def close(self) -> None:
        """Close the store; idempotent."""
        if self._runner.closed:
            return
        if not self._runner.forked:
            self._runner.run(self._async.close())
            self._runner.stop()
        else:
            self._runner.closed = True

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Enqueuing:
    """Blocking ``enqueue`` / ``enqueue_many`` over an async Queue or TxQueue."""

    def __init__(self, aqueue: _queue.Queue | _transaction.TxQueue, runner: Runner) -> None:
        self._async_enqueuing = aqueue
        self._runner = runner
        self.name = aqueue.name
        self.opts = aqueue.opts

    def enqueue(self, payload: object, opts: EnqueueOpts | None = None) -> int:
        return self._runner.run(self._async_enqueuing.enqueue(payload, opts))

    def enqueue_unique(self, payload: object, opts: EnqueueOpts | None = None) -> Enqueued:
        return self._runner.run(self._async_enqueuing.enqueue_unique(payload, opts))

    def enqueue_many(
        self,
        payloads: Iterable[object],
        opts: EnqueueOpts | None = None,
        *,
        dedupe_keys: Iterable[str | None] | None = None,
    ) -> list[int]:
        return self._runner.run(
            self._async_enqueuing.enqueue_many(payloads, opts, dedupe_keys=dedupe_keys)
        )

    def enqueue_many_unique(
        self,
        payloads: Iterable[object],
        opts: EnqueueOpts | None = None,
        *,
        dedupe_keys: Iterable[str | None] | None = None,
    ) -> list[Enqueued]:
        return self._runner.run(
            self._async_enqueuing.enqueue_many_unique(payloads, opts, dedupe_keys=dedupe_keys)
        )


class Queue(_Enqueuing):
    """The blocking twin of :class:`alkstore.Queue`."""

    def __init__(self, aqueue: _queue.Queue, runner: Runner) -> None:
        super().__init__(aqueue, runner)
        self._async = aqueue

    def enqueue_on(self, conn: Any, payload: object, opts: EnqueueOpts | None = None) -> int:
        """Insert one job inside the transaction your blocking ``psycopg.Connection`` holds
        (or a SQLAlchemy ``Session`` / ``Connection`` on the psycopg dialect).

        Runs in your thread, on your connection; you commit, then ``store.wake(name)``
        (Django: ``transaction.on_commit(lambda: store.wake("emails"))``).
        """
        return self.enqueue_unique_on(conn, payload, opts).id

    def enqueue_unique_on(
        self, conn: Any, payload: object, opts: EnqueueOpts | None = None
    ) -> Enqueued:
        """:meth:`enqueue_on`, answering ``Enqueued(id, duplicate)``."""
        return prepare_outbox(self._async, (payload,), opts).run_sync(conn)[0]

    def enqueue_many_on(
        self,
        conn: Any,
        payloads: Iterable[object],
        opts: EnqueueOpts | None = None,
        *,
        dedupe_keys: Iterable[str | None] | None = None,
    ) -> list[int]:
        """Insert many jobs inside your own connection's transaction."""
        got = prepare_outbox(self._async, payloads, opts, dedupe_keys).run_sync(conn)
        return [item.id for item in got]

    def outcome(self, job_id: int) -> JobOutcome | None:
        return self._runner.run(self._async.outcome(job_id))

    def parent_outcomes(self, job_id: int) -> dict[int, JobOutcome | None]:
        """What became of each parent of the job (the twin of ``parent_outcomes``)."""
        return self._runner.run(self._async.parent_outcomes(job_id))

    def wait_outcome(self, job_id: int, timeout_s: float = 10.0) -> JobOutcome:
        """Block until the job succeeds or dies (the twin of the async ``wait_outcome``)."""
        return self._runner.run(self._async.wait_outcome(job_id, timeout_s))

    def result(self, job_id: int, timeout_s: float = 10.0) -> Any:
        """Block for the job's kept return value (the twin of the async ``result``)."""
        return self._runner.run(self._async.result(job_id, timeout_s))

    def claim_one(self, worker_id: str) -> JobHandle | None:
        handle = self._runner.run(self._async.claim_one(worker_id))
        return None if handle is None else JobHandle(handle, self._runner)

    def claim_batch(self, worker_id: str, n: int) -> list[JobHandle]:
        handles = self._runner.run(self._async.claim_batch(worker_id, n))
        return [JobHandle(h, self._runner) for h in handles]

    def claim_held(self, worker_id: str, n: int) -> tuple[list[JobHandle], float | None]:
        handles, hold = self._runner.run(self._async.claim_held(worker_id, n))
        return [JobHandle(h, self._runner) for h in handles], hold

    def pause(self) -> None:
        self._runner.run(self._async.pause())

    def resume(self) -> None:
        self._runner.run(self._async.resume())

    def set_limits(
        self,
        *,
        concurrency: int | None = None,
        partition_concurrency: int | None = None,
        rate: Rate | str | None = None,
        burst: int | None = None,
    ) -> None:
        self._runner.run(
            self._async.set_limits(
                concurrency=concurrency,
                partition_concurrency=partition_concurrency,
                rate=rate,
                burst=burst,
            )
        )

    def set_fair(self, fair: bool = True, *, weights: Mapping[str, float] | None = None) -> None:
        self._runner.run(self._async.set_fair(fair, weights=weights))

    def fair_weights(self) -> dict[str, float]:
        return self._runner.run(self._async.fair_weights())

    def set_aging(self, aging_s: float | None) -> None:
        self._runner.run(self._async.set_aging(aging_s))

    def settings(self) -> QueueSettings:
        return self._runner.run(self._async.settings())

    def info(self) -> QueueInfo:
        return self._runner.run(self._async.info())

    def ack_batch(self, ids: Iterable[int]) -> int:
        return self._runner.run(self._async.ack_batch(ids))

    def cancel(self, job_id: int) -> bool:
        return self._runner.run(self._async.cancel(job_id))

    def get_job(self, job_id: int) -> Job | None:
        return self._runner.run(self._async.get_job(job_id))

    def attempts(self, job_id: int) -> list[Attempt]:
        return self._runner.run(self._async.attempts(job_id))

    def progress(self, job_id: int) -> Progress | None:
        return self._runner.run(self._async.progress(job_id))

    def sweep_expired(self) -> SweepResult:
        return self._runner.run(self._async.sweep_expired())

    def jobs(
        self, worker_id: str, batch: int = 1, *, poll_interval_s: float = 1.0
    ) -> Iterator[JobHandle]:
        """The wake-driven claim loop, blocking: ``for handle in queue.jobs("w1"): ...``."""
        agen = self._async.jobs(worker_id, batch, poll_interval_s=poll_interval_s)
        for handle in self._runner.iterate(agen):
            yield JobHandle(handle, self._runner)


class JobHandle:
    """The blocking twin of :class:`alkstore.JobHandle`."""

    __slots__ = ("_async", "_runner", "job")

    def __init__(self, ahandle: _job_handle.JobHandle, runner: Runner) -> None:
        self._async = ahandle
        self._runner = runner
        self.job = ahandle.job

    @property
    def consumed(self) -> bool:
        return self._async.consumed

    def ack(self) -> bool:
        return self._runner.run(self._async.ack())

    def ack_result(self, value: object, keep_s: float) -> bool:
        return self._runner.run(self._async.ack_result(value, keep_s))

    def stage(
        self,
        queue: str,
        payload: object,
        opts: EnqueueOpts | None = None,
        queue_opts: QueueOpts | None = None,
    ) -> None:
        """Keep a follow-up for this attempt's ack (the twin of the async ``stage``)."""
        self._async.stage(queue, payload, opts, queue_opts)

    def retry(self, error: str | None = None, delay_s: float | None = None) -> bool:
        return self._runner.run(self._async.retry(error, delay_s))

    def fail(self, error: str | None = None) -> bool:
        return self._runner.run(self._async.fail(error))

    def release(self) -> bool:
        return self._runner.run(self._async.release())

    def heartbeat(self, extend_s: float | None = None) -> bool:
        return self._runner.run(self._async.heartbeat(extend_s))

    def snooze(self, delay_s: float) -> bool:
        return self._runner.run(self._async.snooze(delay_s))


class Transaction:
    """The blocking twin of :class:`alkstore.Transaction`."""

    def __init__(self, atx: _transaction.Transaction, runner: Runner) -> None:
        self._async = atx
        self._runner = runner
        self._outer: contextvars.Context | None = None

    def __enter__(self) -> Transaction:
        atx = self._async

        async def enter() -> contextvars.Context:
            await atx.__aenter__()
            return contextvars.copy_context()

        self._outer = getattr(self._runner.local, "context", None)
        self._runner.local.context = self._runner.run(enter())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._runner.run(self._async.__aexit__(exc_type, exc, tb))
        finally:
            self._runner.local.context = self._outer

    def queue(self, name: str, opts: QueueOpts | None = None) -> TxQueue:
        return TxQueue(self._async.queue(name, opts), self._runner)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[Row]:
        return self._runner.run(self._async.execute(sql, params))

    def notify(self, channel: str, payload: str = "") -> None:
        self._runner.run(self._async.notify(channel, payload))


class TxQueue(_Enqueuing):
    """The blocking twin of :class:`alkstore.TxQueue`."""


class Subscription:
    """The blocking twin of :class:`alkstore.Subscription`: ``for note in sub``."""

    def __init__(self, asub: _subscription.Subscription, runner: Runner) -> None:
        self._async = asub
        self._runner = runner
        self.channels = asub.channels

    @property
    def closed(self) -> bool:
        """Whether the subscription (or its store) was closed."""
        return self._async.closed

    def close(self) -> None:
        """Stop listening; idempotent."""
        if not self._runner.closed:
            self._runner.run(self._async.aclose())

    def wait(self, timeout: float | None) -> bool:
        """Wait for a note or a gap, up to ``timeout`` s; drop what was pending."""
        return self._runner.run(self._async.wait(timeout))

    def __enter__(self) -> Subscription:
        self._runner.run(self._async.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, timeout: float | None = None) -> Notification | None:
        """The next notification, or ``None`` after ``timeout`` seconds."""

        async def next_note() -> Notification | None:
            try:
                return await asyncio.wait_for(self._async.__anext__(), timeout)
            except (TimeoutError, StopAsyncIteration):
                return None

        return self._runner.run(next_note())

    def __iter__(self) -> Iterator[Notification]:
        return self._runner.iterate(self._async)
