"""Giving freed pages back to the file system: the sweep's bounded incremental vacuum.

Every ack deletes a row and SQLite puts the freed pages on its freelist, where
the next inserts reuse them: under steady churn the file holds still, but after
a backlog drains it keeps the backlog's size. Since migration 0013 the file is
in ``auto_vacuum=INCREMENTAL`` mode, and each sweep (``engine.sweep``, the
worker's sweep loop and ``alkstore sweep``) cuts free pages off the file's end
here: in write units of at most :data:`RELEASE_PAGES` pages (a few tens of
milliseconds of write lock each, group-committed with whatever waits, so no
claim waits behind a long one), keeping :data:`RESERVE_PAGES` free for the
next inserts, at most :data:`MAX_UNITS` units per sweep (the rest at the next),
then a passive checkpoint, which truncates the main file (WAL mode) unless a
reader still needs older frames.
"""

from __future__ import annotations

import sqlite3

from alkstore.engines.sqlite.connections import SqliteConnections
from alkstore.engines.sqlite.migrator import QUERIES as Q

__all__ = ["MAX_UNITS", "RELEASE_PAGES", "RESERVE_PAGES", "SqliteSpace"]

RELEASE_PAGES = 128  # per write unit: ~0.2 ms a page measured with a large freelist
RESERVE_PAGES = 256  # kept on the freelist for the next inserts
MAX_UNITS = 64  # per sweep: at most 8192 pages (32 MiB at 4 KiB) given back at once


def _release_unit(conn: sqlite3.Connection) -> int:
    """Inside a write: cut up to RELEASE_PAGES free pages off the file; how many went."""
    extra = int(conn.execute(Q["space_free_pages"]).fetchone()[0]) - RESERVE_PAGES
    if extra <= 0:
        return 0
    before = int(conn.execute(Q["space_pages"]).fetchone()[0])
    for _ in range(min(extra, RELEASE_PAGES)):
        conn.execute(Q["space_release_page"]).fetchall()
    return before - int(conn.execute(Q["space_pages"]).fetchone()[0])


class SqliteSpace(SqliteConnections):
    """The file's free pages given back in bounded steps (``reclaim_space``)."""

    async def reclaim_space(self) -> int:
        """Pages the file gave back: units of RELEASE_PAGES until the freelist is
        down to RESERVE_PAGES (or MAX_UNITS units ran, or a unit freed nothing)."""
        total = 0
        for _ in range(MAX_UNITS):
            released = await self._write_call(_release_unit)
            total += released
            if released < RELEASE_PAGES:
                break
        if total:  # in WAL mode the main file shrinks when a checkpoint reaches the end
            await self._call(self._read, lambda c: c.execute(Q["space_checkpoint"]).fetchall())
        return total
