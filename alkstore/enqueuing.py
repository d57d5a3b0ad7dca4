"""Enqueue, shared by ``Queue`` and its transaction twin ``TxQueue``, and the checks of the
queue API's arguments (options, job ids, payload lists, dedupe keys).

Each enqueuing handle names its writer (the engine, or an open transaction);
the outbox write (``enqueue_on``: inside the caller's own transaction) is
an :class:`OutboxWrite` (prepared by ``alkstore.queue.prepare_outbox``), run by
the async ``Queue`` and by its blocking twin in ``alkstore.sync``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from alkstore.core.dedupe import Enqueued, check_dedupe_key
from alkstore.core.deps import GraphNode, check_policy
from alkstore.core.options import EnqueueOpts, QueueOpts, Stamps, describe, resolve
from alkstore.core.payload import check_size, encode_payload
from alkstore.engine import Engine, EngineTransaction, SupportsOutbox
from alkstore.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_QUEUE_OPTS",
    "JOB_ID_MAX",
    "Enqueuing",
    "OutboxWrite",
    "check_job_id",
    "check_opts",
    "dedupe_keys_for",
    "encode_many",
    "list_of",
    "window_of",
]

DEFAULT_QUEUE_OPTS = QueueOpts()
# ids live in a signed 64-bit column on every engine
_JOB_ID_MIN, JOB_ID_MAX = -(2**63), 2**63 - 1


def check_opts(opts: QueueOpts | None) -> QueueOpts:
    if opts is None:
        return DEFAULT_QUEUE_OPTS
    if not isinstance(opts, QueueOpts):
        raise InvalidArgumentError(f"opts must be a QueueOpts, got {describe(opts)}")
    return opts


def check_job_id(job_id: object) -> int:
    # an int, or an int subclass such as a task's Deferred call (never a bool)
    if (
        not isinstance(job_id, int)
        or isinstance(job_id, bool)
        or not _JOB_ID_MIN <= job_id <= JOB_ID_MAX
    ):
        raise InvalidArgumentError(f"job id must be a 64-bit int, got {describe(job_id)}")
    return int(job_id)


def list_of(what: str, values: object) -> list[Any]:
    """``values`` as a list, if it is an iterable other than text or a mapping."""
    if not isinstance(values, str | bytes | bytearray | memoryview | dict):
        try:
            return list(values)  # type: ignore[call-overload,no-any-return]  # TypeError if not iterable
        except TypeError:
            pass
    raise InvalidArgumentError(f"{what} takes a list, got {describe(values)}")


def encode_many(payloads: Iterable[object], limit: int | None) -> list[bytes]:
    """Each payload encoded, and checked against the store's size limit (before any write)."""
    data = [p if type(p) is bytes else encode_payload(p) for p in list_of("enqueue_many", payloads)]
    if limit is not None:
        for item in data:
            check_size("payload", len(item), limit)
    return data


def dedupe_keys_for(
    count: int, opts: EnqueueOpts | None, dedupe_keys: Iterable[str | None] | None
) -> list[str | None] | None:
    """One key (or None) per item, or ``None`` when no item has a key (the plain insert)."""
    if dedupe_keys is None:
        key = _key_of(opts)
        return None if key is None else [key] * count
    if isinstance(dedupe_keys, str | bytes):
        raise InvalidArgumentError(f"dedupe_keys must be a list, got {dedupe_keys!r}")
    keys = list(dedupe_keys)
    if len(keys) != count:
        raise InvalidArgumentError(
            f"dedupe_keys has {len(keys)} item(s) for {count} payload(s); give one per payload"
        )
    for key in keys:
        if key is not None:
            check_dedupe_key("dedupe_keys item", key)
    if _key_of(opts) is not None:
        raise InvalidArgumentError("give dedupe_keys or opts.dedupe_key, not both")
    return keys if any(key is not None for key in keys) else None


def _key_of(opts: object) -> str | None:
    """``opts.dedupe_key`` (None for anything but an EnqueueOpts: resolve rejects it)."""
    return opts.dedupe_key if isinstance(opts, EnqueueOpts) else None


def debounce_of(opts: object) -> str | None:
    """``opts.debounce_key`` (None for anything but an EnqueueOpts)."""
    return opts.debounce_key if isinstance(opts, EnqueueOpts) else None


def window_of(opts: EnqueueOpts | None) -> float | None:
    return opts.dedupe_window_s if isinstance(opts, EnqueueOpts) else None


class Enqueuing:
    """``enqueue`` and ``enqueue_many``, shared by Queue and TxQueue: each names its writer."""

    __slots__ = ("_stamps", "name", "opts")

    def __init__(self, name: str, opts: QueueOpts) -> None:
        self.name = name
        self.opts = opts
        self._stamps = resolve(opts, None)

    def _writer(self) -> Engine | EngineTransaction:
        raise NotImplementedError

    def _limit(self) -> int | None:
        raise NotImplementedError

    def _resolve(self, opts: EnqueueOpts | None) -> Stamps:
        return self._stamps if opts is None else resolve(self.opts, opts)

    async def enqueue(self, payload: object, opts: EnqueueOpts | None = None) -> int:
        """Write one job and wake the queue's consumers (on commit); returns its id.

        With ``opts.dedupe_key`` a duplicate writes nothing and returns the existing
        job's id (:meth:`enqueue_unique` also says whether it was one); with
        ``opts.debounce_key`` a pending job of the key gets this payload instead
        and its id is returned.
        """
        if debounce_of(opts) is not None:
            return (await self._debounced(payload, opts)).id
        if _key_of(opts) is not None:
            return (await self.enqueue_unique(payload, opts)).id
        if isinstance(opts, EnqueueOpts) and opts.after is not None:
            return (await self._after((payload,), opts))[0]
        writer = self._writer()
        stamps = self._resolve(opts)
        data = payload if type(payload) is bytes else encode_payload(payload)
        check_size("payload", len(data), self._limit())
        ids = await writer.enqueue(self.name, (data,), stamps)
        return ids[0]

    async def enqueue_unique(self, payload: object, opts: EnqueueOpts | None = None) -> Enqueued:
        """:meth:`enqueue`, answering ``Enqueued(id, duplicate)``.

        >>> got = await q.enqueue_unique({"order": 42}, EnqueueOpts(dedupe_key="order-42"))
        >>> got.duplicate      # True if a live job (or the window) already held the key

        With ``opts.debounce_key``, ``duplicate`` says a pending job's payload was replaced.
        """
        if debounce_of(opts) is not None:
            return await self._debounced(payload, opts)
        return (await self.enqueue_many_unique((payload,), opts))[0]

    async def _debounced(self, payload: object, opts: EnqueueOpts | None) -> Enqueued:
        assert opts is not None and opts.debounce_key is not None
        writer = self._writer()
        if not hasattr(writer, "enqueue_debounced"):
            raise InvalidArgumentError(
                "debounce_key cannot be used inside store.transaction(): enqueue it outside"
            )
        stamps = self._resolve(opts)
        if opts.debounce_s is not None:
            stamps = stamps._replace(delay_s=float(opts.debounce_s), run_at=None)
        data = payload if type(payload) is bytes else encode_payload(payload)
        check_size("payload", len(data), self._limit())
        push = opts.debounce_s is not None
        return await writer.enqueue_debounced(self.name, data, opts.debounce_key, push, stamps)

    async def enqueue_many(
        self,
        payloads: Iterable[object],
        opts: EnqueueOpts | None = None,
        *,
        dedupe_keys: Iterable[str | None] | None = None,
    ) -> list[int]:
        """Write many jobs in one transaction and one round trip, with one wake.

        ``dedupe_keys`` gives each item its own key (None: none); each item is
        deduplicated on its own (``opts.dedupe_key`` applies one key to every item).
        """
        if dedupe_keys is not None or _key_of(opts) is not None or debounce_of(opts):
            got = await self.enqueue_many_unique(payloads, opts, dedupe_keys=dedupe_keys)
            return [item.id for item in got]
        if isinstance(opts, EnqueueOpts) and opts.after is not None:
            return await self._after(payloads, opts)
        writer = self._writer()
        stamps = self._resolve(opts)
        data = encode_many(payloads, self._limit())
        if not data:
            return []
        return await writer.enqueue(self.name, data, stamps)

    def _nodes(self, payloads: Iterable[object], opts: EnqueueOpts) -> list[GraphNode]:
        """One graph node per payload, each waiting for ``opts.after``."""
        stamps = self._resolve(opts)
        policy = check_policy(opts.after_policy)
        return [
            GraphNode(self.name, data, stamps, opts.after or (), (), policy)
            for data in encode_many(payloads, self._limit())
        ]

    async def _after(self, payloads: Iterable[object], opts: EnqueueOpts) -> list[int]:
        """Jobs that wait for ``opts.after`` (docs/contract.md, "Dependencies")."""
        nodes = self._nodes(payloads, opts)
        if not nodes:
            return []
        return await self._writer().enqueue_graph(nodes)

    async def enqueue_many_unique(
        self,
        payloads: Iterable[object],
        opts: EnqueueOpts | None = None,
        *,
        dedupe_keys: Iterable[str | None] | None = None,
    ) -> list[Enqueued]:
        """:meth:`enqueue_many`, answering ``Enqueued(id, duplicate)`` per item."""
        if debounce_of(opts) is not None:
            raise InvalidArgumentError(
                f"debounce_key {debounce_of(opts)!r} keeps one pending job: enqueue it with "
                "enqueue(), not in a batch"
            )
        if isinstance(opts, EnqueueOpts) and opts.after is not None and dedupe_keys is None:
            return [Enqueued(i, False) for i in await self._after(payloads, opts)]
        writer = self._writer()
        stamps = self._resolve(opts)
        data = encode_many(payloads, self._limit())
        keys = dedupe_keys_for(len(data), opts, dedupe_keys)
        if not data:
            return []
        if keys is None:
            return [Enqueued(i, False) for i in await writer.enqueue(self.name, data, stamps)]
        return await writer.enqueue_keyed(self.name, data, keys, window_of(opts), stamps)


@dataclass(frozen=True, slots=True)
class OutboxWrite:
    """An outbox insert, checked and encoded (nothing written yet): run it on the
    caller's connection with :meth:`run` (async) or :meth:`run_sync` (blocking)."""

    engine: SupportsOutbox
    queue: str
    data: list[bytes]
    stamps: Stamps
    keys: list[str | None] | None  # one per item, or None: the plain insert
    window: float | None

    async def run(self, conn: Any) -> list[Enqueued]:
        """Insert inside the transaction ``conn`` (an async connection) holds."""
        if not self.data:
            return []
        if self.keys is None:
            ids = await self.engine.enqueue_on(conn, self.queue, self.data, self.stamps)
            return [Enqueued(i, False) for i in ids]
        return await self.engine.enqueue_keyed_on(
            conn, self.queue, self.data, self.keys, self.window, self.stamps
        )

    def run_sync(self, conn: Any) -> list[Enqueued]:
        """Insert inside the transaction ``conn`` (a blocking connection) holds, in this thread."""
        if not self.data:
            return []
        if self.keys is None:
            ids = self.engine.enqueue_on_sync(conn, self.queue, self.data, self.stamps)
            return [Enqueued(i, False) for i in ids]
        return self.engine.enqueue_keyed_on_sync(
            conn, self.queue, self.data, self.keys, self.window, self.stamps
        )
