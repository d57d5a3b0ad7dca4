"""The PostgreSQL engine's flow control: queue settings, and the claim that honours them.

A limited queue's claim is ``core.limited_claim``'s flow, run here in one
transaction holding its settings row ``FOR UPDATE`` (its claims run one at a
time, so running jobs are counted and the rate spent race-free). A fair queue
without limits is claimed by one statement, ``fair_claim`` (the order of
``core.fair``, in SQL): it locks key cursors, not the settings row, so claims
of different keys run side by side. The settings themselves (pause, limits,
fairness, weights, aging) are rows of ``alk_queues`` and ``alk_fair_weights``.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from alkstore.core.fair import FAIR_SLACK, FAIR_SPARE
from alkstore.core.flow import Claimed
from alkstore.core.job import Row
from alkstore.core.limited_claim import limited_claim
from alkstore.core.steps import Rows, run_steps
from alkstore.engines.postgres.outbox import PostgresOutbox

__all__ = ["PostgresFlowControl"]

FAIR_STATS_RECHECK_S = 60.0  # how often to ask again whether fair_claim's tables have statistics


class PostgresFlowControl(PostgresOutbox):
    """Queue settings and the flow-controlled claim of ``PostgresEngine``."""

    _fair_stats: tuple[bool, float] | None  # (analyzed, when asked), see _fair_planned

    async def _claim_locked(
        self, queue: str, worker_id: str, n: int, exhausted_error: str
    ) -> Claimed:
        """A limited queue's claim (``core.limited_claim``, a fair one's too), one
        transaction holding the queue's settings row."""
        pool = self.check_open()
        q = self.q
        key = self.timed({"queue": queue})
        claim = {**key, "worker": worker_id, "exhausted_error": exhausted_error, "gated": False}
        try:
            async with pool.connection() as conn, conn.transaction():

                async def step(name: str, params: dict[str, Any]) -> Rows:
                    if name in ("claim", "claim_ids"):
                        cur = await conn.execute(q[name], {**claim, **params}, binary=True)
                    else:
                        if name == "claim_candidates":  # the pre-claim sweep first
                            await conn.execute(q["claim"], {**claim, "n": 0})
                        name = "lock_settings" if name == "settings" else name
                        cur = await conn.execute(q[name], {**key, **params})
                    return await cur.fetchall() if cur.description is not None else []

                return await run_steps(limited_claim(n), step)
        except psycopg.Error as e:
            raise await self.failure(e, "claim") from e

    async def _claim_fair(
        self, queue: str, worker_id: str, n: int, exhausted_error: str
    ) -> Claimed | None:
        """A fair queue's claim without limits: ``fair_claim``, one statement with the
        gate and the pre-claim sweep (``None``: the gate says the queue is no longer
        fair without limits). Only when every key is being served does it wait for
        their cursors (a transaction of two statements); only when it found a key
        empty does ``fair_prune`` follow."""
        params = self.timed(
            {
                "queue": queue,
                "worker": worker_id,
                "n": n,
                "window": n + FAIR_SLACK,
                "spare": FAIR_SPARE,
                "exhausted_error": exhausted_error,
            }
        )
        rows = await self._fair_claim_generic({**params, "waited": False})
        marker = rows[-1][3] if rows and rows[-1][0] is None else None
        if marker == "regate":
            return None
        if marker == "busy":
            pool = self.check_open()
            try:
                async with pool.connection() as conn, conn.transaction():
                    await conn.execute(self.q["generic_plan"])
                    await conn.execute(self.q["fair_cursors_wait"], params)
                    cur = await conn.execute(
                        self.q["fair_claim"], {**params, "waited": True}, binary=True
                    )
                    rows = await cur.fetchall()
            except psycopg.Error as e:
                raise await self.failure(e, "claim") from e
            if rows and rows[-1][0] is None and rows[-1][3] == "regate":
                return None
        empty = [row[17] for row in rows if row[0] is None and row[3] == "empty"]
        if empty:
            await self._fair_prune(queue, empty)
        return Claimed([row for row in rows if row[0] is not None])

    async def _fair_claim_generic(self, params: dict[str, Any]) -> list[Row]:
        """``fair_claim`` on its generic plan: its prepared statement is planned once
        per connection, not at every call (left to itself the server keeps making
        custom plans for it, ~2 ms each: docs/benchmarks.md). On the store's
        fair-claim connection, whose session plans generically (only fair claims run
        there), when it is free; else on the pool, the setting local to the
        statement's own transaction (``_fetchall_planned``: one pipeline, one
        implicit transaction). Only once the planner has statistics for its tables:
        a generic plan made without them reads every key cursor per claim (custom
        plans fare better then)."""
        if not await self._fair_planned():
            return await self._fetchall("fair_claim", params)
        return await self._fair_rows("fair_claim", params)

    async def _fair_planned(self) -> bool:
        """Whether ``alk_jobs`` and ``alk_fair`` have been analyzed (asked at most once
        a minute; once they have, they stay so)."""
        known = self._fair_stats
        now = time.monotonic()
        if known is not None and (known[0] or now - known[1] < FAIR_STATS_RECHECK_S):
            return known[0]
        row = await self._fetchone("fair_statistics", {"schema": self.schema})
        analyzed = bool(row is not None and row[0])
        self._fair_stats = (analyzed, now)
        return analyzed

    async def _fair_prune(self, queue: str, keys: list[str]) -> None:
        """Drop the cursors of ``keys`` that have no live job, under their locks."""
        pool = self.check_open()
        params = {"queue": queue, "keys": keys}
        try:
            async with pool.connection() as conn, conn.transaction():
                cur = await conn.execute(self.q["fair_lock"], params)
                locked = [str(row[0]) for row in await cur.fetchall()]
                if locked:
                    await conn.execute(self.q["fair_prune"], {**params, "keys": locked})
        except psycopg.Error as e:
            raise await self.failure(e, "claim") from e

    async def queue_settings(self, queue: str | None) -> list[Row]:
        if queue is None:
            return await self._fetchall("all_queue_settings", {})
        return await self._fetchall("queue_settings", {"queue": queue})

    async def set_paused(self, queue: str, paused: bool) -> None:
        await self._fetchall("set_paused", {"queue": queue, "paused": paused})
        if paused:
            pool = self.check_open()
            try:
                async with pool.connection() as conn, conn.transaction():
                    await conn.execute(self.q["await_claims"])
            except psycopg.Error as e:
                raise await self.failure(e, "pause") from e

    async def set_limits(
        self,
        queue: str,
        concurrency: int | None,
        partition_concurrency: int | None,
        rate: tuple[int, float] | None,
        burst: int | None,
    ) -> None:
        params = {
            "queue": queue,
            "concurrency": concurrency,
            "partition_concurrency": partition_concurrency,
            "rate_count": None if rate is None else rate[0],
            "rate_period_s": None if rate is None else rate[1],
            "burst": burst,
        }
        await self._fetchall("set_limits", params)

    async def set_fair(self, queue: str, fair: bool, weights: dict[str, float] | None) -> None:
        """Fairness on or off; ``weights`` (not None) replace the key weights. In one
        transaction that first waits out the writers of ``alk_jobs`` in flight, so
        no enqueue slips between the seeding of the cursors and the switch."""
        pool = self.check_open()
        try:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute(self.q["await_claims"])
                await conn.execute(self.q["set_fair"], {"queue": queue, "fair": fair})
                if weights is not None:
                    await conn.execute(self.q["clear_weights"], {"queue": queue})
                    await conn.execute(
                        self.q["add_weights"],
                        {"queue": queue, "keys": list(weights), "weights": list(weights.values())},
                    )
        except psycopg.Error as e:
            raise await self.failure(e, "set_fair") from e

    async def fair_weights(self, queue: str) -> dict[str, float]:
        rows = await self._fetchall("fair_weights", {"queue": queue})
        return {str(k): float(w) for k, w in rows}

    async def set_aging(self, queue: str, aging_s: float | None) -> None:
        await self._rowcount("set_aging", {"queue": queue, "aging_s": aging_s})
