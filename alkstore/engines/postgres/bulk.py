"""The PostgreSQL engine's bulk actions: one bounded batch per transaction.

A batch locks the action's row (so two runners of one action take turns and
never apply a batch twice), picks the next ``limit`` ids of the current phase's
table in id order after the cursor (no lock: a plain index scan), applies the
action to those ids with the whole filter checked again in the changing
statement (a row claimed or changed since it was picked is left alone, by
PostgreSQL's re-check of updated rows), and moves the cursor and ``done`` in
the same transaction. Locks on jobs are held for one batch only, so workers
keep claiming between batches; wakes and cancel notes go out at commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg

from alkstore.core.job import Row
from alkstore.engines.postgres.search import PostgresSearch, compile_where

if TYPE_CHECKING:
    from alkstore.core.bulk import BulkStep  # annotations only: not imported at start

__all__ = ["BULK_COLUMNS", "PostgresBulk"]

BULK_COLUMNS = (
    "id, action, filter, priority, to_queue, actor, matched, done, phase, after_id, "
    "created_at, updated_at, finished_at"
)


# Each action on each table: the changing statement over %(ids)s whose rows also
# match {where}; it returns one row per job changed, (queue, note) — a note to
# send on the queue's channel, or NULL. {schema}/{now} are formatted as usual.
_ACTIONS: dict[tuple[str, str], str] = {
    ("retry", "live"): """
        UPDATE {schema}.alk_jobs SET run_at = {now}
        WHERE id = ANY(%(ids)s::bigint[]) AND state = 'pending' AND {where}
        RETURNING queue, NULL::text""",
    ("retry", "dead"): """
        WITH revived AS (
            DELETE FROM {schema}.alk_dead WHERE id = ANY(%(ids)s::bigint[]) AND {where}
            RETURNING *
        ), ranked AS (
            SELECT r.*, row_number() OVER (PARTITION BY queue, dedupe_key ORDER BY id) AS rn
            FROM revived AS r
        ), back AS (
            INSERT INTO {schema}.alk_jobs (id, queue, payload, state, priority, run_at,
                created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s,
                expires_at, worker_id, claim_expires_at, last_error, dedupe_key, partition_key)
            OVERRIDING SYSTEM VALUE
            SELECT id, queue, payload, 'pending', priority, {now}, created_at,
                   %(attempts)s::integer, max_attempts, visibility_timeout_s, retry_base_s,
                   CASE WHEN expires_at > {now} + make_interval(secs => %(cutoff)s::float8)
                        THEN expires_at END,
                   NULL, NULL, last_error,
                   CASE WHEN dedupe_key IS NULL THEN NULL
                        WHEN rn = 1 AND NOT EXISTS (
                            SELECT 1 FROM {schema}.alk_jobs AS l
                            WHERE l.queue = ranked.queue AND l.dedupe_key = ranked.dedupe_key)
                        THEN dedupe_key END,
                   partition_key
            FROM ranked
            RETURNING queue, partition_key
        ), touched AS (
            INSERT INTO {schema}.alk_fair (queue, partition_key, vtime)
            SELECT DISTINCT b.queue, b.partition_key,
                   COALESCE((SELECT min(vtime) FROM {schema}.alk_fair AS m
                             WHERE m.queue = b.queue), 0)
            FROM back AS b
            WHERE b.partition_key IS NOT NULL
              AND EXISTS (SELECT 1 FROM {schema}.alk_queues AS s WHERE s.queue = b.queue AND s.fair)
            ON CONFLICT (queue, partition_key) DO NOTHING
        )
        SELECT queue, NULL::text FROM back""",
    ("cancel", "live"): """
        DELETE FROM {schema}.alk_jobs WHERE id = ANY(%(ids)s::bigint[]) AND {where}
          AND set_config('alkstore.cancelling', 'on', true) = 'on'
        RETURNING queue, CASE WHEN state = 'processing' THEN %(cancel_note)s || id END""",
    ("delete", "dead"): """
        DELETE FROM {schema}.alk_dead WHERE id = ANY(%(ids)s::bigint[]) AND {where}
        RETURNING queue, NULL::text""",
    ("priority", "live"): """
        UPDATE {schema}.alk_jobs SET priority = %(priority)s
        WHERE id = ANY(%(ids)s::bigint[]) AND state = 'pending' AND {where}
        RETURNING queue, NULL::text""",
    ("priority", "dead"): """
        UPDATE {schema}.alk_dead SET priority = %(priority)s
        WHERE id = ANY(%(ids)s::bigint[]) AND {where}
        RETURNING queue, NULL::text""",
    # A moved job leaves its dedupe and debounce keys behind (they were unique in
    # the old queue) and gets its fair key cursor in the new one.
    ("move", "live"): """
        WITH moved AS (
            UPDATE {schema}.alk_jobs
            SET queue = %(to_queue)s, dedupe_key = NULL, debounce_key = NULL
            WHERE id = ANY(%(ids)s::bigint[]) AND state = 'pending' AND {where}
            RETURNING queue, partition_key
        ), touched AS (
            INSERT INTO {schema}.alk_fair (queue, partition_key, vtime)
            SELECT DISTINCT b.queue, b.partition_key,
                   COALESCE((SELECT min(vtime) FROM {schema}.alk_fair AS m
                             WHERE m.queue = b.queue), 0)
            FROM moved AS b
            WHERE b.partition_key IS NOT NULL
              AND EXISTS (SELECT 1 FROM {schema}.alk_queues AS s WHERE s.queue = b.queue AND s.fair)
            ON CONFLICT (queue, partition_key) DO NOTHING
        )
        SELECT queue, NULL::text FROM moved""",
    ("move", "dead"): """
        UPDATE {schema}.alk_dead SET queue = %(to_queue)s, dedupe_key = NULL
        WHERE id = ANY(%(ids)s::bigint[]) AND {where}
        RETURNING queue, NULL::text""",
}
# the actions whose changed queues are woken at commit (jobs became claimable)
_WAKES = {"retry", "move"}
_TABLES = {"live": "alk_jobs", "dead": "alk_dead"}


class PostgresBulk(PostgresSearch):
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
        text = (
            "INSERT INTO {schema}.alk_bulk_actions (action, filter, priority, to_queue, actor,"
            " matched, phase, created_at, updated_at, finished_at)"
            " VALUES (%(action)s, %(filter)s, %(priority)s, %(to_queue)s, %(actor)s,"
            " %(matched)s, %(phase)s, {now}, {now},"
            " CASE WHEN %(phase)s = 'done' THEN {now} END) RETURNING id"
        )
        params = {
            "action": action,
            "filter": filter_text,
            "priority": priority,
            "to_queue": to_queue,
            "actor": actor,
            "matched": matched,
            "phase": phase,
        }
        rows = await self._run_rows(text, params, "bulk_create")
        return int(rows[0][0])

    async def bulk_get(self, action_id: int) -> Row | None:
        text = f"SELECT {BULK_COLUMNS} FROM {{schema}}.alk_bulk_actions WHERE id = %(id)s"
        rows = await self._run_rows(text, {"id": action_id}, "bulk_get")
        return rows[0] if rows else None

    async def bulk_list(self, before: int | None, limit: int) -> list[Row]:
        text = (
            f"SELECT {BULK_COLUMNS} FROM {{schema}}.alk_bulk_actions"
            " WHERE %(before)s::bigint IS NULL OR id < %(before)s::bigint"
            " ORDER BY id DESC LIMIT %(limit)s"
        )
        return await self._run_rows(text, {"before": before, "limit": limit}, "bulk_list")

    async def bulk_step(self, action_id: int, step: BulkStep) -> Row | None:
        pool = self.check_open()
        woken: set[str] = set()
        try:
            async with pool.connection() as conn, conn.transaction():
                cur = await conn.execute(
                    self.sql(
                        "SELECT phase, after_id FROM {schema}.alk_bulk_actions"
                        " WHERE id = %(id)s FOR UPDATE"
                    ),
                    {"id": action_id},
                )
                got = await cur.fetchone()
                if got is None:
                    return None
                phase, after = str(got[0]), int(got[1])
                if phase == "done":  # finished (by another runner): left as it is
                    cur = await conn.execute(
                        self.sql(
                            f"SELECT {BULK_COLUMNS} FROM {{schema}}.alk_bulk_actions"
                            " WHERE id = %(id)s"
                        ),
                        {"id": action_id},
                    )
                    return await cur.fetchone()
                changed, phase, after = await self._batch(conn, step, phase, after, woken)
                cur = await conn.execute(
                    self.sql(
                        "UPDATE {schema}.alk_bulk_actions SET phase = %(phase)s,"
                        " after_id = %(after)s, done = done + %(changed)s, updated_at = {now},"
                        " finished_at = CASE WHEN %(phase)s = 'done' THEN {now} END"
                        f" WHERE id = %(id)s RETURNING {BULK_COLUMNS}"
                    ),
                    self.timed(
                        {"phase": phase, "after": after, "changed": changed, "id": action_id}
                    ),
                )
                row = await cur.fetchone()
        except psycopg.Error as e:
            raise await self.failure(e, "bulk_step") from e
        for queue in woken:
            self.send_wake(queue)
        return row

    async def _batch(
        self, conn: Any, step: BulkStep, phase: str, after: int, woken: set[str]
    ) -> tuple[int, str, int]:
        """Run one batch of ``phase``; (jobs changed, the next phase, the next cursor)."""
        where, params = compile_where(step.reach, phase)
        table = _TABLES[phase]
        cur = await conn.execute(
            self.sql(
                f"SELECT id FROM {{schema}}.{table} WHERE {where} AND id > %(after)s"
                " ORDER BY id LIMIT %(limit)s"
            ),
            self.timed({**params, "after": after, "limit": step.limit}),
        )
        ids = [int(r[0]) for r in await cur.fetchall()]
        changed = 0
        if ids:
            text = _ACTIONS[(step.action, phase)].replace("{where}", where)
            cur = await conn.execute(
                self.sql(text),
                self.timed(
                    {
                        **params,
                        "ids": ids,
                        "attempts": step.attempts,
                        "cutoff": step.expiry_cutoff_s,
                        "cancel_note": step.cancel_note,
                        "priority": step.priority,
                        "to_queue": step.to_queue,
                    }
                ),
            )
            rows = await cur.fetchall()
            changed = len(rows)
            for queue, note in rows:
                if note is not None:
                    await conn.execute("SELECT pg_notify(%s, %s)", (queue, note))
                elif step.action in _WAKES:
                    woken.add(queue)
        if len(ids) == step.limit:
            return changed, phase, ids[-1]
        return changed, step.next_phase(phase), 0
