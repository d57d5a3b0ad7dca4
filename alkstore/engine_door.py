"""The one door to storage: ``engine_of(store)``, the engine of an open store.

A leaf of the store layer: the store's queues, handles and transactions use
it, and so do the layers built on the store (``admin``, ``copy``, the result
waiters). It knows the store only through :class:`StoreDoor`, the few private
fields the door reads, so nothing here imports the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from alkstore.core.options import describe
from alkstore.errors import StoreClosedError

if TYPE_CHECKING:
    from alkstore.engine import Engine

__all__ = ["StoreDoor", "engine_of"]


class StoreDoor(Protocol):
    """What the door reads of a store (``alkstore.store.Store`` has it)."""

    url: str
    max_payload_bytes: int | None
    _engine: Engine
    _closed: bool
    _forked: bool


def engine_of(store: StoreDoor) -> Engine:
    """The engine of ``store`` while it is open, else ``StoreClosedError``.

    The one door to storage: the store's own queues, handles and transactions
    use it, and so do the layers built on the store (``admin``, ``copy``, the
    result waiters). A function, not a method: the engine is not part of the
    store's public surface.
    """
    if store._closed or store._forked:
        if store._forked:
            raise StoreClosedError(
                "this store was opened in a parent process and inherited across fork(); "
                "call alkstore.connect() again in the child"
            )
        raise StoreClosedError(f"store {describe(store.url)} is closed")
    return store._engine
