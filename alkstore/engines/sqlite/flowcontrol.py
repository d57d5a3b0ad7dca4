"""The SQLite engine's flow control: queue settings, and the steps of the claim flow.

Every claim runs ``core.limited_claim``'s flow inside its write unit; the
single writer holds the database, so the count of running jobs, the rate and a
fair queue's key cursors are read and spent with no other claim in between.
The settings (pause, limits, fairness, weights, aging) are rows of
``alk_queues`` and ``alk_fair_weights``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection
from typing import Any

from alkstore.core.job import Row
from alkstore.core.steps import Rows
from alkstore.engines.sqlite.connections import SqliteConnections
from alkstore.engines.sqlite.migrator import QUERIES as Q

__all__ = ["SqliteFlowControl", "claim_steps"]


def claim_steps(
    conn: sqlite3.Connection, queue: str, worker: str, now: float, lapsed: Collection[int]
) -> Callable[[str, dict[str, Any]], Rows]:
    """The steps of ``core.limited_claim`` in a claim's write unit; ``lapsed``: the
    queue's lapsed claims this claim may take over (none: a fair claim's heads are
    read from the pending jobs alone)."""

    def step(name: str, params: dict[str, Any]) -> Rows:
        full = {"queue": queue, "now": now, "worker": worker, **params}
        if name == "settings":
            row = conn.execute(Q["queue_settings"], full).fetchone()
            return [] if row is None else [(*row, now)]
        if name == "claim_ids":
            full["ids"] = json.dumps(params["ids"])
        elif name == "fair_cursors_wait":  # the single writer: nothing to wait for
            return []
        elif name == "fair_heads":
            return _heads(conn, queue, now, params["keys"], params["limits"], bool(lapsed))
        elif name == "fair_update":
            conn.executemany(
                Q["fair_move"],
                [
                    {"queue": queue, "key": key, "vtime": vtime}
                    for key, vtime in zip(params["keys"], params["vtimes"], strict=True)
                ],
            )
            if params["pruned"]:
                pruned = {"queue": queue, "keys": json.dumps(params["pruned"])}
                conn.execute(Q["fair_prune"], pruned)
            return []
        return conn.execute(Q[name], full).fetchall()

    return step


def _heads(
    conn: sqlite3.Connection,
    queue: str,
    now: float,
    keys: list[str],
    limits: list[int],
    lapsed: bool,
) -> Rows:
    """``fair_heads``: every key's heads read by one statement, each key's own limit
    and claim order kept here; one more statement only if some key had none.
    When every key is read one head deep from the pending jobs alone (a claim of
    ``n`` over more than ``n`` keys of equal weight), a scalar probe per key
    gives it (``fair_head_first``: no join back to the table, no sort here)."""
    params = {"queue": queue, "now": now, "keys": json.dumps(keys), "most": max(limits)}
    if not lapsed and params["most"] == 1:
        first = dict(conn.execute(Q["fair_head_first"], params).fetchall())
        empty = [key for key in keys if first[key] is None]
        live = set()
        if empty:
            params["keys"] = json.dumps(empty)
            live = {key for (key,) in conn.execute(Q["fair_live"], params)}
        return [
            (key, first[key], True) if first[key] is not None else (key, None, key in live)
            for key in keys
        ]
    rows: Rows = []
    found: dict[str, list[tuple[int, float, int]]] = {key: [] for key in keys}
    statement = Q["fair_heads" if lapsed else "fair_heads_pending"]
    for key, job_id, priority, run_at in conn.execute(statement, params):
        found[key].append((-priority, run_at, job_id))
    empty = [key for key in keys if not found[key]]
    live = set()
    if empty:
        params["keys"] = json.dumps(empty)
        live = {key for (key,) in conn.execute(Q["fair_live"], params)}
    for key, lim in zip(keys, limits, strict=True):
        heads = sorted(found[key])[:lim]
        rows.extend((key, job_id, True) for _, _, job_id in heads)
        if not heads:
            rows.append((key, None, key in live))
    return rows


class SqliteFlowControl(SqliteConnections):
    """Queue settings of ``SqliteEngine``: pause, limits, fairness, weights, aging."""

    async def queue_settings(self, queue: str | None) -> list[Row]:
        if queue is None:
            return await self._fetchall("all_queue_settings", {})
        return await self._fetchall("queue_settings", {"queue": queue})

    def _set_paused_unit(self, conn: sqlite3.Connection, queue: str, paused: bool) -> None:
        conn.execute(Q["set_paused"], {"queue": queue, "paused": int(paused)})
        if not paused:
            self.write_note(conn, queue, "")

    async def set_paused(self, queue: str, paused: bool) -> None:
        await self._write_call(self._set_paused_unit, queue, paused)

    def _set_limits_unit(self, conn: sqlite3.Connection, params: dict[str, Any]) -> None:
        conn.execute(Q["set_limits"], params)
        self.write_note(conn, params["queue"], "")

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
        await self._write_call(self._set_limits_unit, params)

    def _set_fair_unit(
        self, conn: sqlite3.Connection, queue: str, fair: bool, weights: dict[str, float] | None
    ) -> None:
        params = {"queue": queue, "fair": int(fair)}
        conn.execute(Q["set_fair"], params)
        conn.execute(Q["seed_fair" if fair else "clear_fair"], params)
        if weights is not None:
            conn.execute(Q["clear_weights"], params)
            conn.executemany(
                Q["add_weight"],
                [{"queue": queue, "key": k, "weight": w} for k, w in weights.items()],
            )
        self.write_note(conn, queue, "")

    async def set_fair(self, queue: str, fair: bool, weights: dict[str, float] | None) -> None:
        await self._write_call(self._set_fair_unit, queue, fair, weights)

    async def fair_weights(self, queue: str) -> dict[str, float]:
        rows = await self._fetchall("fair_weights", {"queue": queue})
        return {str(k): float(w) for k, w in rows}

    async def set_aging(self, queue: str, aging_s: float | None) -> None:
        await self._rowcount("set_aging", {"queue": queue, "aging_s": aging_s})
