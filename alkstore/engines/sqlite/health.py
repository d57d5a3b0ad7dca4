"""The SQLite engine's side of ``alkstore doctor``: the facts of ``core.health``.

Read only, on the store's own thread: the schema version, claims past their
deadline, and the write-ahead log. The checkpoint lag is read from the
``-shm`` wal-index (header ``mxFrame``, the last frame written, against the
checkpoint's ``nBackfill``, the frames already copied into the database file;
https://sqlite.org/walformat.html), so looking does not checkpoint.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from typing import TYPE_CHECKING

from alkstore.engines.sqlite.connections import SqliteConnections
from alkstore.engines.sqlite.migrator import QUERIES as Q
from alkstore.engines.sqlite.migrator import SCHEMA_VERSION, installed_version

if TYPE_CHECKING:
    from alkstore.core.health import HealthFacts

__all__ = ["SqliteHealth", "checkpoint_lag"]

_FRAME_HEADER = 24


def checkpoint_lag(shm: bytes) -> int | None:
    """Bytes of WAL frames not yet checkpointed, from a wal-index's first 100 bytes
    (``None`` if it is not one)."""
    if len(shm) < 100:
        return None
    order = sys.byteorder  # the wal-index is in the machine's byte order

    def u32(at: int) -> int:
        return int.from_bytes(shm[at : at + 4], order)

    if not shm[12]:  # isInit: no writer has set it up yet
        return 0
    raw = int.from_bytes(shm[14:16], order)
    page = 65536 if raw == 1 else raw
    frames = max(u32(16) - u32(96), 0)  # mxFrame - nBackfill
    return frames * (page + _FRAME_HEADER)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _read_head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(100)
    except FileNotFoundError:
        return b""


class SqliteHealth(SqliteConnections):
    """The doctor's read of the engine seam (``Engine.health_facts``)."""

    async def health_facts(self) -> HealthFacts:
        # the doctor's types, imported when it asks: a worker's start need not build them
        from alkstore.core.health import HealthFacts, OverdueClaims

        def read(conn: sqlite3.Connection) -> HealthFacts:
            now = self._clock()
            overdue = conn.execute(Q["health_overdue"], {"now": now}).fetchall()
            head = _read_head(self.path + "-shm")
            return HealthFacts(
                engine="sqlite",
                schema_version=installed_version(conn),
                expected_version=SCHEMA_VERSION,
                overdue=tuple(OverdueClaims(q, int(n), max(float(s), 0.0)) for q, n, s in overdue),
                wal_bytes=_size(self.path + "-wal"),
                checkpoint_lag_bytes=checkpoint_lag(head) if head else 0,
            )

        return await self._call(self._read, read)
