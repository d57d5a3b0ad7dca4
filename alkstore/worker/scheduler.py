"""The schedule service: enqueue the app's due cron ticks (every worker does; the
database keeps each tick once, ``alkstore/schedules.py``), then sleep until the
next tick of any schedule, ``poll_interval_s`` at most. It ends when the worker
stops; it touches no held claim and writes no outcome."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from alkstore.errors import AlkstoreError, StoreClosedError
from alkstore.worker.runs import StopFlag

if TYPE_CHECKING:
    from alkstore.schedules import Schedule, Tick
    from alkstore.store import Store
    from alkstore.worker.netwait import DbWaits

__all__ = ["schedule_loop"]

log = logging.getLogger("alkstore.worker")


def _tick(tick: Tick) -> tuple[str, str]:
    return tick.schedule, tick.at.isoformat()


async def schedule_loop(
    store: Store,
    schedules: list[Schedule],
    db: DbWaits,
    stop: StopFlag,
    pause: Callable[[float], Awaitable[None]],
    poll_interval_s: float,
) -> None:
    """Enqueue due ticks until the worker stops (``pause``: a sleep a stop cuts short)."""
    from alkstore.schedules import enqueue_due  # only a worker with schedules runs this

    while not stop.requested:
        try:
            for tick in await db.call(enqueue_due(store, schedules), "schedule"):
                if tick.enqueued is None:
                    log.info("schedule %r: tick %s skipped (still running)", *_tick(tick))
                elif not tick.enqueued.duplicate:
                    log.info("schedule %r: tick %s enqueued", *_tick(tick))
        except StoreClosedError:
            return
        except AlkstoreError as e:
            log.warning("scheduling failed: %s", e)
        now = time.time()
        upcoming = min(s.next_after(now).timestamp() for s in schedules)
        await pause(min(max(upcoming - time.time(), 0.001), poll_interval_s))
