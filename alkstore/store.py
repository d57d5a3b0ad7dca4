"""The store: a connection to one job store, the home of its queues, transactions,
listeners, result waiters and ack batcher. Make one with :func:`alkstore.connect`.

Its parts live beside it: ``queue`` (Queue), ``job_handle`` (JobHandle),
``transaction`` (Transaction, TxQueue), ``enqueuing`` (what Queue and TxQueue
share) and ``engine_door`` (``engine_of``, the one door to the engine).
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from alkstore.consume import ClaimLoop
from alkstore.core import followups
from alkstore.core.names import check_name
from alkstore.core.options import QueueOpts, describe
from alkstore.core.payload import DEFAULT_MAX_PAYLOAD_BYTES, encode_notify_payload
from alkstore.core.results import RESULTS_CHANNEL
from alkstore.engine import Engine
from alkstore.engine_door import engine_of
from alkstore.enqueuing import check_opts
from alkstore.errors import AlkstoreError, InvalidArgumentError
from alkstore.group_ack import AckGroup
from alkstore.job_handle import JobHandle
from alkstore.life import send_signal
from alkstore.queue import Queue
from alkstore.subscription import ListenerHub, Subscription
from alkstore.transaction import Transaction
from alkstore.waiters import ResultWaiters

if TYPE_CHECKING:  # imported on first use: a worker's start does without it (and bulk.py)
    from alkstore.admin import Admin

__all__ = ["Store"]

_live_stores: weakref.WeakSet[Store] = weakref.WeakSet()


def _mark_forked() -> None:
    for store in list(_live_stores):
        store._forked = True


os.register_at_fork(after_in_child=_mark_forked)


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
        return Queue(self, check_name(name), check_opts(opts))

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
        staged = followups.take((item[1], item[2]) for item in items)
        if not staged:
            acked = await engine.ack_receipted(items, owner, token)
        else:  # follow-ups staged by the handlers: written with the ack, or not at all
            try:
                acked = await engine.ack_staged(items, staged, (owner, token))
            except BaseException:
                followups.put({item[1]: item[2] for item in items}, staged)  # the retry's
                raise
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

    async def signal(self, job_id: int, name: str, payload: object = None) -> bool:
        """Send signal ``name`` with JSON ``payload`` to job ``job_id``: a handler
        parked in ``current_job().wait_for(name)`` resumes at once with ``payload``
        (a later wait finds it too). ``False`` if no live job has that id."""
        engine = engine_of(self)
        return await send_signal(engine, job_id, name, payload, self.max_payload_bytes)

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
