"""A worker's presence: its registry row, its outcome counts and its queue gauges.

Every ``interval_s`` the worker refreshes its row in the workers table
(``alkstore workers`` and the dashboard list it), adds the outcomes counted
since the last beat to the per-minute history (the dashboard's throughput
chart), deletes rows of workers not seen for ``purge_after_s`` and, with
metrics on, refreshes the queue-depth gauges. On a graceful stop the row is
deleted. A failed beat is logged and retried at the next one: presence never
stops the worker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from alkstore.bookkeeping import OUTCOMES_KEPT_S, Bookkeeping
from alkstore.errors import AlkstoreError, StoreClosedError

if TYPE_CHECKING:
    from alkstore.metrics import Metrics
    from alkstore.store import Store

__all__ = ["PURGE_AFTER_S", "Presence"]

log = logging.getLogger("alkstore.worker")

PURGE_AFTER_S = 3600.0  # a worker unseen for an hour is deleted from the registry


class Presence:
    """The registry heartbeat of one worker."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        queues: list[str],
        concurrency: int,
        *,
        running: Callable[[], int],
        interval_s: float,
        metrics: Metrics | None,
        history_retention_s: float = OUTCOMES_KEPT_S,
    ) -> None:
        self.store = store
        self.history_retention_s = history_retention_s
        self.worker_id = worker_id
        self.queues = queues
        self.concurrency = concurrency
        self.interval_s = interval_s
        self.metrics = metrics
        self.running = running
        self.pending: Counter[tuple[str, str]] = Counter()
        self.host = socket.gethostname()
        self.pid = os.getpid()

    def count(self, queue: str, outcome: str, n: int = 1) -> None:
        """Count ``n`` finished runs (written at the next beat)."""
        self.pending[(queue, outcome)] += n

    async def beat(self) -> None:
        """Refresh the row, flush the counts, purge long-gone workers, refresh gauges."""
        books = Bookkeeping(self.store)
        await books.report_worker(
            self.worker_id, self.host, self.pid, self.queues, self.concurrency, self.running()
        )
        counts, self.pending = self.pending, Counter()
        try:
            await books.record_outcomes(
                ((q, o, n) for (q, o), n in counts.items()), self.history_retention_s
            )
        except BaseException:
            self.pending.update(counts)  # written at the next beat
            raise
        await books.purge_workers(PURGE_AFTER_S)
        if self.metrics is not None:
            self.metrics.set_queue_stats(await self.store.admin().stats())

    async def run(self) -> None:
        """Beat every ``interval_s`` until cancelled."""
        while True:
            try:
                await self.beat()
            except StoreClosedError:
                return
            except AlkstoreError as e:
                log.warning("worker %s: presence heartbeat failed: %s", self.worker_id, e)
            await asyncio.sleep(self.interval_s)

    async def leave(self) -> None:
        """The final flush and the row's removal (a graceful stop)."""
        books = Bookkeeping(self.store)
        try:
            counts, self.pending = self.pending, Counter()
            await books.record_outcomes(
                ((q, o, n) for (q, o), n in counts.items()), self.history_retention_s
            )
            await books.remove_worker(self.worker_id)
        except AlkstoreError as e:
            log.warning("worker %s: could not unregister: %s", self.worker_id, e)
