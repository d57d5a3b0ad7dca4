"""Store, Queue, JobHandle and Transaction: validate → resolve → one engine call."""

from __future__ import annotations

import contextlib
import contextvars
import os
import random
import weakref
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from alkstore.consume import ClaimLoop
from alkstore.core.backoff import backoff_delay_s
from alkstore.core.dedupe import Enqueued, check_dedupe_key
from alkstore.core.fair import check_weights
from alkstore.core.flow import CANCEL_NOTE, QueueSettings, Rate, check_limit, parse_rate
from alkstore.core.job import (
    ERROR_EXPIRED,
    ERROR_FAILED,
    ERROR_MAX_ATTEMPTS,
    Job,
    Row,
    SweepResult,
    claim_order,
)
from alkstore.core.names import check_name, check_worker_id, is_storable_text
from alkstore.core.options import (
    EnqueueOpts,
    QueueOpts,
    Stamps,
    check_non_negative,
    check_positive,
    describe,
    resolve,
)
from alkstore.core.payload import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_size,
    encode_notify_payload,
    encode_payload,
)
from alkstore.core.results import RESULTS_CHANNEL, JobOutcome, encode_result
from alkstore.engine import Engine, EngineTransaction, SupportsOutbox
from alkstore.errors import (
    AlkstoreError,
    HandleConsumedError,
    InvalidArgumentError,
    StoreClosedError,
)
from alkstore.group_ack import AckGroup
from alkstore.subscription import ListenerHub, Subscription
from alkstore.waiters import ResultWaiters

if TYPE_CHECKING:
    from alkstore.admin import Admin, QueueInfo

__all__ = ["JobHandle", "Queue", "Store", "Transaction", "TxQueue", "engine_of"]

DEFAULT_QUEUE_OPTS = QueueOpts()
# ids live in a signed 64-bit column on every engine
_JOB_ID_MIN, _JOB_ID_MAX = -(2**63), 2**63 - 1

_live_stores: weakref.WeakSet[Store] = weakref.WeakSet()

# The store transaction the current task is inside: an enqueue through any queue
# handle of that store joins it (the same atomicity on every engine).
_open_transaction: contextvars.ContextVar[Transaction | None] = contextvars.ContextVar(
    "alkstore_open_transaction", default=None
)


def _mark_forked() -> None:
    for store in list(_live_stores):
        store._forked = True


os.register_at_fork(after_in_child=_mark_forked)


def _check_opts(opts: QueueOpts | None) -> QueueOpts:
    if opts is None:
        return DEFAULT_QUEUE_OPTS
    if not isinstance(opts, QueueOpts):
        raise InvalidArgumentError(f"opts must be a QueueOpts, got {describe(opts)}")
    return opts


def _check_error(error: object) -> str | None:
    if error is not None and (type(error) is not str or not is_storable_text(error)):
        raise InvalidArgumentError(
            "error must be None or a str of valid UTF-8 without NUL characters, "
            f"got {describe(error)}"
        )
    return error


def _check_job_id(job_id: object) -> int:
    # an int, or an int subclass such as a task's Deferred call (never a bool)
    if (
        not isinstance(job_id, int)
        or isinstance(job_id, bool)
        or not _JOB_ID_MIN <= job_id <= _JOB_ID_MAX
    ):
        raise InvalidArgumentError(f"job id must be a 64-bit int, got {describe(job_id)}")
    return int(job_id)


def _items(what: str, values: object) -> list[Any]:
    """``values`` as a list, if it is an iterable other than text or a mapping."""
    if not isinstance(values, str | bytes | bytearray | memoryview | dict):
        try:
            return list(values)  # type: ignore[call-overload,no-any-return]  # TypeError if not iterable
        except TypeError:
            pass
    raise InvalidArgumentError(f"{what} takes a list, got {describe(values)}")


def _encode_many(payloads: Iterable[object], limit: int | None) -> list[bytes]:
    """Each payload encoded, and checked against the store's size limit (before any write)."""
    data = [p if type(p) is bytes else encode_payload(p) for p in _items("enqueue_many", payloads)]
    if limit is not None:
        for item in data:
            check_size("payload", len(item), limit)
    return data


def engine_of(store: Store) -> Engine:
    """The engine of ``store`` while it is open, else ``StoreClosedError``.

    The one door to storage: the store's own queues, handles and transactions
    use it, and so do the layers built on the store (``admin``, ``copy``, the
    result waiters). A function, not a method: the engine is not part of the
    store's public surface.
    """
    if store._closed or store._forked:
        if store._forked:
            raise StoreClosedError(
                "this store was opened in a parent process and inherited across fork(); "
                "call alkstore.connect() again in the child"
            )
        raise StoreClosedError(f"store {describe(store.url)} is closed")
    return store._engine


class Store:
    """A connection to one job store; make it with :func:`alkstore.connect`.

    >>> async with await alkstore.connect("sqlite:///jobs.db") as store:
    ...     emails = store.queue("emails")
    ...     await emails.enqueue({"to": "a@example.com"})
    """

    def __init__(
        self, engine: Engine, url: str, *, max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES
    ) -> None:
        self._engine = engine
        self.url = url
        self.max_payload_bytes = max_payload_bytes  # a job payload or kept result, at most
        self._hub = ListenerHub(engine)
        self._acks = AckGroup(engine)
        self._loops: weakref.WeakSet[ClaimLoop] = weakref.WeakSet()  # running claim loops
        self._results = ResultWaiters(
            lambda: engine_of(self),
            lambda: Subscription(self._hub, (RESULTS_CHANNEL,), wake_only=False),
        )
        self._closed = False
        self._forked = False
        _live_stores.add(self)

    @property
    def engine_name(self) -> str:
        """``"sqlite"`` or ``"postgres"``."""
        return self._engine.name

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def queue(self, name: str, opts: QueueOpts | None = None) -> Queue:
        """A handle for queue ``name`` (no I/O: queues are names, not objects)."""
        engine_of(self)
        return Queue(self, check_name(name), _check_opts(opts))

    async def ack_many(self, handles: Sequence[JobHandle]) -> list[bool]:
        """Ack many claimed jobs (of any of this store's queues) in one fenced
        transaction; each answered on its own, like :meth:`JobHandle.ack`: a stale
        handle (its claim lapsed, or the job was reclaimed) is refused with ``False``.

        Unlike :meth:`Queue.ack_batch`, which is not fenced by attempt."""
        engine = engine_of(self)
        handles = list(handles)
        for handle in handles:
            if not isinstance(handle, JobHandle) or handle._queue._store is not self:
                raise InvalidArgumentError(f"not a handle of this store: {handle!r}")
            handle._start()
        if not handles:
            return []
        items = [(h._queue.name, h.job.id, h.job.attempts) for h in handles]
        if len(set(items)) < len(items):
            raise InvalidArgumentError("ack_many got the same claim twice")
        acked = await engine.ack_many(items)
        for handle in handles:
            handle._consumed = True
        return [(item[1], item[2]) in acked for item in items]

    async def _ack_receipted(
        self, handles: Sequence[JobHandle], owner: str, token: str
    ) -> list[bool]:
        """:meth:`ack_many` with ``owner``'s receipt (the worker's ack batches; see
        docs/contract.md, "Ack receipts"). Called again with the same ``token`` after
        a failure, it answers for the batch: ``True`` for each claim that call or an
        earlier one of the batch acked, proven by the receipt, never by a gone row."""
        engine = engine_of(self)
        items = [(h._queue.name, h.job.id, h.job.attempts) for h in handles]
        if len({item[1] for item in items}) < len(items):
            raise InvalidArgumentError("an ack batch got the same job twice")
        acked = await engine.ack_receipted(items, owner, token)
        for handle in handles:
            handle._consumed = True
        return [(item[1], item[2]) in acked for item in items]

    async def _drop_ack_receipts(self, owner: str, older_s: float) -> None:
        """Delete ``owner``'s ack receipt and every one older than ``older_s`` seconds."""
        await engine_of(self).drop_ack_receipts(owner, older_s)

    def transaction(self) -> Transaction:
        """``async with store.transaction() as tx:`` commits on exit, rolls back on error."""
        engine_of(self)
        return Transaction(self)

    async def notify(self, channel: str, payload: str = "") -> None:
        """Send ``payload`` to every listener of ``channel``."""
        engine = engine_of(self)
        check_name(channel, "channel")
        await engine.notify(channel, encode_notify_payload(payload))

    async def wake(self, queue: str) -> None:
        """Wake ``queue``'s consumers now: call it after committing jobs added with
        :meth:`Queue.enqueue_on` (e.g. from an after-commit hook)."""
        engine = engine_of(self)
        await engine.notify(check_name(queue), "")

    @property
    def listens(self) -> bool:
        """Whether notifications are delivered; ``False`` on a poll-only store
        (PostgreSQL ``listen=off``), where :meth:`listen` refuses and claim
        loops find work by re-polling."""
        return self._engine.listens

    def listen(self, *channels: str) -> Subscription:
        """``async with store.listen("a", "b") as sub: async for note in sub: ...``."""
        engine = engine_of(self)
        if not engine.listens:
            raise InvalidArgumentError(
                "this store is poll-only (listen=off): store.listen() would never deliver"
            )
        if not channels:
            raise InvalidArgumentError("listen needs at least one channel")
        for channel in channels:
            check_name(channel, "channel")
        return Subscription(self._hub, channels, wake_only=False)

    def _wake_subscription(self, *channels: str) -> Subscription:
        """The wakes of claim loops (on a poll-only store: only its close)."""
        return Subscription(self._hub, channels, wake_only=True)

    async def close(self) -> None:
        """Close the store; idempotent. Every later operation raises StoreClosedError."""
        if self._closed:
            return
        if not self._forked:
            for loop in list(self._loops):  # jobs() iterators left open: give back
                with contextlib.suppress(AlkstoreError):
                    await loop.give_back()
        self._closed = True
        self._hub.close()
        if not self._forked:
            await self._engine.close()

    def admin(self) -> Admin:
        """Listing, counts and dead-letter requeue beyond the queue contract (alkstore.admin)."""
        from alkstore.admin import Admin

        engine_of(self)
        return Admin(self)

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<alkstore.Store {describe(self.url)} {state}>"


def _dedupe_keys(
    count: int, opts: EnqueueOpts | None, dedupe_keys: Iterable[str | None] | None
) -> list[str | None] | None:
    """One key (or None) per item, or ``None`` when no item has a key (the plain insert)."""
    if dedupe_keys is None:
        key = _key_of(opts)
        return None if key is None else [key] * count
    if isinstance(dedupe_keys, str | bytes):
        raise InvalidArgumentError(f"dedupe_keys must be a list, got {dedupe_keys!r}")
    keys = list(dedupe_keys)
    if len(keys) != count:
        raise InvalidArgumentError(
            f"dedupe_keys has {len(keys)} item(s) for {count} payload(s); give one per payload"
        )
    for key in keys:
        if key is not None:
            check_dedupe_key("dedupe_keys item", key)
    if _key_of(opts) is not None:
        raise InvalidArgumentError("give dedupe_keys or opts.dedupe_key, not both")
    return keys if any(key is not None for key in keys) else None


def _key_of(opts: object) -> str | None:
    """``opts.dedupe_key`` (None for anything but an EnqueueOpts: resolve rejects it)."""
    return opts.dedupe_key if isinstance(opts, EnqueueOpts) else None


def _debounce_of(opts: object) -> str | None:
    return opts.debounce_key if isinstance(opts, EnqueueOpts) else None


def _window(opts: EnqueueOpts | None) -> float | None:
    return opts.dedupe_window_s if isinstance(opts, EnqueueOpts) else None


class _Enqueuing:
    """``enqueue`` and ``enqueue_many``, shared by Queue and TxQueue: each names its writer."""

    __slots__ = ("_stamps", "name", "opts")

    def __init__(self, name: str, opts: QueueOpts) -> None:
        self.name = name
        self.opts = opts
        self._stamps = resolve(opts, None)

    def _writer(self) -> Engine | EngineTransaction:
        raise NotImplementedError

    def _limit(self) -> int | None:
        raise NotImplementedError

    def _resolve(self, opts: EnqueueOpts | None) -> Stamps:
        return self._stamps if opts is None else resolve(self.opts, opts)

    async def enqueue(self, payload: object, opts: EnqueueOpts | None = None) -> int:
        """Write one job and wake the queue's consumers (on commit); returns its id.

        With ``opts.dedupe_key`` a duplicate writes nothing and returns the existing
        job's id (:meth:`enqueue_unique` also says whether it was one); with
        ``opts.debounce_key`` a pending job of the key gets this payload instead
        and its id is returned.
        """
        if _debounce_of(opts) is not None:
            return (await self._debounced(payload, opts)).id
        if _key_of(opts) is not None:
            return (await self.enqueue_unique(payload, opts)).id
        writer = self._writer()
        stamps = self._resolve(opts)
        data = payload if type(payload) is bytes else encode_payload(payload)
        check_size("payload", len(data), self._limit())
        ids = await writer.enqueue(self.name, (data,), stamps)
        return ids[0]

    async def enqueue_unique(self, payload: object, opts: EnqueueOpts | None = None) -> Enqueued:
        """:meth:`enqueue`, answering ``Enqueued(id, duplicate)``.

        >>> got = await q.enqueue_unique({"order": 42}, EnqueueOpts(dedupe_key="order-42"))
        >>> got.duplicate      # True if a live job (or the window) already held the key

        With ``opts.debounce_key``, ``duplicate`` says a pending job's payload was replaced.
        """
        if _debounce_of(opts) is not None:
            return await self._debounced(payload, opts)
        return (await self.enqueue_many_unique((payload,), opts))[0]

    async def _debounced(self, payload: object, opts: EnqueueOpts | None) -> Enqueued:
        assert opts is not None and opts.debounce_key is not None
        writer = self._writer()
        if not hasattr(writer, "enqueue_debounced"):
            raise InvalidArgumentError(
                "debounce_key cannot be used inside store.transaction(): enqueue it outside"
            )
        stamps = self._resolve(opts)
        if opts.debounce_s is not None:
            stamps = stamps._replace(delay_s=float(opts.debounce_s), run_at=None)
        data = payload if type(payload) is bytes else encode_payload(payload)
        push = opts.debounce_s is not None
        return await writer.enqueue_debounced(self.name, data, opts.debounce_key, push, stamps)

    async def enqueue_many(
        self,
        payloads: Iterable[object],
        opts: EnqueueOpts | None = None,
        *,
        dedupe_keys: Iterable[str | None] | None = None,
    ) -> list[int]:
        """Write many jobs in one transaction and one round trip, with one wake.

        ``dedupe_keys`` gives each item its own key (None: none); each item is
        deduplicated on its own (``opts.dedupe_key`` applies one key to every item).
        """
        if dedupe_keys is not None or _key_of(opts) is not None or _debounce_of(opts):
            got = await self.enqueue_many_unique(payloads, opts, dedupe_keys=dedupe_keys)
            return [item.id for item in got]
        writer = self._writer()
        stamps = self._resolve(opts)
        data = _encode_many(payloads, self._limit())
        if not data:
            return []
        return await writer.enqueue(self.name, data, stamps)

    async def enqueue_many_unique(
        self,
        payloads: Iterable[object],
        opts: EnqueueOpts | None = None,
        *,
        dedupe_keys: Iterable[str | None] | None = None,
    ) -> list[Enqueued]:
        """:meth:`enqueue_many`, answering ``Enqueued(id, duplicate)`` per item."""
        if _debounce_of(opts) is not None:
            raise InvalidArgumentError(
                f"debounce_key {_debounce_of(opts)!r} keeps one pending job: enqueue it with "
                "enqueue(), not in a batch"
            )
        writer = self._writer()
        stamps = self._resolve(opts)
        data = _encode_many(payloads, self._limit())
        keys = _dedupe_keys(len(data), opts, dedupe_keys)
        if not data:
            return []
        if keys is None:
            return [Enqueued(i, False) for i in await writer.enqueue(self.name, data, stamps)]
        return await writer.enqueue_keyed(self.name, data, keys, _window(opts), stamps)


class Queue(_Enqueuing):
    """Operations on one queue; every one is scoped to this queue's name."""

    __slots__ = ("_store",)

    def __init__(self, store: Store, name: str, opts: QueueOpts) -> None:
        super().__init__(name, opts)
        self._store = store

    def _limit(self) -> int | None:
        return self._store.max_payload_bytes

    def _writer(self) -> Engine | EngineTransaction:
        engine = engine_of(self._store)
        tx = _open_transaction.get()
        if tx is not None and tx._store is self._store and tx._tx is not None and not tx._done:
            return tx._tx  # inside this store's transaction: commit or roll back with it
        return engine

    def _outbox(
        self, payloads: Iterable[object], opts: EnqueueOpts | None
    ) -> tuple[SupportsOutbox, list[bytes], Stamps]:
        engine = engine_of(self._store)
        if _debounce_of(opts) is not None:
            raise InvalidArgumentError("debounce_key cannot be used with enqueue_on: use enqueue")
        if not isinstance(engine, SupportsOutbox):
            raise InvalidArgumentError(
                f"enqueue_on needs the PostgreSQL engine; this store is {engine.name}"
            )
        return engine, _encode_many(payloads, self._limit()), self._resolve(opts)

    async def enqueue_unique_on(
        self, conn: Any, payload: object, opts: EnqueueOpts | None = None
    ) -> Enqueued:
        """:meth:`enqueue_on`, answering ``Enqueued(id, duplicate)`` (see ``dedupe_key``)."""
        engine, data, stamps = self._outbox((payload,), opts)
        keys = _dedupe_keys(1, opts, None)
        if keys is None:
            return Enqueued((await engine.enqueue_on(conn, self.name, data, stamps))[0], False)
        got = await engine.enqueue_keyed_on(conn, self.name, data, keys, _window(opts), stamps)
        return got[0]

    async def enqueue_on(self, conn: Any, payload: object, opts: EnqueueOpts | None = None) -> int:
        """Insert one job inside the transaction *your* ``psycopg.AsyncConnection`` holds
        (or a SQLAlchemy ``AsyncSession`` / ``AsyncConnection`` on the psycopg dialect).

        The transactional outbox: the job commits or rolls back with your own
        writes. Nothing is committed here and no wake is sent; after your commit,
        ``await store.wake(queue.name)``, or let the consumers' re-poll find it.

        >>> async with conn.transaction():
        ...     await conn.execute("INSERT INTO orders (id) VALUES (%s)", [42])
        ...     await emails.enqueue_on(conn, {"order": 42})
        >>> await store.wake("emails")
        """
        return (await self.enqueue_unique_on(conn, payload, opts)).id

    async def enqueue_many_on(
        self,
        conn: Any,
        payloads: Iterable[object],
        opts: EnqueueOpts | None = None,
        *,
        dedupe_keys: Iterable[str | None] | None = None,
    ) -> list[int]:
        """Insert many jobs inside your own connection's transaction (see :meth:`enqueue_on`)."""
        engine, data, stamps = self._outbox(payloads, opts)
        keys = _dedupe_keys(len(data), opts, dedupe_keys)
        if not data:
            return []
        if keys is None:
            return await engine.enqueue_on(conn, self.name, data, stamps)
        got = await engine.enqueue_keyed_on(conn, self.name, data, keys, _window(opts), stamps)
        return [item.id for item in got]

    async def claim_one(self, worker_id: str) -> JobHandle | None:
        """Claim the next job, or ``None`` if nothing is claimable."""
        handles = await self.claim_batch(worker_id, 1)
        return handles[0] if handles else None

    async def claim_batch(self, worker_id: str, n: int) -> list[JobHandle]:
        """Claim up to ``n`` jobs in claim order (``priority DESC, run_at, id``).

        A paused queue gives nothing; a limited one at most what its limits allow."""
        return (await self.claim_held(worker_id, n))[0]

    async def claim_held(self, worker_id: str, n: int) -> tuple[list[JobHandle], float | None]:
        """:meth:`claim_batch`, plus the seconds until the queue's rate limit allows the
        next claim when it held this one back (``None`` otherwise): the moment a
        consumption loop sleeps until."""
        engine = engine_of(self._store)
        check_worker_id(worker_id)
        if type(n) is not int:
            raise InvalidArgumentError(f"n must be an int, got {describe(n)}")
        if n <= 0:
            return [], None
        # a LIMIT is a signed 64-bit integer on every engine; more than that is "all"
        claimed = await engine.claim(self.name, worker_id, min(n, _JOB_ID_MAX), ERROR_MAX_ATTEMPTS)
        rows = claimed.rows
        if len(rows) > 1:
            rows.sort(key=claim_order)  # an engine may return them in any order
        return [JobHandle(self, Job(row)) for row in rows], claimed.hold_s

    # -- flow control: pause and limits, stored in the database ---------------------
    async def pause(self) -> None:
        """Stop every worker everywhere from claiming from this queue (enqueues still land).

        Once this returns, no claim that starts afterwards takes a job of this
        queue, on any host, including workers started later."""
        engine = engine_of(self._store)
        await engine.set_paused(self.name, True)

    async def resume(self) -> None:
        """Let claims through again and wake the queue's consumers at once."""
        engine = engine_of(self._store)
        await engine.set_paused(self.name, False)

    async def set_limits(
        self,
        *,
        concurrency: int | None = None,
        partition_concurrency: int | None = None,
        rate: Rate | str | None = None,
        burst: int | None = None,
    ) -> None:
        """Replace the queue's limits (``None``: no such limit), enforced in the claim.

        ``concurrency``: at most this many jobs of the queue processing at once
        across all workers; ``partition_concurrency``: at most this many per
        ``EnqueueOpts.partition_key``; ``rate``: claims per period (``"100/s"``,
        ``"10/m"`` or a :class:`Rate`), up to ``burst`` at once (default 1).

        >>> await queue.set_limits(concurrency=5, rate="100/s")
        """
        engine = engine_of(self._store)
        if concurrency is not None:
            check_limit("concurrency", concurrency)
        if partition_concurrency is not None:
            check_limit("partition_concurrency", partition_concurrency)
        parsed = None
        if rate is not None:
            parsed = rate if isinstance(rate, Rate) else parse_rate(rate)
            check_limit("rate", parsed.n)
            check_positive("rate period", parsed.period_s)
        if burst is not None:
            check_limit("burst", burst)
            if parsed is None:
                raise InvalidArgumentError("burst needs a rate")
        await engine.set_limits(
            self.name,
            concurrency,
            partition_concurrency,
            None if parsed is None else (parsed.n, parsed.period_s),
            burst,
        )

    async def set_fair(
        self, fair: bool = True, *, weights: Mapping[str, float] | None = None
    ) -> None:
        """Claim this queue round-robin across its partition keys (``False``: in plain
        claim order again), enforced in the claim on every worker.

        ``weights`` (``{partition_key: weight}``, replacing the stored ones; a key
        without one weighs 1): a key of weight 2 gets twice the turns of a key of
        weight 1 while both have work. Priority still orders jobs within a key.

        >>> await queue.set_fair(weights={"big-customer": 4})
        """
        engine = engine_of(self._store)
        if not isinstance(fair, bool):
            raise InvalidArgumentError(f"fair must be True or False, got {describe(fair)}")
        await engine.set_fair(self.name, fair, check_weights(weights))

    async def fair_weights(self) -> dict[str, float]:
        """The stored key weights of this fair queue (keys without one weigh 1)."""
        return await engine_of(self._store).fair_weights(self.name)

    async def set_aging(self, aging_s: float | None) -> None:
        """A due job waiting ``aging_s`` seconds counts one priority level higher, and one
        more per further ``aging_s`` (``None``: no aging); applied by the sweep
        (``sweep_expired``, run by every worker), so see docs/flow-control.md for the bound.
        """
        engine = engine_of(self._store)
        await engine.set_aging(
            self.name, None if aging_s is None else check_positive("aging_s", aging_s)
        )

    async def settings(self) -> QueueSettings:
        """The stored pause flag and limits of this queue."""
        engine = engine_of(self._store)
        rows = await engine.queue_settings(self.name)
        if not rows:
            return QueueSettings(self.name, False, None, None, None, None, None, None)
        return QueueSettings.from_row(rows[0])

    async def info(self) -> QueueInfo:
        """Paused, limits and counts of this queue."""
        from alkstore.admin import Admin

        return await Admin(self._store).queue_info(self.name)

    async def ack_batch(self, ids: Iterable[int]) -> int:
        """Delete each listed job that is processing with an unexpired claim; count them."""
        engine = engine_of(self._store)
        id_list = [_check_job_id(job_id) for job_id in _items("ack_batch", ids)]
        if not id_list:
            return 0
        return await engine.ack_batch(self.name, id_list)

    async def cancel(self, job_id: int) -> bool:
        """Delete the live job (pending or processing); ``False`` if there is none.

        The cancel is announced on the queue's channel: a worker running the job
        stops its handler and writes no outcome."""
        engine = engine_of(self._store)
        done = await engine.cancel(self.name, _check_job_id(job_id))
        if done:
            try:
                await engine.notify(self.name, f"{CANCEL_NOTE}{job_id}")
            except StoreClosedError:
                raise
            except AlkstoreError:  # the holder's refused heartbeat is the backstop
                pass
        return done

    async def get_job(self, job_id: int) -> Job | None:
        """Read a job of this queue, live or dead."""
        engine = engine_of(self._store)
        row = await engine.get_job(self.name, _check_job_id(job_id))
        return None if row is None else Job(row)

    async def sweep_expired(self) -> SweepResult:
        """Dead-letter expired jobs; purge dead ones older than the retention."""
        engine = engine_of(self._store)
        counts = await engine.sweep(self.name, self.opts.dead_letter_retention_s, ERROR_EXPIRED)
        return SweepResult(*counts)

    async def outcome(self, job_id: int) -> JobOutcome | None:
        """What became of a job now: kept result, dead, or still live; ``None`` if none."""
        engine = engine_of(self._store)
        rows = await engine.outcomes(self.name, [_check_job_id(job_id)])
        return JobOutcome.from_row(rows[0]) if rows else None

    async def wait_outcome(self, job_id: int, timeout_s: float = 10.0) -> JobOutcome:
        """Wait until the job succeeds (its kept result) or dies (``JobDeadError`` with its
        last error); ``ResultTimeoutError`` after ``timeout_s``. Every waiter of the store
        shares one listener on the results channel."""
        engine_of(self._store)
        ident = _check_job_id(job_id)
        timeout = check_positive("timeout_s", timeout_s)
        return await self._store._results.wait(self.name, ident, timeout)

    async def result(self, job_id: int, timeout_s: float = 10.0) -> Any:
        """The kept return value of job ``job_id``, waiting up to ``timeout_s`` (see
        :meth:`wait_outcome`)."""
        return (await self.wait_outcome(job_id, timeout_s)).value

    async def _next_wake_in(self) -> float | None:
        """Seconds until a delayed job becomes due or a claim lapses (the claim loop's timer)."""
        return await engine_of(self._store).next_wake_in(self.name)

    async def jobs(
        self, worker_id: str, batch: int = 1, *, poll_interval_s: float = 1.0
    ) -> AsyncIterator[JobHandle]:
        """The wake-driven claim loop: yields claimed jobs until the store closes.

        Listens on the queue's channel and claims on each wake; re-polls every
        ``poll_interval_s`` (covering a lost wake) and wakes itself when the
        earliest delayed job becomes due or a claim lapses. A failed claim (the
        database away) backs off and claims again; it never ends the loop.

        Leaving the loop early (``break``, ``aclose()``, the iterator collected, the
        store closed) releases the jobs of the last batch not yet handed out:
        pending again, their attempt uncounted.
        """
        engine_of(self._store)
        check_worker_id(worker_id)
        if type(batch) is not int or batch < 1:
            raise InvalidArgumentError(f"batch must be an int >= 1, got {describe(batch)}")
        poll = check_positive("poll_interval_s", poll_interval_s)
        async with self._store._wake_subscription(self.name) as sub:
            loop = ClaimLoop((self,), sub, poll)
            self._store._loops.add(loop)
            try:
                while not sub.closed:
                    claimed = await loop.attempt(self.claim_held, worker_id, batch)
                    if claimed is None:
                        continue  # failed and backed off: claim again
                    handles, hold = claimed
                    loop.held(hold)
                    loop.ahead.extend(handles)
                    while loop.ahead:
                        yield loop.ahead.popleft()
                    if len(handles) < batch:
                        await loop.wait_for_work()
            except StoreClosedError:
                return  # closed while claiming: the loop ends quietly
            finally:
                self._store._loops.discard(loop)
                if loop.ahead and not self._store._closed:
                    await loop.give_back()  # left early: what was never handed out

    def __repr__(self) -> str:
        return f"<alkstore.Queue {describe(self.name)}>"


class JobHandle:
    """A claimed job: ``ack``, ``retry`` or ``fail`` it once; ``heartbeat`` as often as needed.

    Every operation is fenced on this claim (state, deadline and attempt count);
    when the claim is no longer this handle's it changes nothing and returns ``False``.
    """

    __slots__ = ("_consumed", "_queue", "job")

    def __init__(self, queue: Queue, job: Job) -> None:
        self._queue = queue
        self.job = job
        self._consumed = False

    def _start(self) -> Engine:
        engine = engine_of(self._queue._store)
        if self._consumed:
            raise HandleConsumedError(
                f"job {self.job.id}'s handle was already acked, retried, failed or snoozed"
            )
        return engine

    async def _consume(self, op: Awaitable[bool]) -> bool:
        """Run the one-shot ``op``; the handle counts as consumed from before it starts
        (a concurrent second call raises), and again usable if the database failed."""
        self._consumed = True
        try:
            return await op
        except BaseException:
            self._consumed = False
            raise

    async def ack(self) -> bool:
        """Delete the job: it is done."""
        self._start()
        job = self.job
        return await self._consume(
            self._queue._store._acks.ack(self._queue.name, job.id, job.attempts)
        )

    async def ack_result(self, value: object, keep_s: float) -> bool:
        """Delete the job and keep ``value`` (JSON) as its result for ``keep_s`` seconds,
        in one fenced transaction; ``PayloadError`` (nothing written) if it is not JSON."""
        engine = self._start()
        keep = check_positive("keep_s", keep_s)
        text = encode_result(value)
        limit = self._queue._store.max_payload_bytes
        if limit is not None and len(text) > limit // 4:  # under a quarter: fits as UTF-8
            check_size("result", len(text.encode()), limit)
        job = self.job
        done = await engine.ack_result(self._queue.name, job.id, job.attempts, text, keep)
        self._consumed = True
        return done

    async def retry(self, error: str | None = None, delay_s: float | None = None) -> bool:
        """Back to pending after ``delay_s`` (else the backoff curve); dead at budget."""
        engine = self._start()
        _check_error(error)
        if delay_s is not None:
            delay_s = check_non_negative("delay_s", delay_s)
        job = self.job
        attempts = job.attempts
        if attempts >= job.max_attempts:
            return await self._consume(
                engine.dead_letter(
                    self._queue.name,
                    job.id,
                    attempts,
                    ERROR_MAX_ATTEMPTS if error is None else error,
                )
            )
        if delay_s is None:
            delay_s = float(backoff_delay_s(attempts, job.retry_base_s, random.randint))
        return await self._consume(engine.retry(self._queue.name, job.id, attempts, delay_s, error))

    async def release(self) -> bool:
        """Give the claim back unrun: pending again at its place in line, this attempt
        not counted (for a job claimed ahead and never started)."""
        engine = self._start()
        job = self.job
        done = await engine.release(self._queue.name, job.id, job.attempts, None)
        self._consumed = True
        return done

    async def fail(self, error: str | None = None) -> bool:
        """Move the job to the dead-letter table now."""
        engine = self._start()
        _check_error(error)
        job = self.job
        return await self._consume(
            engine.dead_letter(
                self._queue.name, job.id, job.attempts, ERROR_FAILED if error is None else error
            )
        )

    async def snooze(self, delay_s: float) -> bool:
        """Back to pending after ``delay_s`` without spending an attempt (``attempts``
        goes back to what it was before this claim)."""
        engine = self._start()
        delay_s = check_non_negative("delay_s", delay_s)
        job = self.job
        done = await engine.release(self._queue.name, job.id, job.attempts, delay_s)
        self._consumed = True
        return done

    async def heartbeat(self, extend_s: float | None = None) -> bool:
        """Reset the claim deadline to now + ``extend_s`` (default: the visibility timeout)."""
        engine = engine_of(self._queue._store)
        if extend_s is not None:
            extend_s = check_positive("extend_s", extend_s)
        job = self.job
        return await engine.heartbeat(self._queue.name, job.id, job.attempts, extend_s)

    @property
    def consumed(self) -> bool:
        """Whether ``ack``, ``retry``, ``fail`` or ``snooze`` already ran."""
        return self._consumed

    def __repr__(self) -> str:
        return f"<alkstore.JobHandle {describe(self.job)}>"


class Transaction:
    """A store transaction: enqueues and the caller's SQL commit or roll back together."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._tx: EngineTransaction | None = None
        self._done = False
        self._token: contextvars.Token[Transaction | None] | None = None

    def _open(self) -> EngineTransaction:
        engine_of(self._store)
        if self._tx is None or self._done:
            raise StoreClosedError("the transaction is not open (use it inside `async with`)")
        return self._tx

    async def __aenter__(self) -> Transaction:
        engine = engine_of(self._store)
        if self._tx is not None:
            raise InvalidArgumentError("a Transaction can be entered only once")
        self._tx = await engine.begin()
        self._token = _open_transaction.set(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tx = self._tx
        if tx is None or self._done:
            return
        self._done = True
        try:
            if exc_type is None and not self._store._closed:
                await tx.commit()
            else:
                await tx.rollback()
        finally:
            if self._token is not None:
                # the sync facade enters and exits in two tasks: the token's context is gone
                with contextlib.suppress(ValueError):
                    _open_transaction.reset(self._token)

    def queue(self, name: str, opts: QueueOpts | None = None) -> TxQueue:
        """A handle whose enqueues write inside this transaction."""
        engine_of(self._store)
        return TxQueue(self, check_name(name), _check_opts(opts))

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> list[Row]:
        """Run your own SQL in this transaction (the engine's parameter style)."""
        tx = self._open()
        if type(sql) is not str or not sql.strip() or not is_storable_text(sql):
            raise InvalidArgumentError(f"sql must be a non-empty str, got {describe(sql)}")
        return await tx.execute(sql, params)

    async def notify(self, channel: str, payload: str = "") -> None:
        """Notify ``channel`` when (and only if) the transaction commits."""
        tx = self._open()
        check_name(channel, "channel")
        await tx.notify(channel, encode_notify_payload(payload))


class TxQueue(_Enqueuing):
    """A queue handle bound to a transaction: enqueues are invisible until commit,
    and their wake is sent only on commit."""

    __slots__ = ("_tx",)

    def __init__(self, tx: Transaction, name: str, opts: QueueOpts) -> None:
        super().__init__(name, opts)
        self._tx = tx

    def _limit(self) -> int | None:
        return self._tx._store.max_payload_bytes

    def _writer(self) -> EngineTransaction:
        return self._tx._open()
