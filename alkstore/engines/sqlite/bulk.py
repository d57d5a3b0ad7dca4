"""The SQLite engine's bulk actions: one bounded batch per write unit.

A batch is one ``BEGIN IMMEDIATE`` write unit (SQLite has one writer, so two
runners of one action take turns): it reads the action's cursor, picks the next
``limit`` ids of the current phase's table after it, applies the action to those
ids with the whole filter checked again, and moves the cursor and ``done`` in
the same transaction. Workers' claims run between batches; wakes and cancel
notes are note rows written in the batch's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

from alkstore.core.job import Row
from alkstore.engines.sqlite.migrator import QUERIES as Q
from alkstore.engines.sqlite.search import SqliteSearch, compile_where

if TYPE_CHECKING:
    from alkstore.core.bulk import BulkStep  # annotations only: not imported at start

__all__ = ["BULK_COLUMNS", "SqliteBulk"]

BULK_COLUMNS = (
    "id, action, filter, priority, to_queue, actor, matched, done, phase, after_id, "
    "created_at, updated_at, finished_at"
)

_IDS = "id IN (SELECT value FROM json_each(:ids))"

# Each action on each table: statements over :ids whose rows also match {where};
# the first returns one row per job changed, (queue, partition key, note).
# Run before an action's statements: a cancel marks the rows (deps bit 4) so that the
# dependencies trigger reads their delete as a cancel, not an ack (migration 0008).
_BEFORE: dict[tuple[str, str], str] = {
    ("cancel", "live"): f"UPDATE alk_jobs SET deps = deps | 4 WHERE {_IDS} AND deps <> 0",
}

_ACTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("retry", "live"): (
        f"UPDATE alk_jobs SET run_at = :now WHERE {_IDS} AND state = 'pending' AND {{where}}"
        " RETURNING queue, NULL, NULL",
    ),
    ("retry", "dead"): (
        # the dead rows back to live pending (as admin_requeue_copy, for many ids);
        # a dedupe key held by a live job (or by an earlier row of the batch) is dropped
        f"""INSERT INTO alk_jobs (id, queue, payload, state, priority, run_at, created_at,
            attempts, max_attempts, visibility_timeout_s, retry_base_s, expires_at,
            worker_id, claim_expires_at, last_error, dedupe_key, partition_key)
        SELECT id, queue, payload, 'pending', priority, :now, created_at, :attempts,
               max_attempts, visibility_timeout_s, retry_base_s,
               CASE WHEN expires_at > :now + :cutoff THEN expires_at END,
               NULL, NULL, last_error,
               CASE WHEN d.dedupe_key IS NULL THEN NULL
                    WHEN NOT EXISTS (SELECT 1 FROM alk_jobs AS l
                                     WHERE l.queue = d.queue AND l.dedupe_key = d.dedupe_key)
                     AND NOT EXISTS (SELECT 1 FROM alk_dead AS e
                                     WHERE e.{_IDS} AND e.id < d.id AND e.queue = d.queue
                                       AND e.dedupe_key = d.dedupe_key)
                    THEN dedupe_key END,
               partition_key
        FROM alk_dead AS d WHERE d.{_IDS} AND {{where}} ORDER BY id
        RETURNING queue, partition_key, NULL""",
        f"DELETE FROM alk_dead WHERE {_IDS} AND id IN (SELECT id FROM alk_jobs WHERE {_IDS})",
    ),
    ("cancel", "live"): (
        f"DELETE FROM alk_jobs WHERE {_IDS} AND {{where}}"
        " RETURNING queue, NULL, CASE WHEN state = 'processing' THEN :cancel_note || id END",
    ),
    ("delete", "dead"): (
        f"DELETE FROM alk_dead WHERE {_IDS} AND {{where}} RETURNING queue, NULL, NULL",
    ),
    ("priority", "live"): (
        f"UPDATE alk_jobs SET priority = :priority WHERE {_IDS} AND state = 'pending'"
        " AND {where} RETURNING queue, NULL, NULL",
    ),
    ("priority", "dead"): (
        f"UPDATE alk_dead SET priority = :priority WHERE {_IDS} AND {{where}}"
        " RETURNING queue, NULL, NULL",
    ),
    # a moved job leaves its dedupe and debounce keys behind (see PostgreSQL's)
    ("move", "live"): (
        "UPDATE alk_jobs SET queue = :to_queue, dedupe_key = NULL, debounce_key = NULL"
        f" WHERE {_IDS} AND state = 'pending' AND {{where}} RETURNING queue, partition_key, NULL",
    ),
    ("move", "dead"): (
        f"UPDATE alk_dead SET queue = :to_queue, dedupe_key = NULL WHERE {_IDS} AND {{where}}"
        " RETURNING queue, NULL, NULL",
    ),
}
_WAKES = {"retry", "move"}
_TABLES = {"live": "alk_jobs", "dead": "alk_dead"}


class SqliteBulk(SqliteSearch):
    """``Engine.bulk_create``, ``bulk_step``, ``bulk_get`` and ``bulk_list``."""

    async def bulk_create(
        self,
        action: str,
        filter_text: str,
        priority: int | None,
        to_queue: str | None,
        actor: str,
        matched: int,
        phase: str,
    ) -> int:
        def unit(conn: sqlite3.Connection) -> int:
            now = self._clock()
            cur = conn.execute(
                "INSERT INTO alk_bulk_actions (action, filter, priority, to_queue, actor,"
                " matched, phase, created_at, updated_at, finished_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    action,
                    filter_text,
                    priority,
                    to_queue,
                    actor,
                    matched,
                    phase,
                    now,
                    now,
                    now if phase == "done" else None,
                ),
            )
            return int(cur.lastrowid or 0)

        return await self._write_call(unit)

    async def bulk_get(self, action_id: int) -> Row | None:
        text = f"SELECT {BULK_COLUMNS} FROM alk_bulk_actions WHERE id = ?"
        return await self._call(self._read, lambda c: c.execute(text, (action_id,)).fetchone())

    async def bulk_list(self, before: int | None, limit: int) -> list[Row]:
        text = (
            f"SELECT {BULK_COLUMNS} FROM alk_bulk_actions WHERE :before IS NULL OR id < :before"
            " ORDER BY id DESC LIMIT :limit"
        )
        params = {"before": before, "limit": limit}
        return await self._call(self._read, lambda c: c.execute(text, params).fetchall())

    async def bulk_step(self, action_id: int, step: BulkStep) -> Row | None:
        return await self._write_call(self._bulk_unit, action_id, step)

    def _bulk_unit(self, conn: sqlite3.Connection, action_id: int, step: BulkStep) -> Row | None:
        got = conn.execute(
            "SELECT phase, after_id FROM alk_bulk_actions WHERE id = ?", (action_id,)
        ).fetchone()
        if got is None:
            return None
        phase, after = str(got[0]), int(got[1])
        text = f"SELECT {BULK_COLUMNS} FROM alk_bulk_actions WHERE id = ?"
        if phase == "done":  # finished (by another runner): left as it is
            done: Row | None = conn.execute(text, (action_id,)).fetchone()
            return done
        now = self._clock()
        changed, phase, after = self._batch(conn, step, phase, after, now)
        conn.execute(
            "UPDATE alk_bulk_actions SET phase = :phase, after_id = :after,"
            " done = done + :changed, updated_at = :now,"
            " finished_at = CASE WHEN :phase = 'done' THEN :now END WHERE id = :id",
            {"phase": phase, "after": after, "changed": changed, "now": now, "id": action_id},
        )
        row: Row | None = conn.execute(text, (action_id,)).fetchone()
        return row

    def _batch(
        self, conn: sqlite3.Connection, step: BulkStep, phase: str, after: int, now: float
    ) -> tuple[int, str, int]:
        """One batch of ``phase``: (jobs changed, the next phase, the next cursor)."""
        where, params = compile_where(step.reach, phase)
        table = _TABLES[phase]
        ids = [
            int(r[0])
            for r in conn.execute(
                f"SELECT id FROM {table} WHERE {where} AND id > :after ORDER BY id LIMIT :limit",
                {**params, "now": now, "after": after, "limit": step.limit},
            )
        ]
        changed = 0
        if ids:
            values: dict[str, Any] = {
                **params,
                "ids": json.dumps(ids),
                "now": now,
                "attempts": step.attempts,
                "cutoff": step.expiry_cutoff_s,
                "cancel_note": step.cancel_note,
                "priority": step.priority,
                "to_queue": step.to_queue,
            }
            before = _BEFORE.get((step.action, phase))
            if before is not None:
                conn.execute(before, values)
            first, *rest = _ACTIONS[(step.action, phase)]
            rows = conn.execute(first.replace("{where}", where), values).fetchall()
            for statement in rest:
                conn.execute(statement, values)
            changed = len(rows)
            woken: set[str] = set()
            for queue, key, note in rows:
                if note is not None:
                    self.write_note(conn, queue, note)
                elif step.action in _WAKES:
                    woken.add(queue)
                    if key is not None:  # back under its fair queue's key cursor
                        conn.execute(Q["fair_touch"], {"queue": queue, "key": key})
            for queue in woken:
                self.write_note(conn, queue, "")
        if len(ids) == step.limit:
            return changed, phase, ids[-1]
        return changed, step.next_phase(phase), 0
