"""Fan-out of engine notifications to ``store.listen()`` subscriptions.

An engine delivers batches of ``(channel, payload)`` notes to one sink per
store (``ListenerHub.deliver``) on the store's event loop; the hub reference
counts channels so the engine listens once per channel however many
subscriptions share it. An empty batch is a *gap* (the listener reconnected or
lagged): notes may have been lost, so wake-driven loops re-poll.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from alkstore.core.job import Notification

if TYPE_CHECKING:
    from alkstore.engine import Engine

__all__ = ["ListenerHub", "Subscription"]


class Subscription:
    """Notifications of some channels: ``async for note in sub``."""

    def __init__(
        self,
        hub: ListenerHub,
        channels: tuple[str, ...],
        *,
        wake_only: bool,
        on_note: Callable[[Notification], None] | None = None,
    ) -> None:
        self._hub = hub
        self._on_note = on_note  # handed each note as it is read (a worker's hand-offs)
        self.channels = channels
        self._wake_only = wake_only
        self._notes: deque[Notification] = deque()
        self._event = asyncio.Event()
        self._closed = False
        self._entered = False

    # -- fed by the hub ------------------------------------------------------
    def _push(self, note: Notification) -> None:
        if self._on_note is not None:
            self._on_note(note)
            return
        if not self._wake_only:
            self._notes.append(note)
        self._event.set()

    def _wake(self) -> None:
        self._event.set()

    def _close(self) -> None:
        self._closed = True
        self._event.set()

    async def _until_set(self, timeout: float) -> None:
        """Wait until set or ``timeout`` s, with no task of its own (``asyncio.wait_for``
        made one per wait): the wake resumes the waiting loop in one step."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._event.wait()

    # -- consumers -----------------------------------------------------------
    async def __aenter__(self) -> Subscription:
        if not self._entered:
            self._entered = True
            await self._hub.add(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop listening; idempotent."""
        if not self._closed:
            self._closed = True
            self._event.set()
            await self._hub.remove(self)

    @property
    def closed(self) -> bool:
        """Whether the subscription (or its store) was closed."""
        return self._closed

    async def wait(self, timeout: float | None) -> bool:
        """Wait for a note or a gap, up to ``timeout`` s; drop what was pending.

        Returns ``True`` when woken, ``False`` on timeout or close. Used by the
        wake-driven claim loop, which only needs to know *that* something happened.
        """
        if not self._event.is_set() and timeout is not None and timeout > 0:
            await self._until_set(timeout)
            if not self._event.is_set():
                return False
        woke = self._event.is_set() and not self._closed
        self._event.clear()
        self._notes.clear()
        return woke

    async def _wait_notes(self, timeout: float) -> list[str] | None:
        """The payloads that arrived, waiting up to ``timeout`` s for the first; ``[]`` on
        timeout or close, ``None`` after a gap (notes may have been lost: re-check)."""
        if not self._event.is_set() and timeout > 0:
            await self._until_set(timeout)
            if not self._event.is_set():
                return []
        if not self._event.is_set() or self._closed:
            return []
        self._event.clear()
        payloads = [note.payload for note in self._notes]
        self._notes.clear()
        return payloads or None

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Notification:
        while not self._notes:
            if self._closed:
                raise StopAsyncIteration
            self._event.clear()
            await self._event.wait()
        return self._notes.popleft()


class ListenerHub:
    """One per store: reference-counted channels, one engine sink."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._subs: dict[str, set[Subscription]] = {}
        self._lock = asyncio.Lock()

    async def add(self, sub: Subscription) -> None:
        async with self._lock:
            fresh = [ch for ch in dict.fromkeys(sub.channels) if not self._subs.get(ch)]
            if fresh and self._engine.listens:  # poll-only: wakes come from the re-poll only
                await self._engine.subscribe(fresh, self.deliver)
            for ch in sub.channels:
                self._subs.setdefault(ch, set()).add(sub)

    async def remove(self, sub: Subscription) -> None:
        async with self._lock:
            gone = []
            for ch in dict.fromkeys(sub.channels):
                subs = self._subs.get(ch)
                if subs is not None:
                    subs.discard(sub)
                    if not subs:
                        del self._subs[ch]
                        gone.append(ch)
            if gone and self._engine.listens:
                with contextlib.suppress(Exception):  # the store may be closing
                    await self._engine.unsubscribe(gone)

    def deliver(self, notes: Sequence[tuple[str, str]]) -> None:
        """The engine's sink: fan a batch out; an empty batch is a gap."""
        if not notes:
            for subs in self._subs.values():
                for sub in subs:
                    sub._wake()
            return
        for channel, payload in notes:
            targets = self._subs.get(channel)
            if targets:
                note = Notification(channel, payload)
                for sub in targets:
                    sub._push(note)

    def close(self) -> None:
        """End every subscription (the store is closing)."""
        for subs in self._subs.values():
            for sub in subs:
                sub._close()
        self._subs.clear()
