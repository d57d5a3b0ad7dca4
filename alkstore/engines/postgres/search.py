"""The PostgreSQL engine's job search: ``core.filters.JobFilter`` compiled to SQL.

The filter's text never reaches the SQL: every value is a bound parameter and
the only text pasted in is this module's own (column names, the state
conditions below, ``{schema}`` and ``{now}`` formatted like every query). JSON
terms read the payload through ``alk_json`` (NULL for a payload that is not
JSON, so it matches no JSON term). Pages are keyset pages on the id, never an
OFFSET: each arm walks its table's primary key (or ``alk_dead_queue_id`` for a
queue's dead rows) from the cursor and stops at the limit.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import psycopg

from alkstore.core.job import Row
from alkstore.engines.postgres.connections import PostgresConnections
from alkstore.engines.postgres.migrator import CLOCKED_NOW, SERVER_NOW, format_sql

if TYPE_CHECKING:
    from alkstore.core.filters import JobFilter  # annotations only: not imported at start

__all__ = ["LIVE_STATE_SQL", "PostgresSearch", "compile_where"]

# The condition of each live search state (core.filters.LIVE_STATES) on alk_jobs.
LIVE_STATE_SQL: dict[str, str] = {
    "pending": "(state = 'pending' AND run_at <= {now})",
    "delayed": "(state = 'pending' AND run_at > {now})",
    "processing": "state = 'processing'",
    "blocked": "state = 'blocked'",
}

LIVE_COLUMNS = (
    "id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts, "
    "visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, "
    "last_error, NULL::timestamptz AS died_at, dedupe_key, partition_key"
)
DEAD_COLUMNS = (
    "id, queue, payload, 'dead' AS state, priority, run_at, created_at, attempts, max_attempts, "
    "visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, "
    "last_error, died_at, dedupe_key, partition_key"
)
_TIME_COLUMNS = {"created": "created_at", "run_at": "run_at", "died": "died_at"}
_JSON = "{schema}.alk_json(payload)"


def compile_where(f: JobFilter, table: str, prefix: str = "f") -> tuple[str, dict[str, Any]]:
    """The WHERE condition of ``f`` on ``table`` ("live" or "dead") and its parameters
    (named ``prefix``N). ``FALSE`` if no row of that table can match."""
    parts: list[str] = []
    params: dict[str, Any] = {}

    def param(value: Any) -> str:
        name = f"{prefix}{len(params)}"
        params[name] = value
        return f"%({name})s"

    if table == "live":
        states = f.live_states()
        if not states:
            return "FALSE", {}
        if len(states) < len(LIVE_STATE_SQL):
            parts.append("(" + " OR ".join(LIVE_STATE_SQL[s] for s in states) + ")")
    elif not f.wants_dead():
        return "FALSE", {}
    if f.queues:
        parts.append(f"queue = ANY({param(list(f.queues))}::text[])")
    if f.tasks:
        parts.append(f"{_JSON} ->> 'task' = ANY({param(list(f.tasks))}::text[])")
    for term in f.args:
        at = f"({_JSON} #> {param(list(term.path))}::text[])"
        if term.op == "eq":
            parts.append(f"{at} = {param(json.dumps(term.value))}::jsonb")
        else:
            text = term.value if isinstance(term.value, str) else json.dumps(term.value)
            element = param(json.dumps(term.value))
            parts.append(
                f"CASE jsonb_typeof({at})"
                f" WHEN 'array' THEN {at} @> jsonb_build_array({element}::jsonb)"
                f" WHEN 'string' THEN strpos(lower({at} #>> '{{}}'), lower({param(text)})) > 0"
                " ELSE false END"
            )
    if f.error is not None:
        parts.append(f"strpos(lower(last_error), lower({param(f.error)})) > 0")
    if f.worker is not None:
        parts.append(f"worker_id = {param(f.worker)}")
    for rng in f.times:
        column = _TIME_COLUMNS[rng.field]
        if column == "died_at" and table == "live":
            return "FALSE", {}
        if rng.since is not None:
            parts.append(f"{column} > to_timestamp({param(float(rng.since))}::float8)")
        if rng.until is not None:
            parts.append(f"{column} < to_timestamp({param(float(rng.until))}::float8)")
    return (" AND ".join(parts) or "TRUE"), params


class PostgresSearch(PostgresConnections):
    """``Engine.search_jobs``, ``Engine.count_jobs`` and ``Engine.list_key_jobs``."""

    def sql(self, text: str) -> bytes:
        """Format this module's SQL like the named queries (schema, time source)."""
        return format_sql(text, self.schema, SERVER_NOW if self._clock is None else CLOCKED_NOW)

    async def search_jobs(self, f: JobFilter, after: int, limit: int) -> list[Row]:
        live, live_params = compile_where(f, "live", "l")
        dead, dead_params = compile_where(f, "dead", "d")
        arms = []
        if live != "FALSE":
            arms.append(
                f"(SELECT {LIVE_COLUMNS} FROM {{schema}}.alk_jobs"
                f" WHERE {live} AND id > %(after)s ORDER BY id LIMIT %(limit)s)"
            )
        if dead != "FALSE":
            arms.append(
                f"(SELECT {DEAD_COLUMNS} FROM {{schema}}.alk_dead"
                f" WHERE {dead} AND id > %(after)s ORDER BY id LIMIT %(limit)s)"
            )
        if not arms:
            return []
        text = f"SELECT * FROM ({' UNION ALL '.join(arms)}) AS r ORDER BY id LIMIT %(limit)s"
        params = {**live_params, **dead_params, "after": after, "limit": limit}
        return await self._run_rows(text, params, "search_jobs")

    async def list_key_jobs(
        self, queue: str, key: str, state: str | None, limit: int, cursor: int, before: bool
    ) -> list[Row]:
        name = "admin_list_key_before" if before else "admin_list_key"
        params = {"queue": queue, "key": key, "state": state, "limit": limit, "cursor": cursor}
        return await self._fetchall(name, params)

    async def count_jobs(self, f: JobFilter) -> int:
        live, live_params = compile_where(f, "live", "l")
        dead, dead_params = compile_where(f, "dead", "d")
        text = (
            f"SELECT (SELECT count(*) FROM {{schema}}.alk_jobs WHERE {live})"
            f" + (SELECT count(*) FROM {{schema}}.alk_dead WHERE {dead})"
        )
        rows = await self._run_rows(text, {**live_params, **dead_params}, "count_jobs")
        return int(rows[0][0])

    async def _run_rows(self, text: str, params: dict[str, Any], what: str) -> list[Row]:
        pool = self.check_open()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(self.sql(text), self.timed(params))
                return await cur.fetchall()
        except psycopg.Error as e:
            raise await self.failure(e, what) from e
