"""The private event loop of a blocking store: one daemon thread per ``sync.connect()``.

Every blocking call of ``alkstore.sync`` is one hop to this loop
(:meth:`Runner.run`); a store inherited across ``fork()`` refuses.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import weakref
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from alkstore.errors import StoreClosedError

__all__ = ["Runner"]

T = TypeVar("T")

_runners: weakref.WeakSet[Runner] = weakref.WeakSet()


def _mark_forked() -> None:
    for runner in list(_runners):
        runner.forked = True


os.register_at_fork(after_in_child=_mark_forked)


async def _next(agen: AsyncIterator[T]) -> T:
    return await agen.__anext__()


class Runner:
    """A private event loop on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.closed = False
        self.forked = False
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="alkstore-sync", daemon=True
        )
        self._thread.start()
        # per calling thread: the context of its open transaction, so that the
        # async core's "inside my own transaction" guard sees it (tasks of one
        # thread's later calls run in a copy of that context)
        self.local = threading.local()
        _runners.add(self)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.closed or self.forked:
            coro.close()
            if self.forked:
                raise StoreClosedError(
                    "this store was opened in a parent process and inherited across fork(); "
                    "call alkstore.sync.connect() again in the child"
                )
            raise StoreClosedError("store is closed")
        context: contextvars.Context | None = getattr(self.local, "context", None)
        if context is None:
            return asyncio.run_coroutine_threadsafe(coro, self.loop).result()
        return context.run(asyncio.run_coroutine_threadsafe, coro, self.loop).result()

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self.run(_next(agen))
                except StopAsyncIteration:
                    return
        finally:
            if not self.closed and not self.forked:
                aclose = getattr(agen, "aclose", None)
                if aclose is not None:
                    self.run(aclose())

    def stop(self) -> None:
        self.closed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()
