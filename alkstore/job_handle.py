"""A claimed job's handle: ack, retry, fail, snooze or release it once; heartbeat it.

The handle knows its queue and store through the small protocols below (what
it reads of them), so this module does not import the queue or the store.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Protocol

from alkstore.core import followups
from alkstore.core.backoff import backoff_delay_s
from alkstore.core.deps import GraphNode
from alkstore.core.job import ERROR_FAILED, ERROR_MAX_ATTEMPTS, Job
from alkstore.core.names import check_name, is_storable_text
from alkstore.core.options import (
    EnqueueOpts,
    QueueOpts,
    check_non_negative,
    check_positive,
    describe,
    resolve,
)
from alkstore.core.payload import check_size, encode_payload
from alkstore.core.results import encode_result
from alkstore.engine_door import StoreDoor, engine_of
from alkstore.errors import HandleConsumedError, InvalidArgumentError

if TYPE_CHECKING:
    from alkstore.engine import Engine
    from alkstore.group_ack import AckGroup

__all__ = ["HandleQueue", "JobHandle", "release_many"]


class HandleStore(StoreDoor, Protocol):
    """What a handle reads of its store: the door and the store's ack batcher."""

    _acks: AckGroup


class HandleQueue(Protocol):
    """What a handle reads of its queue (``alkstore.queue.Queue`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def _store(self) -> HandleStore: ...


def _check_error(error: object) -> str | None:
    if error is not None and (type(error) is not str or not is_storable_text(error)):
        raise InvalidArgumentError(
            "error must be None or a str of valid UTF-8 without NUL characters, "
            f"got {describe(error)}"
        )
    return error


class JobHandle:
    """A claimed job: ``ack``, ``retry`` or ``fail`` it once; ``heartbeat`` as often as needed.

    Every operation is fenced on this claim (state, deadline and attempt count);
    when the claim is no longer this handle's it changes nothing and returns ``False``.
    """

    __slots__ = ("_consumed", "_queue", "job")

    def __init__(self, queue: HandleQueue, job: Job) -> None:
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
        (a concurrent second call raises), and again usable if the database failed.
        Follow-ups still staged for the attempt (not an ack's: it took them) are dropped."""
        followups.drop(self.job.id, self.job.attempts)
        self._consumed = True
        try:
            return await op
        except BaseException:
            self._consumed = False
            raise

    async def ack(self) -> bool:
        """Delete the job: it is done (and write the follow-ups :meth:`stage` kept)."""
        engine = self._start()
        job = self.job
        staged = followups.take([(job.id, job.attempts)])
        if staged:
            item = (self._queue.name, job.id, job.attempts)

            async def acked() -> bool:
                try:
                    return (job.id, job.attempts) in await engine.ack_staged([item], staged)
                except BaseException:
                    followups.put({job.id: job.attempts}, staged)  # a retry of ack writes them
                    raise

            return await self._consume(acked())
        return await self._consume(
            self._queue._store._acks.ack(self._queue.name, job.id, job.attempts)
        )

    def stage(
        self,
        queue: str,
        payload: object,
        opts: EnqueueOpts | None = None,
        queue_opts: QueueOpts | None = None,
    ) -> None:
        """Keep a follow-up job for this attempt: written in the transaction of its ack
        (``ack`` or ``ack_result``) only if that ack succeeds; a refused ack (the claim
        lost), a retry, failure or snooze writes none (docs/contract.md, "Dependencies")."""
        check_name(queue)
        if isinstance(opts, EnqueueOpts) and (opts.after or opts.dedupe_key or opts.debounce_key):
            raise InvalidArgumentError("a follow-up takes no after, dedupe_key or debounce_key")
        data = encode_payload(payload)
        check_size("payload", len(data), self._queue._store.max_payload_bytes)
        stamps = resolve(queue_opts or QueueOpts(), opts)
        followups.stage(self.job.id, self.job.attempts, [GraphNode(queue, data, stamps)])

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
        staged = followups.take([(job.id, job.attempts)])
        if staged:
            item = (self._queue.name, job.id, job.attempts)
            got = await engine.ack_staged([item], staged, None, (text, keep))
            done = (job.id, job.attempts) in got
        else:
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

    async def _gone(self) -> bool:
        """Whether the job has no row left, live or dead. After a fenced call refused
        while this claim was unexpired, nobody else could claim it: a job gone then was
        deleted under the claim (cancelled)."""
        return await engine_of(self._queue._store).find_job(self.job.id) is None

    @property
    def consumed(self) -> bool:
        """Whether ``ack``, ``retry``, ``fail`` or ``snooze`` already ran."""
        return self._consumed

    def __repr__(self) -> str:
        return f"<alkstore.JobHandle {describe(self.job)}>"


async def release_many(handles: Sequence[JobHandle]) -> list[bool]:
    """:meth:`JobHandle.release` of many claims of one queue in one fenced transaction
    (a stopping worker's jobs claimed ahead and never started); each answered on its
    own: ``False`` for a stale claim (lapsed, or the job reclaimed), which stays as it
    is. The handles end consumed, as ``release`` leaves them."""
    handles = list(handles)
    if not handles:
        return []
    for handle in handles:
        if not isinstance(handle, JobHandle):
            raise InvalidArgumentError(f"release_many takes job handles, got {describe(handle)}")
    queue = handles[0]._queue
    engine = handles[0]._start()
    ids: set[int] = set()
    for handle in handles:
        if handle._queue.name != queue.name or handle._queue._store is not queue._store:
            raise InvalidArgumentError(
                f"release_many takes the handles of one queue, got {describe(queue.name)} "
                f"and {describe(handle._queue.name)}"
            )
        handle._start()
        if handle.job.id in ids:
            raise InvalidArgumentError(f"release_many got job {handle.job.id} twice")
        ids.add(handle.job.id)
    items = [(handle.job.id, handle.job.attempts) for handle in handles]
    released = await engine.release_batch(queue.name, items)
    for handle in handles:
        handle._consumed = True
    return [handle.job.id in released for handle in handles]
