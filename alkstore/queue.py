"""A queue handle: enqueue, claim, flow control, results and the claim loop of one queue.

Every operation validates, resolves and makes one engine call through the
store's door. The queue knows its store through :class:`QueueHome` (what it
reads of it), so this module does not import the store.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from alkstore.consume import ClaimedJob, ClaimLoop
from alkstore.core.dedupe import Enqueued
from alkstore.core.fair import check_weights
from alkstore.core.flow import CANCEL_NOTE, QueueSettings, Rate, check_limit, parse_rate
from alkstore.core.job import ERROR_EXPIRED, ERROR_MAX_ATTEMPTS, Job, SweepResult, claim_order
from alkstore.core.life import Attempt, Progress
from alkstore.core.names import check_worker_id
from alkstore.core.options import EnqueueOpts, QueueOpts, check_positive, describe
from alkstore.core.results import JobOutcome
from alkstore.engine import Engine, EngineTransaction, SupportsOutbox
from alkstore.engine_door import engine_of
from alkstore.enqueuing import (
    JOB_ID_MAX,
    Enqueuing,
    OutboxWrite,
    check_job_id,
    debounce_of,
    dedupe_keys_for,
    encode_many,
    list_of,
    window_of,
)
from alkstore.errors import AlkstoreError, InvalidArgumentError, StoreClosedError
from alkstore.job_handle import HandleStore, JobHandle, release_many
from alkstore.life import read_attempts, read_progress
from alkstore.transaction import joined_transaction

if TYPE_CHECKING:
    from alkstore.admin import QueueInfo
    from alkstore.subscription import Subscription
    from alkstore.waiters import ResultWaiters

__all__ = ["Queue", "QueueHome", "prepare_outbox"]


class QueueHome(HandleStore, Protocol):
    """What a queue reads of its store (``alkstore.store.Store`` has it)."""

    _results: ResultWaiters
    _loops: weakref.WeakSet[ClaimLoop]

    def _wake_subscription(self, *channels: str) -> Subscription: ...

    def queue(self, name: str, opts: QueueOpts | None = None) -> Queue: ...


def prepare_outbox(
    queue: Queue,
    payloads: Iterable[object],
    opts: EnqueueOpts | None,
    dedupe_keys: Iterable[str | None] | None = None,
) -> OutboxWrite:
    """The outbox insert of ``payloads`` into ``queue``, checked and encoded (nothing
    written): the one preparation behind ``Queue.enqueue*_on`` and their blocking twins."""
    engine = engine_of(queue._store)
    if debounce_of(opts) is not None:
        raise InvalidArgumentError("debounce_key cannot be used with enqueue_on: use enqueue")
    if not isinstance(engine, SupportsOutbox):
        raise InvalidArgumentError(
            f"enqueue_on needs the PostgreSQL engine; this store is {engine.name}"
        )
    data = encode_many(payloads, queue._limit())
    stamps = queue._resolve(opts)
    keys = dedupe_keys_for(len(data), opts, dedupe_keys)
    return OutboxWrite(engine, queue.name, data, stamps, keys, window_of(opts))


class Queue(Enqueuing):
    """Operations on one queue; every one is scoped to this queue's name."""

    __slots__ = ("_store",)

    def __init__(self, store: QueueHome, name: str, opts: QueueOpts) -> None:
        super().__init__(name, opts)
        self._store = store

    def _limit(self) -> int | None:
        return self._store.max_payload_bytes

    def _writer(self) -> Engine | EngineTransaction:
        engine = engine_of(self._store)
        tx = joined_transaction(self._store)
        # inside this store's transaction: commit or roll back with it
        return engine if tx is None else tx

    async def enqueue_unique_on(
        self, conn: Any, payload: object, opts: EnqueueOpts | None = None
    ) -> Enqueued:
        """:meth:`enqueue_on`, answering ``Enqueued(id, duplicate)`` (see ``dedupe_key``)."""
        return (await prepare_outbox(self, (payload,), opts).run(conn))[0]

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
        got = await prepare_outbox(self, payloads, opts, dedupe_keys).run(conn)
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
        claimed = await engine.claim(self.name, worker_id, min(n, JOB_ID_MAX), ERROR_MAX_ATTEMPTS)
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
        from alkstore.admin import Admin  # on first use: a worker's start does without it

        return await Admin(self._store).queue_info(self.name)

    async def ack_batch(self, ids: Iterable[int]) -> int:
        """Delete each listed job that is processing with an unexpired claim; count them."""
        engine = engine_of(self._store)
        id_list = [check_job_id(job_id) for job_id in list_of("ack_batch", ids)]
        if not id_list:
            return 0
        return await engine.ack_batch(self.name, id_list)

    async def cancel(self, job_id: int) -> bool:
        """Delete the live job (pending or processing); ``False`` if there is none.

        The cancel is announced on the queue's channel: a worker running the job
        stops its handler and writes no outcome."""
        engine = engine_of(self._store)
        done = await engine.cancel(self.name, check_job_id(job_id))
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
        row = await engine.get_job(self.name, check_job_id(job_id))
        return None if row is None else Job(row)

    async def attempts(self, job_id: int) -> list[Attempt]:
        """The finished attempts of a job of this queue, oldest first: number, worker,
        host, times, outcome and error (docs/durable.md, "Attempt history")."""
        return await read_attempts(engine_of(self._store), self.name, job_id)

    async def progress(self, job_id: int) -> Progress | None:
        """The latest progress the job's handler reported (``current_job().progress``)."""
        return await read_progress(engine_of(self._store), self.name, job_id)

    async def sweep_expired(self) -> SweepResult:
        """Dead-letter expired jobs; purge dead ones older than the retention."""
        engine = engine_of(self._store)
        counts = await engine.sweep(self.name, self.opts.dead_letter_retention_s, ERROR_EXPIRED)
        return SweepResult(*counts)

    async def outcome(self, job_id: int) -> JobOutcome | None:
        """What became of a job now: kept result, dead, or still live; ``None`` if none."""
        engine = engine_of(self._store)
        rows = await engine.outcomes(self.name, [check_job_id(job_id)])
        return JobOutcome.from_row(rows[0]) if rows else None

    async def parent_outcomes(self, job_id: int) -> dict[int, JobOutcome | None]:
        """What became of each parent of job ``job_id`` (``EnqueueOpts.after``), by id:
        a succeeded parent's kept result (``None`` value if it kept none), dead, or still
        live; ``None`` for one gone without a trace. Readable while the job has not
        finished (a parent's result is kept until then)."""
        engine = engine_of(self._store)
        ident = check_job_id(job_id)
        parents = [int(e[0]) for e in await engine.job_edges(ident) if e[1] == ident]
        rows = await engine.outcomes(None, parents) if parents else []
        got = {int(row[0]): JobOutcome.from_row(row) for row in rows}
        return {parent: got.get(parent) for parent in parents}

    async def wait_outcome(self, job_id: int, timeout_s: float = 10.0) -> JobOutcome:
        """Wait until the job succeeds (its kept result) or dies (``JobDeadError`` with its
        last error); ``ResultTimeoutError`` after ``timeout_s``. Every waiter of the store
        shares one listener on the results channel."""
        engine_of(self._store)
        ident = check_job_id(job_id)
        timeout = check_positive("timeout_s", timeout_s)
        return await self._store._results.wait(self.name, ident, timeout)

    async def result(self, job_id: int, timeout_s: float = 10.0) -> Any:
        """The kept return value of job ``job_id``, waiting up to ``timeout_s`` (see
        :meth:`wait_outcome`)."""
        return (await self.wait_outcome(job_id, timeout_s)).value

    async def _next_wake_in(self, within_s: float) -> float | None:
        """Seconds until a delayed job becomes due or a claim lapses, if within
        ``within_s`` (the claim loop's timer)."""
        return await engine_of(self._store).next_wake_in(self.name, within_s)

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
            loop = ClaimLoop((self,), sub, poll, release_all=_release_all)
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
                        yield cast(
                            JobHandle, loop.ahead.popleft()
                        )  # the loop holds what we claimed
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


async def _release_all(handles: list[ClaimedJob]) -> list[bool]:
    """A left ``jobs()`` loop's unhanded claims, all of one queue: one statement."""
    return await release_many(cast("list[JobHandle]", handles))
