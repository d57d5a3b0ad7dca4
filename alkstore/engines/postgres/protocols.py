"""What a ``store.transaction()`` on PostgreSQL stands on, as a protocol.

``transaction.py`` is typed against :class:`TransactionHost`, never against the
engine (which builds the transactions): the engine satisfies it through
``PostgresConnections``, so the import graph runs one way.
"""

from __future__ import annotations

from typing import Any, Protocol

import psycopg

__all__ = ["TransactionHost"]


class TransactionHost(Protocol):
    """The engine as its transaction needs it: the schema's queries, the clock,
    the one translation of driver errors, and the wake after commit."""

    q: dict[str, bytes]  # the named queries, formatted for the schema

    def timed(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with the test clock's "now", if one is set."""

    def check_open(self) -> object:
        """Raise :class:`~alkstore.errors.StoreClosedError` once the store is closed."""

    async def failure(self, error: psycopg.Error, what: str) -> Exception:
        """The error to raise for a driver error in ``what``."""

    def send_wake(self, queue: str) -> None:
        """Wake ``queue``'s consumers (call only after the commit)."""
