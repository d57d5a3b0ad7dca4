"""The blocking facade: the same operations as the async API, for scripts and sync apps.

Each sync store drives its async twin on a private event-loop thread; every
method here is one blocking hop to that loop, so the queue logic exists once.

>>> from alkstore import sync
>>> with sync.connect("sqlite:///jobs.db") as store:
...     store.queue("emails").enqueue({"to": "a@example.com"})
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import weakref
from collections.abc import AsyncIterator, Coroutine, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from alkstore import admin as _admin
from alkstore import store as _async
from alkstore import subscription as _subscription
from alkstore.admin import QueueInfo
from alkstore.connect import connect as _aconnect
from alkstore.core.dedupe import Enqueued
from alkstore.core.flow import QueueSettings, Rate
from alkstore.core.job import Job, Notification, Row, SweepResult
from alkstore.core.options import EnqueueOpts, QueueOpts
from alkstore.core.payload import DEFAULT_MAX_PAYLOAD_BYTES
from alkstore.core.results import JobOutcome
from alkstore.errors import StoreClosedError

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

T = TypeVar("T")

_runners: weakref.WeakSet[_Runner] = weakref.WeakSet()


def _mark_forked() -> None:
    for runner in list(_runners):
        runner.forked = True


os.register_at_fork(after_in_child=_mark_forked)


async def _next(agen: AsyncIterator[T]) -> T:
    return await agen.__anext__()


class _Runner:
    """A private event loop on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.closed = False
        self.forked = False
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="alkstore-sync", daemon=True
        )
        self._thread.start()
        # per calling thread: the context of its open transaction, so that the
        # async core's "inside my own transaction" guard sees it (tasks of one
        # thread's later calls run in a copy of that context)
        self.local = threading.local()
        _runners.add(self)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.closed or self.forked:
            coro.close()
            if self.forked:
                raise StoreClosedError(
                    "this store was opened in a parent process and inherited across fork(); "
                    "call alkstore.sync.connect() again in the child"
                )
            raise StoreClosedError("store is closed")
        context: contextvars.Context | None = getattr(self.local, "context", None)
        if context is None:
            return asyncio.run_coroutine_threadsafe(coro, self.loop).result()
        return context.run(asyncio.run_coroutine_threadsafe, coro, self.loop).result()

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self.run(_next(agen))
                except StopAsyncIteration:
                    return
        finally:
            if not self.closed and not self.forked:
                aclose = getattr(agen, "aclose", None)
                if aclose is not None:
                    self.run(aclose())

    def stop(self) -> None:
        self.closed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()


def connect(
    url: str | None = None,
    *,
    schema: str = "alkstore",
    max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES,
    **options: Any,
) -> Store:
    """Open a store (blocking); the same arguments as :func:`alkstore.connect`."""
    runner = _Runner()
    try:
        limit = max_payload_bytes
        astore = runner.run(_aconnect(url, schema=schema, max_payload_bytes=limit, **options))
    except BaseException:
        runner.stop()
        raise
    return Store(astore, runner)


class Store:
    """The blocking twin of :class:`alkstore.Store`."""

    def __init__(self, astore: _async.Store, runner: _Runner) -> None:
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

    def __init__(self, aqueue: _async.Queue | _async.TxQueue, runner: _Runner) -> None:
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

    def __init__(self, aqueue: _async.Queue, runner: _Runner) -> None:
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
        engine, data, stamps = self._async._outbox((payload,), opts)
        keys = _async._dedupe_keys(1, opts, None)
        if keys is None:
            return Enqueued(engine.enqueue_on_sync(conn, self.name, data, stamps)[0], False)
        window = _async._window(opts)
        return engine.enqueue_keyed_on_sync(conn, self.name, data, keys, window, stamps)[0]

    def enqueue_many_on(
        self,
        conn: Any,
        payloads: Iterable[object],
        opts: EnqueueOpts | None = None,
        *,
        dedupe_keys: Iterable[str | None] | None = None,
    ) -> list[int]:
        """Insert many jobs inside your own connection's transaction."""
        engine, data, stamps = self._async._outbox(payloads, opts)
        keys = _async._dedupe_keys(len(data), opts, dedupe_keys)
        if not data:
            return []
        if keys is None:
            return engine.enqueue_on_sync(conn, self.name, data, stamps)
        window = _async._window(opts)
        got = engine.enqueue_keyed_on_sync(conn, self.name, data, keys, window, stamps)
        return [item.id for item in got]

    def outcome(self, job_id: int) -> JobOutcome | None:
        return self._runner.run(self._async.outcome(job_id))

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

    def __init__(self, ahandle: _async.JobHandle, runner: _Runner) -> None:
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

    def __init__(self, atx: _async.Transaction, runner: _Runner) -> None:
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

    def __init__(self, asub: _subscription.Subscription, runner: _Runner) -> None:
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


class Admin:
    """The blocking twin of :class:`alkstore.admin.Admin`."""

    def __init__(self, aadmin: _admin.Admin, runner: _Runner) -> None:
        self._async = aadmin
        self._runner = runner

    def list_jobs(self, queue: str, state: str | None = None, limit: int = 100) -> list[Job]:
        """Jobs of ``queue`` (live and dead, or one ``state``) in id order, at most ``limit``."""
        return self._runner.run(self._async.list_jobs(queue, state, limit))

    def list_dead(
        self, *, after: int | None = None, before: int | None = None, limit: int = 100
    ) -> list[Job]:
        """Dead jobs of every queue in id order, a keyset page (``after`` / ``before`` an id)."""
        return self._runner.run(self._async.list_dead(after=after, before=before, limit=limit))

    def find_job(self, job_id: int) -> Job | None:
        """The job with this id in any queue, live or dead."""
        return self._runner.run(self._async.find_job(job_id))

    def requeue(self, job_id: int) -> bool:
        """Move a dead job back to pending with ``attempts`` 0; ``False`` if it is not dead."""
        return self._runner.run(self._async.requeue(job_id))

    def stats(self) -> list[_admin.QueueStats]:
        """Counts per queue that has any live or dead job, by queue name."""
        return self._runner.run(self._async.stats())

    def outcomes(self, queue: str, limit: int = 20) -> list[JobOutcome]:
        """The latest finished jobs of ``queue``, newest first (kept results, dead jobs)."""
        return self._runner.run(self._async.outcomes(queue, limit))

    def outcome(self, job_id: int, queue: str | None = None) -> JobOutcome | None:
        """What became of one job (kept result, dead, live), if anything."""
        return self._runner.run(self._async.outcome(job_id, queue))

    def schedule_marks(self, names: list[str]) -> list[tuple[str, float, int | None]]:
        """``(name, last tick as POSIX seconds, last job id)`` of the named schedules."""
        return self._runner.run(self._async.schedule_marks(names))

    def mark_schedule(self, name: str, tick: float, job_id: int | None) -> None:
        """Move a schedule's mark forward to ``tick`` (never back)."""
        self._runner.run(self._async.mark_schedule(name, tick, job_id))

    def cancel(self, job_id: int) -> bool:
        """Delete the live job with this id in any queue; ``False`` if none is live."""
        return self._runner.run(self._async.cancel(job_id))

    def requeue_many(self, job_ids: Iterable[int]) -> int:
        """Requeue each dead job listed; count those requeued."""
        return self._runner.run(self._async.requeue_many(job_ids))

    def workers(self, gone_after_s: float = _admin.GONE_AFTER_S) -> list[_admin.WorkerInfo]:
        """Registered workers by start time; ``alive`` unless unseen for ``gone_after_s``."""
        return self._runner.run(self._async.workers(gone_after_s))

    def report_worker(
        self,
        worker_id: str,
        host: str,
        pid: int,
        queues: Sequence[str],
        concurrency: int,
        running: int,
    ) -> None:
        """Register a worker or refresh its row."""
        self._runner.run(
            self._async.report_worker(worker_id, host, pid, queues, concurrency, running)
        )

    def remove_worker(self, worker_id: str) -> bool:
        """Delete a worker's row."""
        return self._runner.run(self._async.remove_worker(worker_id))

    def purge_workers(self, older_than_s: float) -> int:
        """Delete workers not seen for ``older_than_s``; count them."""
        return self._runner.run(self._async.purge_workers(older_than_s))

    def record_outcomes(self, counts: Iterable[tuple[str, str, int]]) -> None:
        """Add ``(queue, outcome, n)`` counts to the current minute of the outcome history."""
        self._runner.run(self._async.record_outcomes(list(counts)))

    def outcome_history(self, minutes: int = 60) -> list[_admin.OutcomeCount]:
        """Finished-job counts per queue, minute and outcome over the last ``minutes``."""
        return self._runner.run(self._async.outcome_history(minutes))

    def queues(self) -> list[QueueInfo]:
        """Every queue with jobs or stored settings: paused, limits, counts."""
        return self._runner.run(self._async.queues())

    def queue_info(self, queue: str) -> QueueInfo:
        """Paused, limits and counts of one queue."""
        return self._runner.run(self._async.queue_info(queue))
