"""A store transaction and its queue handle: enqueues and the caller's SQL commit or
roll back together.

While a :class:`Transaction` is open, the current task's enqueues through any
queue handle of the same store join it (``alkstore.queue.Queue`` asks
:func:`joined_transaction`); :class:`TxQueue` is the handle bound to it explicitly.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from alkstore.core.job import Row
from alkstore.core.names import check_name, is_storable_text
from alkstore.core.options import QueueOpts, describe
from alkstore.core.payload import encode_notify_payload
from alkstore.engine import EngineTransaction
from alkstore.engine_door import StoreDoor, engine_of
from alkstore.enqueuing import Enqueuing, check_opts
from alkstore.errors import InvalidArgumentError, StoreClosedError

__all__ = ["Transaction", "TxQueue", "joined_transaction"]

# The store transaction the current task is inside: an enqueue through any queue
# handle of that store joins it (the same atomicity on every engine).
_open_transaction: contextvars.ContextVar[Transaction | None] = contextvars.ContextVar(
    "alkstore_open_transaction", default=None
)


def joined_transaction(store: StoreDoor) -> EngineTransaction | None:
    """The open transaction of ``store`` the current task is inside, if any: an enqueue
    through any of the store's queue handles writes in it."""
    tx = _open_transaction.get()
    if tx is not None and tx._store is store and tx._tx is not None and not tx._done:
        return tx._tx
    return None


class Transaction:
    """A store transaction: enqueues and the caller's SQL commit or roll back together."""

    def __init__(self, store: StoreDoor) -> None:
        self._store = store
        self._tx: EngineTransaction | None = None
        self._done = False
        self._token: contextvars.Token[Transaction | None] | None = None

    def _open(self) -> EngineTransaction:
        engine_of(self._store)
        if self._tx is None or self._done:
            raise StoreClosedError("the transaction is not open (use it inside `async with`)")
        return self._tx

    async def __aenter__(self) -> Transaction:
        engine = engine_of(self._store)
        if self._tx is not None:
            raise InvalidArgumentError("a Transaction can be entered only once")
        self._tx = await engine.begin()
        self._token = _open_transaction.set(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tx = self._tx
        if tx is None or self._done:
            return
        self._done = True
        try:
            if exc_type is None and not self._store._closed:
                await tx.commit()
            else:
                await tx.rollback()
        finally:
            if self._token is not None:
                # the sync facade enters and exits in two tasks: the token's context is gone
                with contextlib.suppress(ValueError):
                    _open_transaction.reset(self._token)

    def queue(self, name: str, opts: QueueOpts | None = None) -> TxQueue:
        """A handle whose enqueues write inside this transaction."""
        engine_of(self._store)
        return TxQueue(self, check_name(name), check_opts(opts))

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> list[Row]:
        """Run your own SQL in this transaction (the engine's parameter style)."""
        tx = self._open()
        if type(sql) is not str or not sql.strip() or not is_storable_text(sql):
            raise InvalidArgumentError(f"sql must be a non-empty str, got {describe(sql)}")
        return await tx.execute(sql, params)

    async def notify(self, channel: str, payload: str = "") -> None:
        """Notify ``channel`` when (and only if) the transaction commits."""
        tx = self._open()
        check_name(channel, "channel")
        await tx.notify(channel, encode_notify_payload(payload))


class TxQueue(Enqueuing):
    """A queue handle bound to a transaction: enqueues are invisible until commit,
    and their wake is sent only on commit."""

    __slots__ = ("_tx",)

    def __init__(self, tx: Transaction, name: str, opts: QueueOpts) -> None:
        super().__init__(name, opts)
        self._tx = tx

    def _limit(self) -> int | None:
        return self._tx._store.max_payload_bytes

    def _writer(self) -> EngineTransaction:
        return self._tx._open()
