"""The attempt history's writer (#24): the completer hands it each finished attempt
with the outcome the database gave (a refused write is ``lost``); it writes them in
batches (one transaction per batch, one in flight at a time), keeping each job's
newest ``keep``.

A plain success is not recorded: its job row is gone with it, and nothing could
show the record (a success whose result is kept is). A worker that is killed
writes nothing for its attempt: the reader shows the gap as ``lost``
(``core.life.attempt_history``).
"""

from __future__ import annotations

import logging
import socket
import time
from typing import TYPE_CHECKING

from alkstore.core.job import Row
from alkstore.engine_door import engine_of
from alkstore.errors import AlkstoreError
from alkstore.group_ack import Batcher

if TYPE_CHECKING:
    from alkstore.store import Store
    from alkstore.worker.netwait import DbWaits
    from alkstore.worker.runs import Run

__all__ = ["AttemptLog"]

log = logging.getLogger("alkstore.worker")


class AttemptLog:
    """Batched writes of one worker's finished attempts."""

    def __init__(self, store: Store, worker_id: str, keep: int, db: DbWaits) -> None:
        self.store = store
        self.db = db  # every write bounded like the worker's other calls (a cut network)
        self.worker_id = worker_id
        self.keep = keep
        self.host = socket.gethostname()
        self._batch: Batcher[Row] = Batcher(self._send)

    def add(self, run: Run, outcome: str, error: str | None) -> None:
        """Record ``run``'s attempt as ``outcome`` (written soon, in a batch)."""
        job = run.handle.job
        wall, mono = time.time(), time.monotonic()
        started = wall - (mono - run.started)
        finished = wall - (mono - run.finished) if run.finished else wall
        self._batch.add(
            (
                job.id,
                job.queue,
                job.attempts,
                self.worker_id,
                self.host,
                started,
                finished,
                outcome,
                error,
            )
        )

    async def _send(self, rows: list[Row]) -> None:
        try:
            op = engine_of(self.store).add_attempts(rows, self.keep)
            await self.db.call(op, "attempt history")
        except AlkstoreError as e:  # history is best-effort: the outcomes are written
            log.warning("attempt history of %d job(s) not written: %s", len(rows), e)

    async def drain(self) -> None:
        """Wait for the records added so far to be written (the worker's stop; each
        write is bounded by the worker's database waits)."""
        flushing = self._batch.flushing
        if flushing is not None:
            await flushing
