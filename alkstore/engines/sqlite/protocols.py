"""What a ``store.transaction()`` on SQLite stands on, as a protocol.

``transaction.py`` is typed against :class:`TransactionHost`, never against the
engine (which builds the transactions): the engine satisfies it through
``SqliteConnections``, so the import graph runs one way.
"""

from __future__ import annotations

import contextvars
import sqlite3
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

__all__ = ["TransactionHost", "TransactionToken"]

T = TypeVar("T")

# What begin_transaction() set in the task's context (the deadlock guard), to reset.
TransactionToken = contextvars.Token[object | None]


class TransactionHost(Protocol):
    """The engine as its transaction needs it: the write transaction held open,
    the clock, and wake notes written inside it."""

    def now(self) -> float:
        """The engine's clock, POSIX seconds."""

    def write_note(self, conn: sqlite3.Connection, channel: str, payload: str) -> None:
        """Inside a write: a note on ``channel``, delivered once it commits."""

    async def run_in_transaction(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` on the engine thread, inside the open transaction."""

    async def end_transaction(self, statement: str, token: TransactionToken) -> None:
        """``COMMIT`` or ``ROLLBACK`` the open transaction and let other tasks in."""
