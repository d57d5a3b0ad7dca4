"""A worker's hand-offs: jobs an enqueue inserted already claimed by this worker.

On an engine with the ``SupportsHandoff`` capability (PostgreSQL) the worker
opens a slot and listens on its channel. While its last claim round found its
queues empty and a slot of its own is free, it says it is idle; an enqueue of
an immediately due job then inserts the job claimed by it and notifies it with
the row, and the note starts the handler at once (``Producer.take_handed``),
with no claim statement between the producer's commit and the handler. A note
that finds no free slot, or the worker stopping, gives its job back (pending
again at its place, the attempt uncounted), so a hand-off never waits behind
other work in this process. A note lost with its connection leaves the job
claimed until its claim lapses, as a claim whose answer was lost.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from alkstore.core.job import Job
from alkstore.engine import SupportsHandoff
from alkstore.engine_door import engine_of
from alkstore.errors import AlkstoreError
from alkstore.job_handle import JobHandle
from alkstore.subscription import Subscription

if TYPE_CHECKING:
    from alkstore.core.job import Notification, Row
    from alkstore.queue import Queue
    from alkstore.store import Store
    from alkstore.worker.netwait import DbWaits
    from alkstore.worker.producer import Producer

__all__ = ["Handoffs"]

log = logging.getLogger("alkstore.worker")


class Handoffs:
    """The hand-off slot of one worker: its channel, its idle mark, its notes."""

    def __init__(self, worker_id: str, producer: Producer, db: DbWaits) -> None:
        self.worker_id = worker_id
        self.producer = producer
        self.db = db
        self.slot: int | None = None
        self.engine: SupportsHandoff | None = None
        self.queues: dict[str, Queue] = {}
        self.sub: Subscription | None = None
        self.idle = False
        self.fetches: set[asyncio.Task[None]] = set()

    async def open(self, store: Store, queues: list[Queue]) -> None:
        """Open the slot and listen on its channel (nothing on an engine without)."""
        engine = engine_of(store)
        if not isinstance(engine, SupportsHandoff) or not store.listens:
            return
        opened = await engine.handoff_open(self.worker_id, [q.name for q in queues])
        if opened is None:
            return
        slot, channel = opened
        self.engine, self.queues = engine, {q.name: q for q in queues}
        sub = Subscription(store._hub, (channel,), wake_only=False, on_note=self._note)
        await sub.__aenter__()
        self.sub, self.slot = sub, slot
        self.producer.say_idle = self.mark

    def mark(self, idle: bool) -> None:
        """Say whether the worker takes hand-offs now (a no-op when unchanged)."""
        if self.slot is None or self.engine is None or idle == self.idle:
            return
        self.idle = idle
        self.engine.handoff_idle(self.slot, idle)

    async def leave(self) -> None:
        """Take no more hand-offs (the stop): the idle mark and the slot go; notes
        already on their way still arrive and give their jobs back."""
        slot, engine = self.slot, self.engine
        if slot is None or engine is None:
            return
        self.mark(False)
        self.slot = None
        await engine.handoff_close(slot)

    async def close(self) -> None:
        """Stop listening on the channel (after the stop's drain); wait for the jobs
        of late notes to be given back."""
        sub, self.sub = self.sub, None
        if sub is not None:
            await sub.aclose()
        for task in self.fetches:
            task.cancel()
        await asyncio.gather(*self.producer.giving, return_exceptions=True)
        if self.producer.handed:
            log.info("worker %s: %d job(s) handed over", self.worker_id, self.producer.handed)

    # -- the notes ----------------------------------------------------------------------
    def _note(self, note: Notification) -> None:
        engine = self.engine
        assert engine is not None
        try:
            got = engine.handoff_row(note.payload)
        except (ValueError, TypeError, IndexError) as e:
            log.error("worker %s: unreadable hand-off note %r: %s", self.worker_id, note, e)
            return
        if isinstance(got, int):  # too large for a note: the row is read
            task = asyncio.get_running_loop().create_task(self._fetch(engine, got))
            self.fetches.add(task)
            task.add_done_callback(self.fetches.discard)
            return
        self._arrived(got)

    async def _fetch(self, engine: SupportsHandoff, job_id: int) -> None:
        try:
            row = await self.db.call(engine.handed_row(job_id, self.worker_id), "handed row")
        except AlkstoreError as e:  # its claim lapses and it is claimed again
            log.warning("worker %s: handed job %d not read: %s", self.worker_id, job_id, e)
            return
        if row is not None:
            self._arrived(row)

    def _arrived(self, row: Row) -> None:
        queue = self.queues.get(str(row[1]))
        if queue is None:  # not one of ours: cannot happen (the slot names our queues)
            log.error("worker %s: handed a job of queue %r", self.worker_id, row[1])
            return
        self.producer.take_handed(JobHandle(queue, Job(row)))
