"""The sweep service: every ``interval_s`` (and at start, once the worker's first
claim round is over: ``Producer.after_first_round``) ``sweep_expired()`` on
each of the worker's queues (expired jobs dead-lettered, old dead jobs purged
under the queue's retention). A failure is logged and the next queue swept; it
touches no held claim and writes no outcome."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from alkstore.errors import AlkstoreError, StoreClosedError

if TYPE_CHECKING:
    from alkstore.queue import Queue
    from alkstore.worker.netwait import DbWaits

__all__ = ["sweep_loop"]

log = logging.getLogger("alkstore.worker")


async def sweep_loop(queues: list[Queue], db: DbWaits, interval_s: float) -> None:
    """Sweep the queues every ``interval_s`` until cancelled (or the store closes)."""
    while True:
        for queue in queues:
            try:
                result = await db.call(queue.sweep_expired(), "sweep")
            except StoreClosedError:
                return
            except AlkstoreError as e:
                log.warning("sweep of queue %s failed: %s", queue.name, e)
                continue
            if result.expired or result.purged:
                log.info(
                    "sweep queue=%s expired=%d purged=%d",
                    queue.name,
                    result.expired,
                    result.purged,
                )
        await asyncio.sleep(interval_s)
