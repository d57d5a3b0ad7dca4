"""The SQLite engine's side of a job's life (#24): attempt history, progress,
durable steps and signals (``sql/life.sql``). Each write is one unit of the group
commit; SQLite's single writer makes a signal and a park's check race-free."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from alkstore.core.job import Row
from alkstore.core.life import GONE_LIFE_KEPT_S
from alkstore.engines.sqlite.connections import SqliteConnections
from alkstore.engines.sqlite.migrator import QUERIES as Q

__all__ = ["SqliteLife"]

_ATTEMPT_COLUMNS = (
    "job_id",
    "queue",
    "attempt",
    "worker_id",
    "host",
    "claimed_at",
    "finished_at",
    "outcome",
    "error",
)


_AGED = ("attempts", "progress")  # the purges that keep a gone job's fresh rows


class SqliteLife(SqliteConnections):
    """The life operations of the engine seam."""

    def _attempts_unit(self, conn: sqlite3.Connection, rows: Sequence[Row], keep: int) -> None:
        records = [dict(zip(_ATTEMPT_COLUMNS, r, strict=True)) for r in rows]
        conn.executemany(Q["life_add_attempt"], records)
        for job_id in {r[0] for r in rows}:
            params = {"job_id": job_id, "keep": keep}
            if conn.execute(Q["life_trim_attempts"], params).rowcount:
                conn.execute(Q["life_mark_trimmed"], params)

    async def add_attempts(self, rows: Sequence[Row], keep: int) -> None:
        await self._write_call(self._attempts_unit, rows, keep)

    async def attempts(self, queue: str, job_id: int) -> list[Row]:
        return await self._fetchall("life_attempts", {"id": job_id, "queue": queue})

    async def put_progress(
        self, queue: str, job_id: int, attempts: int, value: float, message: str | None
    ) -> bool:
        params = {
            "id": job_id,
            "queue": queue,
            "attempts": attempts,
            "value": value,
            "message": message,
            "now": self._clock(),
        }
        return bool(await self._rowcount("life_put_progress", params))

    async def progress(self, queue: str, job_id: int) -> Row | None:
        return await self._fetchone("life_progress", {"id": job_id, "queue": queue})

    async def put_step(self, queue: str, job_id: int, attempts: int, name: str, value: str) -> bool:
        params = {
            "id": job_id,
            "queue": queue,
            "attempts": attempts,
            "name": name,
            "value": value,
            "now": self._clock(),
        }
        return bool(await self._rowcount("life_put_step", params))

    async def steps(self, queue: str, job_id: int) -> dict[str, str]:
        rows = await self._fetchall("life_steps", {"id": job_id, "queue": queue})
        return {name: value for name, value in rows}

    def _poke_unit(self, conn: sqlite3.Connection, queue: str, job_id: int, name: str) -> bool:
        params = {"id": job_id, "name": name, "now": self._clock()}
        if conn.execute(Q["life_poke"], params).rowcount:
            self.write_note(conn, queue, "")
            return True
        return False

    def _signal_unit(
        self, conn: sqlite3.Connection, job_id: int, name: str, payload: str
    ) -> str | None:
        row = conn.execute(Q["life_job_queue"], {"id": job_id}).fetchone()
        if row is None:
            return None
        queue = str(row[0])
        params = {"id": job_id, "name": name, "queue": queue, "payload": payload}
        conn.execute(Q["life_put_signal"], {**params, "now": self._clock()})
        self._poke_unit(conn, queue, job_id, name)
        return queue

    async def put_signal(self, job_id: int, name: str, payload: str) -> str | None:
        return await self._write_call(self._signal_unit, job_id, name, payload)

    async def get_signal(self, queue: str, job_id: int, name: str) -> str | None:
        row = await self._fetchone("life_signal", {"id": job_id, "queue": queue, "name": name})
        return None if row is None else str(row[0])

    async def poke_parked(self, queue: str, job_id: int, name: str) -> bool:
        return await self._write_call(self._poke_unit, queue, job_id, name)

    def purge_life_unit(self, conn: sqlite3.Connection, queue: str) -> int:
        """The sweep's purge, inside the sweep's own unit."""
        cutoff = {"queue": queue, "cutoff": time.time() - GONE_LIFE_KEPT_S}
        plain = {"queue": queue}
        return sum(
            conn.execute(Q[f"life_purge_{t}"], cutoff if t in _AGED else plain).rowcount
            for t in ("attempts", "progress", "steps", "signals")
        )

    async def purge_life(self, queue: str) -> int:
        return await self._write_call(self.purge_life_unit, queue)
