"""PostgreSQL schema upgrades: ``{schema}.alk_migrations`` records each version applied.

Migrators of one schema (many workers starting at once, ``alkstore migrate``)
take a session advisory lock first, so exactly one applies each migration;
each transactional migration commits with its version row, a no-transaction
one (``CREATE INDEX CONCURRENTLY``) runs its idempotent statements in
autocommit, then records its version.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from alkstore.engines.migrations import Migration, latest_version, load_migrations
from alkstore.engines.queries import load_queries
from alkstore.errors import EngineError

__all__ = [
    "MIGRATIONS",
    "QUERIES",
    "SCHEMA_VERSION",
    "FormattedQueries",
    "check_schema_ready",
    "format_sql",
    "installed_version",
    "migrate_connection",
    "migrate_if_needed",
]

Conn = psycopg.AsyncConnection[TupleRow]

_PACKAGE = "alkstore.engines.postgres"
QUERIES = {**load_queries(_PACKAGE), **load_queries(_PACKAGE, "life.sql")}  # life.sql: #24
SCHEMA_VERSION = latest_version(_PACKAGE)
MIGRATIONS: list[Migration]  # read on first use (``__getattr__``): only a migration needs them


def __getattr__(name: str) -> list[Migration]:
    """``MIGRATIONS``, read and split when first asked for (an up-to-date store never is)."""
    if name != "MIGRATIONS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    found = globals()["MIGRATIONS"] = load_migrations(_PACKAGE)
    return found


SERVER_NOW = "now()"
# The test clock (PostgresEngine.set_clock): the time comes as a parameter.
CLOCKED_NOW = "COALESCE(%(now)s::timestamptz, now())"


def format_sql(text: str, schema: str, now: str = SERVER_NOW) -> bytes:
    """Put the schema into SQL as a quoted identifier wherever ``{schema}`` stands,
    and the time source wherever ``{now}`` stands.

    Only those tokens are replaced, so other braces (``'{}'::jsonb``) stay as
    they are. Kept as bytes: psycopg takes them as they are on every execution.
    """
    text = text.replace("{now}", now)  # one of the two constants above, never input
    ident = sql.Identifier(schema)
    first, *rest = text.split("{schema}")
    parts: list[sql.Composable] = [sql.SQL(first)]  # our own .sql text, never input
    for part in rest:
        parts += [ident, sql.SQL(part)]
    return sql.Composed(parts).as_bytes(None)


class FormattedQueries(dict[str, bytes]):
    """``QUERIES`` formatted for one schema and time source, each when first asked
    for: formatting all ~150 cost every store's open ~0.9 ms, and a worker runs a
    few dozen. An unknown name is a ``KeyError``, as in a plain dict."""

    def __init__(self, schema: str, now: str = SERVER_NOW) -> None:
        super().__init__()
        self._schema, self._now = schema, now

    def __missing__(self, name: str) -> bytes:
        formatted = self[name] = format_sql(QUERIES[name], self._schema, self._now)
        return formatted


async def _lock(conn: Conn, q: dict[str, bytes], params: dict[str, Any]) -> None:
    pause = 0.005
    while True:
        cur = await conn.execute(q["migration_try_lock"], params)
        row = await cur.fetchone()
        if row is not None and row[0]:
            return
        await asyncio.sleep(random.uniform(pause / 2, pause))
        pause = min(pause * 2, 0.1)


async def installed_version(conn: Conn, schema: str) -> int | None:
    """The version ``schema`` is at (0: no alkstore tables), ``None`` if there is no
    such schema; read without DDL, so any role with USAGE and SELECT can ask."""
    q = {name: format_sql(QUERIES[name], schema) for name in ("schema_tables", "schema_version")}
    cur = await conn.execute(q["schema_tables"], {"schema": schema})
    row = await cur.fetchone()
    assert row is not None
    has_schema, has_table = row
    if not has_schema:
        return None
    if not has_table:
        return 0
    cur = await conn.execute(q["schema_version"])
    found = await cur.fetchone()
    return 0 if found is None else int(found[0])


def _newer(schema: str, version: int, target: int) -> psycopg.Error:
    return psycopg.errors.FeatureNotSupported(
        f"schema {schema!r} is at version {version}, newer than this alkstore "
        f"({target}); upgrade alkstore"
    )


async def check_schema_ready(conn: Conn, schema: str) -> int:
    """``migrate=off``: the version ``schema`` is at if it is this alkstore's; else
    :class:`EngineError` saying what is missing (no DDL is run)."""
    version = await installed_version(conn, schema)
    where = f"database {conn.info.dbname!r}"
    if version is None:
        raise EngineError(
            f"PostgreSQL schema {schema!r} does not exist in {where}: no alkstore store "
            "there (check the schema name; `alkstore migrate` creates it)"
        )
    if version == 0:
        raise EngineError(
            f"PostgreSQL schema {schema!r} in {where} has no alkstore tables "
            "(check the schema name; `alkstore migrate` creates them)"
        )
    if version > SCHEMA_VERSION:
        raise _newer(schema, version, SCHEMA_VERSION)
    if version < SCHEMA_VERSION:
        raise EngineError(
            f"PostgreSQL schema {schema!r} is at version {version}, this alkstore needs "
            f"{SCHEMA_VERSION}: run `alkstore migrate` (as a role that may create tables)"
        )
    return version


async def migrate_connection(
    conn: Conn, schema: str, migrations: Sequence[Migration] | None = None
) -> int:
    """Create or upgrade ``schema`` on the autocommit ``conn`` to the last of
    ``migrations`` (default: this alkstore's); the version reached.

    A schema already at that version is only read (no lock, no DDL), so a role
    without CREATE privileges can open an up-to-date store.
    """
    version, _ = await migrate_if_needed(conn, schema, migrations)
    return version


async def migrate_if_needed(
    conn: Conn, schema: str, migrations: Sequence[Migration] | None = None
) -> tuple[int, bool]:
    """:func:`migrate_connection`, also saying whether it migrated: ``False`` when
    the schema was current and ``conn`` was only read (it can then serve as an
    ordinary connection: no session lock or DDL state was left on it)."""
    if migrations is None:  # MIGRATIONS if read (or set: tests put fixtures there)
        migrations = globals().get("MIGRATIONS")
    target = SCHEMA_VERSION if migrations is None else migrations[-1].version
    current = await installed_version(conn, schema)
    if current == target:
        return target, False
    if current is not None and current > target:
        raise _newer(schema, current, target)
    if migrations is None:
        migrations = __getattr__("MIGRATIONS")  # only now: the scripts are read to apply
    q = {name: format_sql(text, schema) for name, text in QUERIES.items()}
    params = {"schema": schema}
    await _lock(conn, q, params)
    try:
        async with conn.transaction():
            await conn.execute(q["create_schema"])
            await conn.execute(q["create_migrations"])
            cur = await conn.execute(q["schema_version"])
            row = await cur.fetchone()
        version = 0 if row is None else int(row[0])
        if version > target:
            raise _newer(schema, version, target)
        for migration in migrations:
            if migration.version <= version:
                continue
            record = {"version": migration.version, "name": migration.name}
            if migration.transactional:
                async with conn.transaction():
                    for statement in migration.statements:
                        await conn.execute(format_sql(statement, schema))
                    await conn.execute(q["record_migration"], record)
            else:
                for statement in migration.statements:
                    await conn.execute(format_sql(statement, schema))
                await conn.execute(q["record_migration"], record)
    finally:
        with contextlib.suppress(psycopg.Error):  # a dead connection released it already
            await conn.execute(q["migration_unlock"], params)
    return max(version, target), True
