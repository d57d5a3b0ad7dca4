"""The PostgreSQL engine's side of a job's life (#24): attempt history, progress,
durable steps and signals (``sql/life.sql``).

A signal and a park each commit their write first, then run ``life_poke`` as a
statement of its own (its own snapshot): whichever of the two pokes runs second
sees both the signal and the parked row, so a signal is never missed between a
handler's check and its give-back. The wake goes out after the poke commits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import psycopg

from alkstore.core.job import Row
from alkstore.core.life import GONE_LIFE_KEPT_S
from alkstore.engines.postgres.connections import PostgresConnections

__all__ = ["PostgresLife"]

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


class PostgresLife(PostgresConnections):
    """The life operations of the engine seam."""

    async def add_attempts(self, rows: Sequence[Row], keep: int) -> None:
        pool = self.check_open()
        records = json.dumps([dict(zip(_ATTEMPT_COLUMNS, r, strict=True)) for r in rows])
        ids = sorted({int(r[0]) for r in rows})
        try:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute(self.q["life_add_attempts"], self.timed({"rows": records}))
                await conn.execute(
                    self.q["life_trim_attempts"], self.timed({"ids": ids, "keep": keep})
                )
        except psycopg.Error as e:
            raise await self.failure(e, "add_attempts") from e

    async def attempts(self, queue: str, job_id: int) -> list[Row]:
        return list(await self._fetchall("life_attempts", {"id": job_id, "queue": queue}))

    async def put_progress(
        self, queue: str, job_id: int, attempts: int, value: float, message: str | None
    ) -> bool:
        params = {
            "id": job_id,
            "queue": queue,
            "attempts": attempts,
            "value": value,
            "message": message,
        }
        return await self._rowcount("life_put_progress", params) > 0

    async def progress(self, queue: str, job_id: int) -> Row | None:
        return await self._fetchone("life_progress", {"id": job_id, "queue": queue})

    async def put_step(self, queue: str, job_id: int, attempts: int, name: str, value: str) -> bool:
        params = {"id": job_id, "queue": queue, "attempts": attempts, "name": name, "value": value}
        return await self._rowcount("life_put_step", params) > 0

    async def steps(self, queue: str, job_id: int) -> dict[str, str]:
        rows = await self._fetchall("life_steps", {"id": job_id, "queue": queue})
        return {str(name): str(value) for name, value in rows}

    async def put_signal(self, job_id: int, name: str, payload: str) -> str | None:
        row = await self._fetchone(
            "life_put_signal", {"id": job_id, "name": name, "payload": payload}
        )
        if row is None:
            return None
        queue = str(row[0])
        await self._poke(job_id, name)
        return queue

    async def get_signal(self, queue: str, job_id: int, name: str) -> str | None:
        row = await self._fetchone("life_signal", {"id": job_id, "queue": queue, "name": name})
        return None if row is None else str(row[0])

    async def _poke(self, job_id: int, name: str) -> bool:
        row = await self._fetchone("life_poke", {"id": job_id, "name": name})
        if row is None:
            return False
        self.send_wake(str(row[0]))
        return True

    async def poke_parked(self, queue: str, job_id: int, name: str) -> bool:
        return await self._poke(job_id, name)

    async def purge_life(self, queue: str) -> int:
        row = await self._fetchone("life_purge", {"queue": queue, "kept": GONE_LIFE_KEPT_S})
        return 0 if row is None else int(row[0])
