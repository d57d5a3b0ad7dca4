"""The SQLite engine's job search: ``core.filters.JobFilter`` compiled to SQL.

Every value is a bound parameter; the only text pasted in is this module's own.
JSON terms read the payload as text only when ``json_valid`` says it is JSON
(a payload that is not matches no JSON term). Case-insensitive terms use
``lower()``, which folds ASCII only on SQLite (PostgreSQL folds all of
Unicode). Pages are keyset pages on the id, never an OFFSET.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

from alkstore.core.job import Row
from alkstore.engines.sqlite.connections import SqliteConnections

if TYPE_CHECKING:
    from alkstore.core.filters import JobFilter  # annotations only: not imported at start

__all__ = ["LIVE_STATE_SQL", "SqliteSearch", "compile_where"]

# The condition of each live search state (core.filters.LIVE_STATES) on alk_jobs.
LIVE_STATE_SQL: dict[str, str] = {
    "pending": "(state = 'pending' AND run_at <= :now)",
    "delayed": "(state = 'pending' AND run_at > :now)",
    "processing": "state = 'processing'",
    "blocked": "state = 'blocked'",
}

LIVE_COLUMNS = (
    "id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts, "
    "visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, "
    "last_error, NULL AS died_at, dedupe_key, partition_key"
)
DEAD_COLUMNS = (
    "id, queue, payload, 'dead' AS state, priority, run_at, created_at, attempts, max_attempts, "
    "visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, "
    "last_error, died_at, dedupe_key, partition_key"
)
_TIME_COLUMNS = {"created": "created_at", "run_at": "run_at", "died": "died_at"}
_JSON = "(CASE WHEN json_valid(CAST(payload AS TEXT)) THEN CAST(payload AS TEXT) END)"
# a JSON element as canonical JSON text (json_each gives true/false as 1/0)
_ELEMENT = (
    "CASE type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null' "
    "ELSE json_quote(value) END"
)


def _path(keys: tuple[str, ...]) -> str:
    # keys are checked by core.filters (letters, digits, _ and -): quoting is enough
    return "$" + "".join(f'."{k}"' for k in keys)


def compile_where(f: JobFilter, table: str, prefix: str = "f") -> tuple[str, dict[str, Any]]:
    """The WHERE condition of ``f`` on ``table`` ("live" or "dead") and its parameters
    (named ``prefix``N; ``:now`` is the caller's). ``0`` if no row can match."""
    parts: list[str] = []
    params: dict[str, Any] = {}

    def param(value: Any) -> str:
        name = f"{prefix}{len(params)}"
        params[name] = value
        return f":{name}"

    if table == "live":
        states = f.live_states()
        if not states:
            return "0", {}
        if len(states) < len(LIVE_STATE_SQL):
            parts.append("(" + " OR ".join(LIVE_STATE_SQL[s] for s in states) + ")")
    elif not f.wants_dead():
        return "0", {}
    if f.queues:
        parts.append(f"queue IN ({', '.join(param(q) for q in f.queues)})")
    if f.tasks:
        names = ", ".join(param(t) for t in f.tasks)
        parts.append(f"json_extract({_JSON}, '$.task') IN ({names})")
    for term in f.args:
        path = param(_path(term.path))
        value = param(json.dumps(term.value))
        if term.op == "eq":
            parts.append(f"({_JSON} -> {path}) = json({value})")
        else:
            text = term.value if isinstance(term.value, str) else json.dumps(term.value)
            parts.append(
                f"CASE json_type({_JSON}, {path})"
                f" WHEN 'array' THEN EXISTS (SELECT 1 FROM json_each({_JSON}, {path})"
                f" WHERE {_ELEMENT} = json({value}))"
                f" WHEN 'text' THEN instr(lower(json_extract({_JSON}, {path})),"
                f" lower({param(text)})) > 0"
                " ELSE 0 END"
            )
    if f.error is not None:
        parts.append(f"instr(lower(last_error), lower({param(f.error)})) > 0")
    if f.worker is not None:
        parts.append(f"worker_id = {param(f.worker)}")
    for rng in f.times:
        column = _TIME_COLUMNS[rng.field]
        if column == "died_at" and table == "live":
            return "0", {}
        if rng.since is not None:
            parts.append(f"{column} > {param(float(rng.since))}")
        if rng.until is not None:
            parts.append(f"{column} < {param(float(rng.until))}")
    return (" AND ".join(parts) or "1"), params


class SqliteSearch(SqliteConnections):
    """``Engine.search_jobs``, ``Engine.count_jobs`` and ``Engine.list_key_jobs``."""

    async def search_jobs(self, f: JobFilter, after: int, limit: int) -> list[Row]:
        live, live_params = compile_where(f, "live", "l")
        dead, dead_params = compile_where(f, "dead", "d")
        arms = []
        if live != "0":
            arms.append(
                f"SELECT * FROM (SELECT {LIVE_COLUMNS} FROM alk_jobs"
                f" WHERE {live} AND id > :after ORDER BY id LIMIT :limit)"
            )
        if dead != "0":
            arms.append(
                f"SELECT * FROM (SELECT {DEAD_COLUMNS} FROM alk_dead"
                f" WHERE {dead} AND id > :after ORDER BY id LIMIT :limit)"
            )
        if not arms:
            return []
        text = f"SELECT * FROM ({' UNION ALL '.join(arms)}) ORDER BY id LIMIT :limit"
        params = {**live_params, **dead_params, "after": after, "limit": limit}

        def read(conn: sqlite3.Connection) -> list[Row]:
            return conn.execute(text, {**params, "now": self._clock()}).fetchall()

        return await self._call(self._read, read)

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
            f"SELECT (SELECT count(*) FROM alk_jobs WHERE {live})"
            f" + (SELECT count(*) FROM alk_dead WHERE {dead})"
        )
        params = {**live_params, **dead_params}

        def read(conn: sqlite3.Connection) -> int:
            return int(conn.execute(text, {**params, "now": self._clock()}).fetchone()[0])

        return await self._call(self._read, read)
