"""Group commit: the one batching primitive (``Batcher``) and the handle-ack group on it.

A worker running many handlers at once finishes jobs in bursts; acking each in
its own transaction costs one commit (a disk sync) per job. A :class:`Batcher`
sends the first item at once and gathers every item added while that send is
in flight into the next one, which starts as soon as the send returns: a lone
item goes out with no added delay, a burst shares one round trip.

Two users, one primitive: :class:`AckGroup` gathers concurrent
``JobHandle.ack`` calls of a store into one fenced ``ack_many`` (each ack keeps
its own fencing and its own answer), and the worker's completer
(``alkstore/worker/completer.py``) gathers its successes into one receipted ack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from alkstore.engine import Engine

__all__ = ["AckGroup", "Batcher"]

T = TypeVar("T")


class Batcher(Generic[T]):
    """Items added while a batch is being sent go out together in the next batch.

    ``send`` gets each batch (a list it may keep); one send runs at a time, in a
    task of its own. ``abandon`` gets the items still waiting when that task ends
    by an exception (a cancel): they were never sent. Without it they wait for the
    next :meth:`add`, which starts a new send."""

    __slots__ = ("_abandon", "_items", "_send", "flushing")

    def __init__(
        self,
        send: Callable[[list[T]], Awaitable[None]],
        abandon: Callable[[list[T]], None] | None = None,
    ) -> None:
        self._send = send
        self._abandon = abandon
        self._items: list[T] = []
        self.flushing: asyncio.Task[None] | None = None  # the send loop, while it runs

    def add(self, item: T) -> None:
        """Queue ``item`` for the next batch (sent at once when none is in flight)."""
        self._items.append(item)
        if self.flushing is None:
            self.flushing = asyncio.get_running_loop().create_task(self._run())

    def __len__(self) -> int:
        return len(self._items)

    async def _run(self) -> None:
        try:
            while self._items:
                items, self._items = self._items, []
                await self._send(items)
        finally:
            self.flushing = None
            if self._abandon is not None and self._items:
                left, self._items = self._items, []
                self._abandon(left)


class AckGroup:
    """One per store: the pending ``JobHandle.ack`` calls, sent as one ``ack_many``."""

    __slots__ = ("_batch", "_engine")

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._batch: Batcher[tuple[str, int, int, asyncio.Future[bool]]] = Batcher(self._send)

    async def ack(self, queue: str, job_id: int, attempts: int) -> bool:
        """Delete the fenced row, together with whatever else is being acked now."""
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._batch.add((queue, job_id, attempts, waiter))
        return await waiter

    async def _send(self, batch: list[tuple[str, int, int, asyncio.Future[bool]]]) -> None:
        try:
            acked = await self._engine.ack_many([(q, i, a) for q, i, a, _ in batch])
        except BaseException as e:
            for *_, waiter in batch:
                if not waiter.done():
                    waiter.set_exception(e)
            if isinstance(e, asyncio.CancelledError):
                raise
            return
        for _, job_id, attempts, waiter in batch:
            if not waiter.done():
                waiter.set_result((job_id, attempts) in acked)
