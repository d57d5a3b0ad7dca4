"""The PostgreSQL engine's give-backs: ``release`` of one claim, ``release_batch``
of many claims of one queue in one statement (``release_many`` in
``sql/queries.sql``: a stopping worker's jobs claimed ahead and never started),
and the wake of a limited queue whose slot an outcome freed."""

from __future__ import annotations

from collections.abc import Sequence

from alkstore.engines.postgres.connections import PostgresConnections

__all__ = ["PostgresGiveBack"]


class PostgresGiveBack(PostgresConnections):
    """The give-backs of the engine seam, and the freed-slot wake the outcomes share."""

    _limited: set[str]  # the engine's: queues whose claims came back limited

    def _slots_freed(self, queues: set[str]) -> None:
        """After an outcome committed: wake the limited ones of ``queues`` (coalesced)."""
        for queue in queues & self._limited:
            self.send_wake(queue)

    def _freed(self, queue: str, done: bool) -> bool:
        if done and queue in self._limited:
            self.send_wake(queue)
        return done

    async def release(self, queue: str, job_id: int, attempts: int, delay_s: float | None) -> bool:
        params = {"id": job_id, "queue": queue, "attempts": attempts, "delay": delay_s}
        return self._freed(queue, await self._rowcount("release", params) > 0)

    async def release_batch(self, queue: str, items: Sequence[tuple[int, int]]) -> set[int]:
        if not items:
            return set()
        pairs = sorted(items)  # by id: the order the statement locks them in
        params = {
            "queue": queue,
            "ids": [job_id for job_id, _ in pairs],
            "attempts": [attempts for _, attempts in pairs],
        }
        released = {int(row[0]) for row in await self._fetchall("release_many", params)}
        self._freed(queue, bool(released))
        return released
