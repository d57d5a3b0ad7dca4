"""The SQLite engine's give-backs: ``release`` of one claim, ``release_batch`` of
many claims of one queue in one write unit (one transaction, the ``release``
statement once per claim: a stopping worker's jobs claimed ahead and never
started), and the wake note of a limited queue whose slot an outcome freed."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from alkstore.engines.sqlite.connections import SqliteConnections
from alkstore.engines.sqlite.migrator import QUERIES as Q

__all__ = ["SqliteGiveBack"]


class SqliteGiveBack(SqliteConnections):
    """The give-backs of the engine seam, and the freed-slot note the outcomes share."""

    _limited: set[str]  # the engine's: queues whose claims came back limited

    def _fenced(self, queue: str, job_id: int, attempts: int) -> dict[str, Any]:
        return {"id": job_id, "queue": queue, "attempts": attempts, "now": self._clock()}

    def _slots_freed(self, conn: sqlite3.Connection, queues: set[str]) -> None:
        """In the outcome's own transaction: wake the limited ones of ``queues``."""
        for queue in queues & self._limited:
            self.write_note(conn, queue, "")

    def _freeing_unit(self, conn: sqlite3.Connection, name: str, params: dict[str, Any]) -> bool:
        """A fenced outcome that frees the job's slot (retry, release)."""
        done = bool(conn.execute(Q[name], params).rowcount)
        if done:
            self._slots_freed(conn, {params["queue"]})
        return done

    async def release(self, queue: str, job_id: int, attempts: int, delay_s: float | None) -> bool:
        params = self._fenced(queue, job_id, attempts)
        params["run_at"] = None if delay_s is None else params["now"] + delay_s
        return await self._write_call(self._freeing_unit, "release", params)

    def _release_many_unit(
        self, conn: sqlite3.Connection, queue: str, items: Sequence[tuple[int, int]]
    ) -> set[int]:
        params: dict[str, Any] = {"queue": queue, "now": self._clock(), "run_at": None}
        release = Q["release"]
        released = set()
        for job_id, attempts in sorted(items):
            params["id"] = job_id
            params["attempts"] = attempts
            if conn.execute(release, params).rowcount:
                released.add(job_id)
        if released:
            self._slots_freed(conn, {queue})
        return released

    async def release_batch(self, queue: str, items: Sequence[tuple[int, int]]) -> set[int]:
        if not items:
            return set()
        return await self._write_call(self._release_many_unit, queue, items)
