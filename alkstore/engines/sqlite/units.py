"""The SQLite engine's write units and their way back to the callers.

A write unit is ``fn(conn, *args)`` queued for the engine thread's next group
commit (``connections.py``). Its caller awaits an asyncio future of its own
loop; the engine thread settles a whole group with one
``call_soon_threadsafe`` per loop once the group's ``COMMIT`` is done (or has
failed). That is one wake of the loop and no ``concurrent.futures`` chain: on
an idle store that chain (``asyncio.wrap_future``: a lock, a notify, two
callbacks copying the state across) cost ~35 µs of a ``defer()``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

__all__ = ["Unit", "hand_back", "settle"]


class Unit:
    """A write unit waiting for a group: ``fn(conn, *args)`` and its caller's future
    (an asyncio future of the caller's loop, settled there once the group is done)."""

    __slots__ = ("args", "error", "fn", "future", "loop", "quick", "result")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], quick: bool) -> None:
        self.fn, self.args, self.quick = fn, args, quick  # quick: no fsync of its own
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = self.loop.create_future()
        self.result: Any = None
        self.error: BaseException | None = None


def settle(units: list[Unit]) -> None:
    """On the callers' loop: each unit's outcome to its caller (unless it was cancelled)."""
    for unit in units:
        if not unit.future.done():
            if unit.error is not None:
                unit.future.set_exception(unit.error)
            else:
                unit.future.set_result(unit.result)


def hand_back(units: list[Unit]) -> None:
    """On the engine thread: settle ``units`` on their loops, one wake of each loop
    (an event loop closed meanwhile has no caller left to tell)."""
    loops: dict[asyncio.AbstractEventLoop, list[Unit]] = {}
    for unit in units:
        loops.setdefault(unit.loop, []).append(unit)
    for loop, theirs in loops.items():
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, theirs)
