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

from alkstore.engines.migrations import Migration, load_migrations
from alkstore.engines.queries import load_queries

__all__ = ["MIGRATIONS", "QUERIES", "SCHEMA_VERSION", "format_sql", "migrate_connection"]

Conn = psycopg.AsyncConnection[TupleRow]

_PACKAGE = "alkstore.engines.postgres"
QUERIES = load_queries(_PACKAGE)
MIGRATIONS = load_migrations(_PACKAGE)
SCHEMA_VERSION = MIGRATIONS[-1].version


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


async def _lock(conn: Conn, q: dict[str, bytes], params: dict[str, Any]) -> None:
    pause = 0.005
    while True:
        cur = await conn.execute(q["migration_try_lock"], params)
        row = await cur.fetchone()
        if row is not None and row[0]:
            return
        await asyncio.sleep(random.uniform(pause / 2, pause))
        pause = min(pause * 2, 0.1)


async def migrate_connection(
    conn: Conn, schema: str, migrations: Sequence[Migration] | None = None
) -> int:
    """Create or upgrade ``schema`` on the autocommit ``conn`` to the last of
    ``migrations`` (default: this alkstore's); the version reached."""
    if migrations is None:
        migrations = MIGRATIONS
    q = {name: format_sql(text, schema) for name, text in QUERIES.items()}
    target = migrations[-1].version
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
            raise psycopg.errors.FeatureNotSupported(
                f"schema {schema!r} is at version {version}, newer than this alkstore "
                f"({target}); upgrade alkstore"
            )
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
    return max(version, target)
