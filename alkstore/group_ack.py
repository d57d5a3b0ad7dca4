"""Group commit for ``JobHandle.ack``: concurrent acks share one engine call.

A worker running many handlers at once finishes jobs in bursts; acking each in
its own transaction costs one commit (a disk sync) per job. Here the first
ack starts a flush that sends everything pending in one fenced ``ack_many``;
acks that arrive while it is in flight wait for the next flush, which starts as
soon as that one returns. A lone ack still goes out at once (no added delay),
and every ack keeps its own fencing and its own answer.
"""

from __future__ import annotations

import asyncio

from alkstore.engine import Engine

__all__ = ["AckGroup"]


class AckGroup:
    """One per store: pending acks and the flush that is sending them."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._items: list[tuple[str, int, int]] = []
        self._waiters: list[asyncio.Future[bool]] = []
        self._flush: asyncio.Task[None] | None = None

    async def ack(self, queue: str, job_id: int, attempts: int) -> bool:
        """Delete the fenced row, together with whatever else is being acked now."""
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._items.append((queue, job_id, attempts))
        self._waiters.append(waiter)
        if self._flush is None:
            self._flush = asyncio.create_task(self._send())
        return await waiter

    async def _send(self) -> None:
        try:
            while self._items:
                items, waiters = self._items, self._waiters
                self._items, self._waiters = [], []
                try:
                    acked = await self._engine.ack_many(items)
                except BaseException as e:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_exception(e)
                    if isinstance(e, asyncio.CancelledError):
                        raise
                    continue
                for (_, job_id, attempts), waiter in zip(items, waiters, strict=True):
                    if not waiter.done():
                        waiter.set_result((job_id, attempts) in acked)
        finally:
            self._flush = None
