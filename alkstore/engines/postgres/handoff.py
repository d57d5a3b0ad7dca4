"""The PostgreSQL engine's enqueue and its hand-offs to idle workers.

An enqueue of one immediately due job with no key into a queue no settings row
gates is ``insert_handoff``: when a worker of the queue is idle, the job is
inserted already claimed by it and the worker is notified with the row, so the
worker starts its handler on the note alone (no claim round trip after the
producer's commit). A worker is idle while its listening connection holds a
session advisory lock (``handoff_key``): the store's listener takes and drops
it as the worker says (``handoff_idle``), and re-takes, every ``ROTATE_S``, the
keys of the seconds around this one (its clock against the server's, read at
``handoff_open``), so the lock of a frozen process goes stale within about two
seconds and one of a dead connection goes with the session.
No row is written while jobs flow (docs/postgres.md "Hand-offs").
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import math
import secrets
import time
import zlib
from collections.abc import Sequence

import psycopg

from alkstore.core.job import Row
from alkstore.core.options import Stamps
from alkstore.engines.postgres.connections import PostgresConnections
from alkstore.engines.postgres.inserts import insert_params, insert_query, returned_ids
from alkstore.engines.postgres.settings import PgSettings

__all__ = ["ROTATE_S", "PostgresHandoff", "handoff_key"]

log = logging.getLogger("alkstore.postgres")

ROTATE_S = 0.5  # an idle worker's lock keys move on this often (each names a second)
_SLOT_SPAN = 8388608  # slots wrap here: (slot mod span) * 256 + second mod 256 fits int4
_GONE_S = 3600.0  # a hand-off row whose worker was not seen this long is purged


def handoff_key(slot: int, second: int) -> int:
    """The advisory lock key of ``slot`` in the server's ``second`` (``insert_handoff``)."""
    return (slot % _SLOT_SPAN) * 256 + second % 256


def lock_class(schema: str) -> int:
    """The advisory locks' first key for ``schema``: its CRC-32 as a signed int4
    (stores in other schemas of the same database take other locks)."""
    return zlib.crc32(schema.encode()) - 2**31


class PostgresHandoff(PostgresConnections):
    """``enqueue`` and the ``SupportsHandoff`` capability of the seam."""

    def __init__(self, settings: PgSettings, schema: str) -> None:
        super().__init__(settings, schema)
        self._lock_class = lock_class(schema)
        self._handing = settings.handoff  # False after a producer role was refused
        self._idle: set[int] = set()  # slots whose workers are idle
        self._skew_s = 0.0  # the server's clock less this host's, read at handoff_open
        self._rotation: asyncio.Task[None] | None = None

    # -- enqueue ------------------------------------------------------------------------
    async def enqueue(self, queue: str, payloads: Sequence[bytes], stamps: Stamps) -> list[int]:
        pool = self.check_open()
        mode = self.settings.wake
        # idle waker: the wake rides on the insert, delivered at its commit
        lead = mode == "coalesce" and self.lead_wake()
        params = self.timed(insert_params(queue, payloads, stamps, wake=lead))
        handing = (
            self._handing
            and len(payloads) == 1
            and stamps.partition_key is None
            and stamps.run_at is None
            and stamps.delay_s <= 0
        )
        if handing:
            params["payload"] = params.pop("payloads")[0]
            params["lock_class"] = self._lock_class
        handed = False
        try:
            async with pool.connection() as conn:
                if handing:
                    try:
                        cur = await conn.execute(self.q["insert_handoff"], params)
                    except psycopg.errors.InsufficientPrivilege as e:
                        # a producer role without SELECT on alk_queues/alk_handoff:
                        # plain inserts from now on (docs/postgres.md "Roles")
                        log.info("alkstore: enqueues hand nothing off (%s)", e)
                        self._handing = False
                        return await self.enqueue(queue, payloads, stamps)
                    row = await cur.fetchone()
                    assert row is not None
                    ids, handed = [int(row[0])], bool(row[1])
                else:
                    cur = await conn.execute(self.q[insert_query(stamps)], params)
                    ids = returned_ids(await cur.fetchall())
                if mode == "on" and not handed:  # the naive baseline: one awaited wake
                    try:
                        await conn.execute(self.q["notify"], {"channel": queue, "payload": ""})
                    except psycopg.Error as e:
                        log.warning("alkstore: wake of %r not sent: %s", queue, e)
        except psycopg.Error as e:
            raise await self.failure(e, "enqueue") from e
        if mode == "coalesce" and not lead and not handed:
            self.send_wake(queue)
        return ids

    # -- the worker's side --------------------------------------------------------------
    async def handoff_open(self, worker_id: str, queues: Sequence[str]) -> tuple[int, str] | None:
        if not (self.settings.listen and self.settings.handoff):
            return None
        channel = "alk_h_" + secrets.token_hex(8)
        params = {
            "worker": worker_id,
            "queues": list(queues),
            "channel": channel,
            "older_than": _GONE_S,
        }
        sent = time.time()
        try:
            row = await self._fetchone("handoff_open", params)
        except psycopg.errors.InsufficientPrivilege:
            return None  # granted before migration 0012: no hand-offs for this worker
        assert row is not None
        self._skew_s = float(row[1]) - (sent + time.time()) / 2
        return int(row[0]), channel

    def handoff_idle(self, slot: int, idle: bool) -> None:
        if idle:
            self._idle.add(slot)
        else:
            self._idle.discard(slot)
        self._hold(slot)
        if self._idle and (self._rotation is None or self._rotation.done()):
            loop = asyncio.get_running_loop()
            self._rotation = loop.create_task(self._rotate(), name="alkstore-pg-idle")

    async def handoff_close(self, slot: int) -> None:
        # unlocked before the row goes: an enqueue that still sees the row then
        # finds the worker busy (one that tried the lock before still hands off:
        # the stopping worker gives that job back when its note arrives)
        self._idle.discard(slot)
        if self._listener is not None:
            await self._listener.let_go(slot)
        await self._rowcount_unflushed("handoff_close", {"slot": slot})

    def handoff_row(self, payload: str) -> Row | int:
        fields = json.loads(payload)
        if len(fields) == 1:
            return int(fields[0])
        fields[2] = base64.b64decode(fields[2])
        return (*fields, None, None, None, None)

    async def handed_row(self, job_id: int, worker_id: str) -> Row | None:
        return await self._fetchone("handed_row", {"id": job_id, "worker": worker_id})

    def _hold(self, slot: int) -> None:
        """Have the listener hold ``slot``'s keys of the server's last, current and
        next second (idle), or none."""
        listener = self._listener
        if listener is None:
            return
        keys: list[tuple[int, int]] = []
        if slot in self._idle and not self._closed:
            second = math.floor(time.time() + self._skew_s)
            # the second before too: a skew estimate a little ahead still matches
            keys = [(self._lock_class, handoff_key(slot, second + d)) for d in (-1, 0, 1)]
        listener.hold(slot, keys)

    async def _rotate(self) -> None:
        """While a worker is idle: move its keys on (a frozen process stops doing so)."""
        while self._idle and not self._closed:
            await asyncio.sleep(ROTATE_S)
            for slot in list(self._idle):
                self._hold(slot)

    async def close(self) -> None:
        rotation, self._rotation = self._rotation, None
        if rotation is not None:
            rotation.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await rotation
        await super().close()
